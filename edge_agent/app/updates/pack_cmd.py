"""``edge-agent model pack|keygen``: the package author's side of model updates (on a PC, once).

``pack`` refuses what every device would refuse (the broken-model guard, an onnxruntime too old
for the files, a bad version), so a fleet never receives a package it cannot take. The device's
side (install, status, rollback, push) is app.model_cmd; docs/model-updates.md describes both.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from edge_agent.errors import ConfigError, ModelError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from edge_agent.app.cli.configfile import Subparsers
    from edge_agent.core.updates.package import Manifest


def register_under(msub: Subparsers) -> None:
    """Adds ``pack`` and ``keygen`` to the ``model`` command's subparsers (called by app.model_cmd)."""
    pk = msub.add_parser("pack", help="make a model package from ONNX file(s)")
    pk.add_argument("detector", help="detector ONNX file")
    pk.add_argument("--classifier", help="classifier ONNX file for the crops")
    pk.add_argument("--float-source", help="the float model a TensorRT engine should be built from")
    pk.add_argument("-o", "--output", required=True, help="package file to write (e.g. model-1.2.pkg)")
    pk.add_argument("--name", help="package name (default: the detector's file stem)")
    pk.add_argument("--version", dest="pkg_version", help="package version (default: UTC timestamp)")
    pk.add_argument("--min-agent-version", help="oldest edge-agent that may install it (default: this one)")
    pk.add_argument(
        "--for-device",
        action="append",
        default=[],
        metavar="ID",
        help="a device that may install it (repeatable; signed); a package pushed over MQTT needs at least "
        "one --for-device or --for-group; a local `model install` needs neither",
    )
    pk.add_argument(
        "--for-group", action="append", default=[], metavar="G", help="a group whose devices may install it"
    )
    pk.add_argument(
        "--board",
        action="append",
        default=[],
        metavar="KIND",
        help=f"a board kind that may install it (repeatable; default any): {', '.join(BOARD_KINDS)}",
    )
    pk.add_argument(
        "--chunk-kb",
        type=int,
        default=256,
        help="MQTT chunk size in KiB (default 256; signed: every chunk's hash is listed)",
    )
    pk.add_argument("--probe", help="folder of probe images the gate uses when a device's ring is empty")
    pk.add_argument("--sign", metavar="KEYFILE", help="sign the manifest with this Ed25519 private key")
    pk.add_argument(
        "--skip-guard",
        action="store_true",
        help="pack a detector the broken-model guard flags (to test a fleet's gate; devices refuse it)",
    )
    pk.add_argument(
        "--force",
        action="store_true",
        help="devices switch even if their gate refuses (in the manifest; honoured only when signed "
        "by a trusted key)",
    )
    pk.set_defaults(func=pack)

    kg = msub.add_parser("keygen", help="make an Ed25519 signing key; prints the public key for the config")
    kg.add_argument("keyfile", help="private key file to create (mode 0600)")
    kg.set_defaults(func=keygen)


