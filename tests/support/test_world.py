"""The one agent world's config writer: what it writes reads back as the document it was given
(else a test's override would silently not reach the agent), and overrides merge as documented."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomllib
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_agent.core.config.schema import parse_config
from support.toml_text import merged, toml_text
from support.world import agent_toml

KEYS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)  # quoted when not bare
SCALARS = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3))
TABLES = st.dictionaries(KEYS, VALUES, max_size=4)


@settings(max_examples=200, deadline=None)
@given(
    doc=st.dictionaries(
        KEYS,
        st.one_of(
            TABLES,
            st.builds(lambda t, sub: {**t, "sub": sub}, TABLES, TABLES),
            st.lists(TABLES.filter(bool), min_size=1, max_size=2),
        ),
        max_size=4,
    )
)
def test_what_is_written_reads_back_as_the_document(doc: dict[str, Any]) -> None:
    assert tomllib.loads(toml_text(doc)) == doc


def test_none_removes_a_key_or_a_section_and_tables_merge_key_by_key() -> None:
    base = {"mqtt": {"host": "h", "port": 1}, "queue": {"path": "q"}}
    assert merged(base, {"mqtt": {"port": 2, "host": None}, "queue": None, "new": {"a": 1}}) == {
        "mqtt": {"port": 2},
        "new": {"a": 1},
    }


def test_sections_then_extra_lay_over_the_world_and_extra_starts_in_health(tmp_path: Path) -> None:
    text = agent_toml(
        tmp_path,
        tmp_path / "cam",
        tmp_path / "det.onnx",
        port=1883,
        camera="loop = true\nfps = 5.0",
        mqtt={"host": None},
        extra='prometheus_port = 9100\n[motion]\nenabled = true\n[[lines]]\nname = "gate"\npoints = [[0.5, 0.0], [0.5, 1.0]]',
    )
    cfg = parse_config(text)
    assert (cfg.camera.source, cfg.camera.loop, cfg.camera.fps) == (str(tmp_path / "cam"), True, 5.0)
    assert cfg.mqtt.enabled and cfg.mqtt.port == 1883 and "host" not in tomllib.loads(text)["mqtt"]
    assert cfg.health.prometheus_port == 9100 and cfg.health.status_file == str(tmp_path / "status.json")
    assert cfg.motion.enabled and [line.name for line in cfg.lines] == ["gate"]
    assert cfg.queue.path == str(tmp_path / "outbox.db") and cfg.device.id == "cam-1"
