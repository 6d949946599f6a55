"""A runtime-only install (no extras) runs infer/run/demo/doctor/queue without onnx, sympy or torch.

The commands run in a child interpreter where importing those packages raises ImportError (as on
a board that has only `pip install .`), and the child also checks none of them got imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.world import agent_toml

REPO = Path(__file__).resolve().parents[3]

CHILD = r"""
import importlib.abc, json, sys
BLOCKED = ("onnx", "sympy", "torch")

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed (blocked by the test)")
        return None

sys.meta_path.insert(0, Block())
from edge_agent.app.cli.main import main
codes = {}
for argv in json.loads(sys.argv[1]):
    codes[" ".join(argv[:2])] = main(argv)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print(json.dumps({"codes": codes, "leaked": leaked}))
"""


def test_runtime_commands_need_no_model_tooling(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    cfg = tmp_path / "c.toml"
    model, samples = REPO / "models" / "demo-detector-int8.onnx", REPO / "models" / "samples"
    queue = {"path": str(state / "q.db")}
    cfg.write_text(agent_toml(state, samples, model, device={"id": None}, queue=queue, output=None))
    commands = [
        ["-q", "infer", str(REPO / "models" / "samples"), "--json"],
        ["-q", "demo", "--state-dir", str(tmp_path / "demo"), "--frames", "2"],
        ["-q", "run", "--config", str(cfg), "--max-frames", "2"],
        ["-q", "queue", "stats", "--config", str(cfg)],
        ["-q", "doctor", "--config", str(cfg)],
        ["-q", "inspect", str(REPO / "models" / "demo-detector-int8.onnx")],
    ]
    r = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(commands)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["leaked"] == []
    assert report["codes"] == {" ".join(c[:2]): 0 for c in commands}, r.stderr
