"""Small shared helpers for outbox tests (tests/ is on sys.path)."""

from __future__ import annotations

from edge_agent.core.queue_policy import Limits

TOPIC = "edge/dev-1/detections"


def big_limits(**kw: object) -> Limits:
    """Caps far above what a test stores, overridable one at a time."""
    base: dict[str, object] = {"max_messages": 10_000_000, "max_bytes": 10**10, "max_age_s": 1e9}
    base.update(kw)
    return Limits(**base)  # type: ignore[arg-type]
