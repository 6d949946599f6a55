"""Request bounds (pure): the body size before anything is read, and the image out of a body.

``POST /api/v1/infer`` takes ``multipart/form-data`` (``curl -F image=@bus.jpg``) or the image
bytes themselves (``curl --data-binary @bus.jpg -H 'Content-Type: image/jpeg'``). The multipart
reader is a small one on purpose: the stdlib's ``cgi`` is gone in Python 3.13, and a body is
already bounded by ``max_body_mb`` before it reaches here. Every refusal is a :class:`RequestError`
with the HTTP status and one line.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

MAX_PARTS = 16  # a form with more parts is not ours


class RequestError(Exception):
    """A request refused: ``status`` (400, 411, 413, 415, 429...) and one line for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def body_length(content_length: Optional[str], max_bytes: int) -> int:
    """The declared body size, checked before the body is read (no chunked bodies here)."""
    if content_length is None or not content_length.strip():
        raise RequestError(411, "a body needs a Content-Length header")
    try:
        n = int(content_length.strip())
    except ValueError:
        raise RequestError(400, f"Content-Length {content_length!r} is not a number") from None
    if n < 0:
        raise RequestError(400, f"Content-Length {n} is negative")
    if n > max_bytes:
        raise RequestError(
            413, f"body of {n} bytes exceeds the limit of {max_bytes} bytes (web.max_body_mb); not read"
        )
    return n


def header_params(value: str) -> Tuple[str, Dict[str, str]]:
    """``multipart/form-data; boundary=x`` -> (``multipart/form-data``, {``boundary``: ``x``})."""
    head, *rest = value.split(";")
    params = {}
    for item in rest:
        key, sep, val = item.strip().partition("=")
        if sep:
            val = val.strip()
            if len(val) >= 2 and val[0] == val[-1] == '"':
                val = val[1:-1]
            params[key.strip().lower()] = val
    return head.strip().lower(), params


def multipart_fields(body: bytes, boundary: str) -> Dict[str, bytes]:
    """The parts of a ``multipart/form-data`` body by their field name (the first of a name wins)."""
    if not boundary or len(boundary) > 200:
        raise RequestError(400, "multipart body without a usable boundary")
    delim = b"--" + boundary.encode("latin-1")
    chunks = body.split(delim)
    if len(chunks) < 3:
        raise RequestError(400, "multipart body without any part (is the boundary right?)")
    fields: Dict[str, bytes] = {}
    for chunk in chunks[1 : MAX_PARTS + 1]:
        if chunk.startswith(b"--"):  # the closing delimiter
            break
        head, sep, data = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise RequestError(400, "multipart part without a blank line after its headers")
        name = None
        for line in head.decode("latin-1").split("\r\n"):
            key, _, val = line.partition(":")
            if key.strip().lower() == "content-disposition":
                name = header_params(val)[1].get("name")
        if name is not None and name not in fields:
            fields[name] = data[:-2] if data.endswith(b"\r\n") else data
    return fields


def image_from_body(content_type: Optional[str], body: bytes, field: str = "image") -> bytes:
    """The image bytes of an infer request: the form field ``field``, or a raw ``image/*`` body."""
    kind, params = header_params(content_type or "")
    if kind == "multipart/form-data":
        fields = multipart_fields(body, params.get("boundary", ""))
        if field not in fields:
            shown = ", ".join(sorted(fields)) or "none"
            raise RequestError(400, f"no form field {field!r} (fields: {shown}); send -F {field}=@FILE")
        data = fields[field]
    elif kind.startswith("image/") or kind == "application/octet-stream":
        data = body
    else:
        raise RequestError(
            415, f"Content-Type {kind or 'none'!r}: expected multipart/form-data (-F image=@FILE) or image/*"
        )
    if not data:
        raise RequestError(400, "the image is empty")
    return data
