#!/usr/bin/env bash
# Python 3.8 check of the runtime package (JetPack 4/5 run it on CPython 3.8), on the host's Python:
#   1. vermin --target=3.8-: syntax and stdlib modules/members/keywords newer than 3.8;
#   2. .ci/py38_runtime.py: what vermin cannot know -- annotations pydantic evaluates (list[str],
#      X | None in model fields), list[int] / X | Y in runtime expressions, instance methods
#      such as str.removeprefix on values whose type vermin cannot infer.
# ruff (target-version py38 in pyproject.toml) also reports 3.9+ syntax. mypy cannot help: its
# releases since 1.16 refuse python_version 3.8.
#
#   .ci/py38-check.sh [PATH ...]     (default: edge_agent)   exit 1 on any finding
set -euo pipefail
cd "$(dirname "$0")/.."
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(edge_agent)
py=${PYTHON:-python3}
vermin=("$py" -c 'import sys; from vermin import main; sys.exit(main())')
"${vermin[@]}" --version >/dev/null 2>&1 || { echo "py38-check: vermin missing (pip install -e '.[dev]')" >&2; exit 2; }
rc=0
# --no-tips: no advice text; --violations: list only what breaks 3.8; --eval-annotations off
# (the default): under `from __future__ import annotations` signatures are strings on 3.8
"${vermin[@]}" --target=3.8- --violations --no-tips --no-make-paths-absolute -q "${paths[@]}" || rc=1
"$py" .ci/py38_runtime.py "${paths[@]}" || rc=1
if [ $rc = 0 ]; then echo "py38-check: ok (vermin --target=3.8- and py38_runtime on ${paths[*]})"; fi
exit $rc
