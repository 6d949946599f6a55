"""Ed25519 signatures over package manifests, through PyNaCl (libsodium); nothing hand-rolled.

PyNaCl is the optional ``signing`` extra: a device without trusted keys never imports it. Keys
on disk and in the config are base64 of the raw 32 bytes (the private key file holds the seed),
short enough to paste into a TOML list.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Optional

from edge_agent import install_hint
from edge_agent.errors import ConfigError, ModelError

if TYPE_CHECKING:
    from nacl.signing import SigningKey

INSTALL_HINT = install_hint("signing") + " (PyNaCl)"


def _nacl() -> ModuleType:
    try:
        import nacl.exceptions
        import nacl.signing
    except ImportError:
        raise ConfigError(f"package signatures need PyNaCl, which is not installed: {INSTALL_HINT}") from None
    return nacl


def available() -> bool:
    try:
        _nacl()
    except ConfigError:
        return False
    return True


def _b64_key(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise ConfigError(f"{what} = {text.strip()[:60]!r}: expected base64 of a 32-byte Ed25519 key")
    return raw


def generate_key(path: Path) -> str:
    """Write a new private key (mode 0600) to ``path``; return the public key (base64)."""
    nacl = _nacl()
    key = nacl.signing.SigningKey.generate()
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(base64.b64encode(bytes(key)).decode("ascii") + "\n")
    return base64.b64encode(bytes(key.verify_key)).decode("ascii")


def _load_key(path: Path) -> SigningKey:
    _nacl()  # PyNaCl installed, or say how to install it
    from nacl.signing import SigningKey

    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the signing key ({exc})") from None
    return SigningKey(_b64_key(text, str(path)))


def public_key(path: Path) -> str:
    return base64.b64encode(bytes(_load_key(path).verify_key)).decode("ascii")


def sign(data: bytes, key_path: Path) -> bytes:
    return bytes(_load_key(key_path).sign(data).signature)


def check_keys(keys: Sequence[str]) -> None:
    """Fail at config time on a malformed key or a missing library, not at the first install."""
    if keys:
        _nacl()
    for i, k in enumerate(keys):
        _b64_key(k, f"model_update.trusted_keys[{i}]")


def verify(data: bytes, signature: Optional[bytes], keys: list[str], source: str) -> Optional[int]:
    """With trusted keys: the index of the key that signed ``data``, else ModelError. Without keys:
    None (nothing to check against; the operator chose not to require signatures)."""
    if not keys:
        return None
    if signature is None:
        raise ModelError(f"{source}: unsigned package refused (model_update.trusted_keys is set)")
    nacl = _nacl()
    for i, k in enumerate(keys):
        if len(signature) != 64:
            break
        try:
            nacl.signing.VerifyKey(_b64_key(k, f"model_update.trusted_keys[{i}]")).verify(data, signature)
            return i
        except nacl.exceptions.BadSignatureError:
            continue
    raise ModelError(
        f"{source}: bad signature: manifest.sig does not verify against any of the {len(keys)} trusted key(s)"
    )
