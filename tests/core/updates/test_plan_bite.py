"""core/updates/plan.py, the edges its mutation run left (issue 36): the largest body a plan can
carry, and a chunk hash with a letter that is no hex digit."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from edge_agent.core.updates.plan import MAX_CHUNK, MAX_PLAN_CHUNKS, TransferPlan, plan_chunk_size

SHA = "0123456789abcdef" * 4


def test_the_largest_body_has_chunks_of_exactly_max_chunk() -> None:
    assert plan_chunk_size(MAX_PLAN_CHUNKS * MAX_CHUNK) == MAX_CHUNK
    with pytest.raises(ValueError, match=f"needs chunks over {MAX_CHUNK} bytes"):
        plan_chunk_size(MAX_PLAN_CHUNKS * MAX_CHUNK + 1)


@pytest.mark.parametrize("bad", ["X" * 64, "X" + SHA[1:], SHA[:-1] + "g", SHA[:-1] + " "])
def test_a_hash_with_a_character_that_is_no_hex_digit_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="expected 64 lowercase hex digits"):
        TransferPlan(size=2500, chunk_size=1024, chunks=[SHA, SHA, bad])
