"""`model pack` / `model push` mistakes (issue 22): one line naming the argument, exit != 0, nothing sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_updates import INT8, cli


def test_pack_into_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    r = cli("model", "pack", str(INT8), "-o", "/missing/dir/x.pkg")
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "/missing/dir" in r.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--device", "cam-1", "--chunk-kb", "0"], "--chunk-kb 0"),
        (["--device", "cam-1", "--chunk-kb", "-5"], "--chunk-kb -5"),
        (["--device", "cam-1", "--chunk-kb", "99999999"], "--chunk-kb 99999999"),
        (["--device", "bad/id"], "--device 'bad/id'"),
        (["--device", "cam-1", "--wait", "-1"], "--wait -1"),
        (["--device", "cam-1", "--wait", "nan"], "--wait nan"),
        (["--device", "cam-1", "--wait", "5", "--expect", "3"], "--expect N counts the members of a --group"),
        (["--group", "g1", "--expect", "3"], "--expect N needs --wait"),
        (["--group", "a/#"], "--group 'a/#'"),
        (["--device", "cam-1", "--transfer-id", "../x"], "--transfer-id"),
    ],
)
def test_push_argument_mistakes_are_one_line(packages: dict[str, Path], args: list[str], says: str) -> None:
    # no config needed: the arguments are checked before the config is read or a broker is reached
    r = cli("model", "push", str(packages["good"]), "-c", "/nonexistent.toml", *args)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr
