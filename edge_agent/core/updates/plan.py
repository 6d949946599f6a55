"""The MQTT transfer plan a signed manifest carries: the package body's size, its chunking and the
sha256 of every chunk (pure).

A chunk is checked against the *signed* hash before a byte of it is written, so a broker
publisher who has no signing key cannot make a device store anything (issue: 100 MiB of chunks
after an unsigned begin filled a 64 MiB state disk and the outbox dropped 456 of 1,245 results).
The body is the package tar up to its manifest member (``model pack`` writes the files first),
so the hashes never have to cover the manifest that lists them.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

MIN_CHUNK = 1024  # 1 KiB: below this the per-chunk files and PUBACKs cost more than the data
MAX_CHUNK = 16 << 20  # 16 MiB: one chunk is held in memory by paho and by the receiver
DEFAULT_CHUNK = 256 << 10
# 4096 hashes of 64 hex = 262 KiB of manifest: the begin that carries it stays well under
# MAX_SIGNED_BEGIN; a 512 MB package then has chunks of 128 KiB or more
MAX_PLAN_CHUNKS = 4096


class TransferPlan(BaseModel):
    """``size`` bytes of body in ``len(chunks)`` chunks of ``chunk_size`` (the last one shorter)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    size: int = Field(ge=1, le=1 << 40)
    chunk_size: int = Field(ge=MIN_CHUNK, le=MAX_CHUNK)
    chunks: List[str] = Field(min_length=1, max_length=MAX_PLAN_CHUNKS)

    @model_validator(mode="after")
    def _consistent(self) -> TransferPlan:
        problem = plan_problem(self.size, self.chunk_size, self.chunks)  # plain: mutmut 3 mutates it
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def count(self) -> int:
        return len(self.chunks)

    def chunk_len(self, idx: int) -> int:
        """The exact length chunk ``idx`` must have (every chunk is full but the last)."""
        return self.chunk_size if idx < self.count - 1 else self.size - self.chunk_size * (self.count - 1)


def plan_problem(size: int, chunk_size: int, chunks: Sequence[str]) -> Optional[str]:
    """Why ``chunks`` is not the hash list of ``size`` bytes in chunks of ``chunk_size``, or None."""
    if len(chunks) != -(-size // chunk_size):
        return (
            f"{len(chunks)} chunk hashes for {size} bytes in chunks of {chunk_size}: "
            f"expected {-(-size // chunk_size)}"
        )
    bad = next((h for h in chunks if len(h) != 64 or h.strip("0123456789abcdef")), None)
    if bad is not None:
        return f"chunk hash {bad[:70]!r}: expected 64 lowercase hex digits"
    return None


def plan_chunk_size(approx_size: int, wanted: int = DEFAULT_CHUNK) -> int:
    """``wanted``, or larger (whole KiB) so that a body of about ``approx_size`` bytes needs at most
    :data:`MAX_PLAN_CHUNKS` chunks."""
    need = -(-max(approx_size, 1) // MAX_PLAN_CHUNKS)
    size = max(wanted, -(-need // 1024) * 1024)
    if size > MAX_CHUNK:
        raise ValueError(f"a body of {approx_size} bytes needs chunks over {MAX_CHUNK} bytes")
    return size
