"""`model rollout` in process, a survivor of rollout_run's first (unfinished) mutation run
(issue 36): a rollout that ends done with a refusal below --halt-after keeps no halt reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.rollout_sim import SimDevice, new_db, start_sims
from support.updates import INT8, write_config

from edge_agent.adapters.updates import signing
from edge_agent.app.cli.main import main

MEMBERS = ["cam-1", "cam-2", "cam-3"]


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A package for group fleet-a signed by a fresh key, packed in process."""
    d = tmp_path_factory.mktemp("rollout-pkg")
    key = d / "signing.key"
    pub = signing.generate_key(key)
    pkg = d / "fleet-a.pkg"
    args = ["-q", "model", "pack", str(INT8), "--sign", str(key), "--version", "2.5", "--name", "demo"]
    assert main([*args, "--for-group", "fleet-a", "-o", str(pkg)]) == 0
    return {"pkg": pkg, "pub": pub}


def ro_main(url: str, *args: str) -> int:
    return main(["-q", "model", "rollout", *args, "--db", url])


def test_a_rollout_done_despite_a_refusal_below_halt_after_shows_no_halt_reason(
    tmp_path: Path,
    broker: Any,
    sims: list[SimDevice],
    signed: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """cam-2 refuses, --halt-after 2: the rollout goes on to done (exit 0); `--status ID` shows it
    done with the refusal in its verdicts, and no "halted:" line (nothing halted it)."""
    start_sims(
        tmp_path,
        broker.port,
        signed["pub"],
        {"cam-1": "pass", "cam-2": "refuse", "cam-3": "pass"},
        sims,
        trial_s=0.2,
    )
    url = new_db(tmp_path)
    op = write_config(tmp_path, port=broker.port, device="operator")
    members = [a for m in MEMBERS for a in ("--member", m)]
    rc = ro_main(
        url, str(signed["pkg"]), "-c", str(op), "--group", "fleet-a", *members, "--halt-after", "2", "--wait"
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    rid = out.split()[1].rstrip(":")
    assert out.endswith(f"rollout {rid}: done: every device of group fleet-a runs {sims[0].current['id']}\n")
    assert ro_main(url, "--status", rid) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(": done, stage 1")
    assert not any(ln.startswith("  halted:") for ln in lines), lines
    assert [ln.split()[3:6] for ln in lines if " refused " in ln] == [[rid, "1", "refused"]]
    assert ro_main(url, "--status", rid, "--json") == 0
    assert json.loads(capsys.readouterr().out)["rollout"]["reason"] is None
