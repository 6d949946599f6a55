#!/usr/bin/env bash
# The oldest supported stack, for real: pyenv's CPython 3.8.18 (JetPack 4/5's Python), the given
# onnxruntime (1.11.1 = JetPack 4.6 / Jetson Nano, 1.16.3 = JetPack 5) and every other runtime
# dependency at its floor (.ci/floors.txt, checked against pyproject.toml). `pip install .`, then
# .ci/oldest_stack.py drives the installed CLI (why a driver and not pytest: see its docstring).
#
#   .ci/oldest-stack.sh 1.11.1 [--int8 q.onnx --reference fp32.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
ort=${1:?usage: .ci/oldest-stack.sh ONNXRUNTIME_VERSION [driver args]}
shift
py38=${EDGE_AGENT_PY38:-$HOME/.pyenv/versions/3.8.18/bin/python3}
if [ ! -x "$py38" ]; then
    echo "oldest-stack: CPython 3.8.18 not found at $py38 (pyenv install 3.8.18, or set EDGE_AGENT_PY38)" >&2
    exit 1
fi
host=${PYTHON:-python3}
# every runtime dependency's floor in pyproject must be the version pinned in .ci/floors.txt
"$host" - <<'PY'
import re, sys, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
pins = dict(l.split("==") for l in (x.split("#")[0].strip() for x in open(".ci/floors.txt")) if l)
bad = []
for d in deps:
    name, floor = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)", d).groups()
    if name == "onnxruntime":
        continue
    pin = pins.get(name)
    if pin is None or not (pin == floor or pin.startswith(floor + ".")):
        bad.append(f"{name}>={floor} (floors.txt: {pin})")
if bad:
    sys.exit("oldest-stack: .ci/floors.txt does not pin the floors of pyproject.toml: " + ", ".join(bad))
PY
venv=$(mktemp -d "${TMPDIR:-/tmp}/edge-agent-py38.XXXXXX")
trap 'rm -rf "$venv"' EXIT
# ...and an old SQLite: Debian bullseye's libsqlite3 3.34.1 (Raspberry Pi OS Bullseye has the same;
# Ubuntu 18.04 on a Jetson Nano has 3.22), from the Debian archive, pinned by hash. Python's sqlite3
# loads it through LD_LIBRARY_PATH; the driver checks the version. 3.34 has no RETURNING (3.35):
# the outbox's ack used it until this stage ran there and every ack failed.
sqlite_deb=libsqlite3-0_3.34.1-3_$(dpkg --print-architecture).deb
sqlite_sha=a0b8d3acf4a0483048637637d269be93af48d5c16f6f139f53edd13384ad4686  # amd64
if ! curl -fsS -m 120 -o "$venv/$sqlite_deb" "http://deb.debian.org/debian/pool/main/s/sqlite3/$sqlite_deb" \
    || ! echo "$sqlite_sha  $venv/$sqlite_deb" | sha256sum -c --quiet; then
    echo "oldest-stack: cannot fetch Debian bullseye's $sqlite_deb (hash-pinned) from deb.debian.org" >&2
    exit 1
fi
dpkg-deb -x "$venv/$sqlite_deb" "$venv/sqlite"
old_sqlite=$(dirname "$(find "$venv/sqlite" -name 'libsqlite3.so.0' | head -n 1)")
"$py38" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/pip" install -q "onnxruntime==$ort" -r .ci/floors.txt
# the floors stay put: pip must not upgrade any of them to satisfy the package
"$venv/bin/pip" install -q . -c .ci/floors.txt -c <(echo "onnxruntime==$ort")
LD_LIBRARY_PATH=$old_sqlite "$venv/bin/python" .ci/oldest_stack.py --ort "$ort" --sqlite 3.34.1 "$@"
