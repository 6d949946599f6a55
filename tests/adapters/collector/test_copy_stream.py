"""PostgreSQL's insert as the collector sends it (adapters/collector/ingest.py, confirmed.py): the
binary COPY stream made by hand, in pieces, reads back as the values sent (times as
``to_timestamp()`` rounds them, NULLs, UTF-8, bodies as jsonb); and the round's watermark plan made
while the COPY is in flight (confirmed.Early) gives what the plan made after it gives, conflicts
included (then it is made again)."""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from edge_agent.adapters.collector import confirmed, ingest
from edge_agent.adapters.collector.db import CollectorDb
from edge_agent.adapters.collector.trust import Limits
from edge_agent.core.messages.confirm import decode
from edge_agent.core.messages.fleet import Record

NOW = 1796000000.0
SIGNATURE = b"PGCOPY\n\xff\r\n\x00"


def _rec(
    seq: int, t: float, camera: Optional[str] = None, msg_id: Optional[str] = "m", dev: str = "d1"
) -> Record:
    body = json.dumps({"seq": seq, "boot": 1, "label": "caf\u00e9 \u2603", "v": [1.5, None, True]})
    return Record(dev, 1, seq, "detections", None if msg_id is None else f"{msg_id}{seq}", t, body, camera)


def test_the_stream_comes_in_pieces_of_rows_signature_first_trailer_last() -> None:
    recs = [_rec(s, NOW + s, camera="cam-1") for s in range(1, 8)]  # no NULL: it ends in ff ff too
    whole = list(ingest.copy_data(recs, NOW, rows=1000))
    pieces = list(ingest.copy_data(recs, NOW, rows=3))
    assert len(whole) == 1 and len(pieces) == 3  # rows 1-3, 4-6, then 7 and the trailer
    assert b"".join(pieces) == whole[0]
    assert pieces[0].startswith(SIGNATURE + bytes(8)) and not pieces[1].startswith(SIGNATURE)
    assert whole[0].endswith(b"\xff\xff") and not pieces[0].endswith(b"\xff\xff")
    assert list(ingest.copy_data(recs[:6], NOW, rows=3))[-1] == b"\xff\xff"  # a last piece of its own
    assert b"".join(ingest.copy_data([], NOW)) == SIGNATURE + bytes(8) + b"\xff\xff"


@pytest.fixture
def pg(postgres: Any) -> Any:
    db = CollectorDb(postgres.url)
    db.conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    db.migrate()
    yield db
    db.close()


def test_every_value_reads_back_as_sent(pg: CollectorDb) -> None:
    times = [NOW + 0.1234565, NOW + 0.1234575, 1.5, NOW + 86399.999999, 946684800.0 - 0.25]
    recs = [
        _rec(1, times[0], camera="door-1"),
        _rec(2, times[1], msg_id=None),
        _rec(3, times[2], camera="\u00e9tage"),
        _rec(4, times[3]),
        _rec(5, times[4], dev="d\u00e9v"),
    ]
    received = NOW + 0.0000005
    assert ingest.copy_pg(pg, recs, received) == 5
    rows = pg.conn.execute(
        "SELECT device, boot, seq, kind, msg_id, camera, body, time = to_timestamp(t.t), "
        "received = to_timestamp(%s) FROM messages JOIN unnest(%s::int8[], %s::float8[]) AS t(s, t) "
        "ON t.s = messages.seq ORDER BY seq",
        [received, [1, 2, 3, 4, 5], times],
    ).fetchall()
    assert [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
        (x.device, x.boot, x.seq, x.kind, x.msg_id, x.camera) for x in recs
    ]
    assert [r[6] for r in rows] == [json.loads(x.body) for x in recs]  # jsonb, from the text as sent
    assert all(r[7] and r[8] for r in rows)  # microseconds rounded as to_timestamp() rounds them


def _rounds() -> list[list[Record]]:
    first = [_rec(s, NOW + s) for s in (1, 2, 3, 7, 8)]
    # then a new seq and two conflicts: seq 2 under another id, and a seq implausibly far ahead,
    # not stored but held in conflicts and confirmed (the device stops resending it)
    far = 9 + Limits().seq_jump_max + 100
    return [first, [_rec(9, NOW + 9), _rec(2, NOW + 2, msg_id="other"), _rec(far, NOW + 10)]]


def _stored(db: CollectorDb, idle: bool) -> list[Any]:
    for t in ("messages", "confirmed", "devices", "conflicts"):
        db.conn.execute(f"DELETE FROM {t}")
    db.known.forget()
    out: list[Any] = []
    for r in _rounds():
        db.store(r, NOW, idle=(lambda: None) if idle else None)
        out.append((dict(db.confirms), dict(db.last_conflicts)))
    out.append(db.conn.execute("SELECT device, boot, lo, hi FROM confirmed ORDER BY 1, 2, 3").fetchall())
    return out


def test_the_plan_made_during_the_copy_is_the_one_made_after(
    pg: CollectorDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    real = confirmed.plan

    def spy(*a: Any, **k: Any) -> confirmed.Plan:
        made.append(pg.conn.info.transaction_status.name)  # where: inside the COPY, or after it
        return real(*a, **k)

    monkeypatch.setattr(confirmed, "plan", spy)
    idles: list[int] = []
    pg.store(_rounds()[0], NOW, idle=lambda: idles.append(len(made)))
    assert idles == [0] and made == ["ACTIVE"]  # the idle first (the next round), then the plan, in the COPY
    made.clear()
    during = _stored(pg, idle=True)
    assert made == ["ACTIVE", "ACTIVE", "INTRANS"]  # the conflicts' round: made again, with them
    made.clear()
    monkeypatch.setattr(confirmed.Early, "__call__", lambda self: None)  # no plan during the COPY
    after = _stored(pg, idle=True)
    assert made == ["INTRANS"] * 2  # each made after the COPY, in confirmed.update
    assert during == after and during[1][1] == {"d1": 2}
    far = _rounds()[1][2].seq
    assert (far, far) in decode(during[1][0]["d1"])[1] and ("d1", 1, far, far) in during[2]
