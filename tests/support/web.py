"""A request to the device page on loopback (tests/app/web): status and the JSON, or the bytes."""

from __future__ import annotations

import http.client
import json
from typing import Any


def ask(port: int, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, Any]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=body or None, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if (r.getheader("Content-Type") or "").startswith(
        "application/json"
    ) else data