def pack(args: argparse.Namespace) -> int:
    from edge_agent import __version__
    from edge_agent.adapters.runtime.onnx_model import OnnxModel
    from edge_agent.adapters.updates import signing
    from edge_agent.adapters.updates.package_file import describe_file, write_package
    from edge_agent.core.updates.package import Manifest, manifest_bytes, parse_manifest, parse_version
    from edge_agent.inference.guard import check_detector, describe
    from edge_agent.inference.pipeline import Classifier, Detector

    for flag, value in (("--version", args.pkg_version), ("--min-agent-version", args.min_agent_version)):
        if value is not None:
            try:
                parse_version(value)
            except ValueError as exc:
                raise ConfigError(f"{flag}: {exc}") from None
    for kind in args.board:
        if kind not in BOARD_KINDS:
            raise ConfigError(f"--board {kind[:40]!r}: expected one of {', '.join(BOARD_KINDS)}")
    from edge_agent.core.updates.plan import MAX_CHUNK, MIN_CHUNK

    if not MIN_CHUNK // 1024 <= args.chunk_kb <= MAX_CHUNK // 1024:
        raise ConfigError(f"--chunk-kb {args.chunk_kb}: expected {MIN_CHUNK // 1024}..{MAX_CHUNK // 1024}")
    out_dir = Path(args.output).parent
    if not out_dir.is_dir():
        raise ModelError(f"-o {args.output}: the folder {out_dir} does not exist")
    det_path = Path(args.detector)
    det = Detector(OnnxModel(det_path, warmup=False))  # refuses what is not a detector
    problems = check_detector(det)
    if problems and not args.skip_guard:  # every device would refuse it: say so here, once
        raise ModelError(f"{describe(det_path, problems)} (not packed; --skip-guard packs it anyway)")
    if problems:
        sys.stderr.write(f"warning: {describe(det_path, problems)} (packed: --skip-guard)\n")
    sources: dict[str, Path] = {"detector.onnx": det_path}
    files = {"detector": describe_file(det_path, "detector.onnx")}
    labels = {"detector": [det.names[i] for i in sorted(det.names)]}
    if args.classifier:
        cpath = Path(args.classifier)
        cls = Classifier(OnnxModel(cpath, warmup=False))
        sources["classifier.onnx"] = cpath
        files["classifier"] = describe_file(cpath, "classifier.onnx")
        if cls.model.info.names:
            labels["classifier"] = [cls.model.info.names[i] for i in sorted(cls.model.info.names)]
    if args.float_source:
        sources["float_source.onnx"] = Path(args.float_source)
        files["float_source"] = describe_file(Path(args.float_source), "float_source.onnx")
    probe = []
    if args.probe:
        imgs = sorted(p for p in Path(args.probe).iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
        if not imgs:
            raise ModelError(f"{args.probe}: no .jpg/.png probe images")
        for p in imgs[:32]:
            if not PROBE_NAME.fullmatch(p.name):  # the manifest's file-name rule: one line, not pydantic's
                raise ModelError(
                    f"--probe {args.probe}: {p.name[:60]!r}: a probe image's name may hold only "
                    "A-Z a-z 0-9 _ . - (the package's file-name rule); rename it"
                )
            sources[f"probe/{p.name}"] = p
            probe.append(describe_file(p, f"probe/{p.name}"))
    stem = det_path.name[: -len(".onnx")] if det_path.name.endswith(".onnx") else det_path.name
    now = datetime.now(timezone.utc)
    m = _manifest(
        Manifest,
        name=args.name or stem.replace(" ", "_"),
        version=args.pkg_version or now.strftime("%Y%m%d.%H%M%S"),
        task="detect+classify" if args.classifier else "detect",
        created_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        min_agent_version=args.min_agent_version or __version__,
        min_onnxruntime=_min_onnxruntime(sources),
        files=files,
        labels=labels,
        probe=probe,
        force=args.force,
        for_devices=args.for_device,
        for_groups=args.for_group,
        boards=args.board,
    )
    if args.force and not args.sign:
        sys.stderr.write("warning: --force without --sign: devices ignore force in an unsigned manifest\n")
    if not (args.for_device or args.for_group):
        sys.stderr.write(
            "note: no --for-device / --for-group: devices install it locally only (`model install`), "
            "never over MQTT\n"
        )
    parse_manifest(manifest_bytes(m), "pack")  # the same checks a device will make
    key = Path(args.sign) if args.sign else None
    if key is not None:
        signing.public_key(key)  # a bad key file is one line now, not after hashing the models
    out = Path(args.output)
    try:
        m = write_package(
            out,
            m,
            sources,
            signer=(lambda data: signing.sign(data, key)) if key is not None else None,
            chunk_size=args.chunk_kb * 1024,
        )
    except OSError as exc:
        raise ModelError(f"-o {out}: cannot write the package: {exc.strerror or exc}") from None
    sys.stdout.write(
        f"{out}: {m.name} {m.version} ({m.task}), {out.stat().st_size} bytes, "
        f"{'signed' if key else 'unsigned'}, for {_targets(m)}, detector sha256 {files['detector'].sha256[:16]}...\n"
    )
    return 0


M = TypeVar("M", bound="BaseModel")
PROBE_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # core.updates.package's _SAFE_NAME for one path part
FLAG_OF = {
    "name": "--name",
    "version": "--version",
    "min_agent_version": "--min-agent-version",
    "for_devices": "--for-device",
    "for_groups": "--for-group",
    "boards": "--board",
}
BOARD_KINDS = (
    "rpi4",
    "rpi5",
    "rpi",
    "jetson",
    "generic-arm",
    "generic-x86",
    "generic",
)  # adapters.runtime.board


def _manifest(cls: type[M], **fields: object) -> M:
    """The manifest, or one error naming the flag whose value its schema refuses (a --name with a
    '/' or a space in it): never pydantic's traceback."""
    from pydantic import ValidationError

    try:
        return cls(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "manifest"
        value = fields.get(field)
        if isinstance(value, list) and len(first["loc"]) > 1 and isinstance(first["loc"][1], int):
            value = value[first["loc"][1]]  # the one --for-device / --for-group / --board at fault
        msg = str(first["msg"])
        if isinstance(value, list) and msg.startswith("Value error, item "):  # the manifest's target check
            _, item, why = msg.split(": ", 2)
            raise ConfigError(
                f"{FLAG_OF.get(field, field)} {item}: {why} (the package manifest's rule)"
            ) from None
        raise ConfigError(
            f"{FLAG_OF.get(field, field)} {str(value)[:60]!r}: {first['msg']} (the package manifest's rule)"
        ) from None


def _targets(m: Manifest) -> str:
    named = [*(f"device {d}" for d in m.for_devices), *(f"group {g}" for g in m.for_groups)]
    boards = f" on {'/'.join(m.boards)}" if m.boards else ""
    return (
        ", ".join(named[:6]) + (", ..." if len(named) > 6 else "") if named else "local installs"
    ) + boards


def _min_onnxruntime(sources: dict[str, Path]) -> str:
    """The oldest onnxruntime that loads every ONNX file of the package (devices refuse it otherwise)."""
    from edge_agent.core.runtime.onnx_wire import summarize
    from edge_agent.core.runtime.ort_compat import oldest_runtime

    need = "0"
    for name, path in sources.items():
        if name.endswith(".onnx"):
            g = summarize(path.read_bytes())
            row = oldest_runtime(g.ir_version, g.opsets)
            if row is None:
                raise ModelError(
                    f"{path}: IR {g.ir_version} / opsets {g.opsets} are newer than any known onnxruntime"
                )
            need = max(need, row.name, key=lambda v: tuple(int(x) for x in v.split(".")))
    return need


def keygen(args: argparse.Namespace) -> int:
    from edge_agent.adapters.updates import signing

    try:
        pub = signing.generate_key(Path(args.keyfile))
    except FileExistsError:
        raise ConfigError(f"{args.keyfile}: exists; refusing to overwrite a signing key") from None
    sys.stdout.write(
        f"private key: {args.keyfile} (keep it off the devices)\n"
        f"public key for [model_update] trusted_keys on the devices:\n  {pub}\n"
    )
    return 0
