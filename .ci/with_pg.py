"""Run a command beside one throw-away PostgreSQL cluster, its URL in ``EDGE_AGENT_TEST_PG_URL``
(tests/support/fixtures_collector.py: the ``url`` fixture then uses it instead of a cluster per test
module). For mutation runs of the collector's database modules, one mutant at a time:

    python .ci/with_pg.py python .ci/mutation.py collector-trust-rules --jobs 1

Measured (2026-12-03, load ~0.3): a cluster per test module cost 4-7 s of every mutant's run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.collector import Postgres  # tests/support, beside the suite


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python .ci/with_pg.py COMMAND [ARG ...]", file=sys.stderr)
        return 2
    pg = Postgres()
    pg.start()
    try:
        env = dict(os.environ, EDGE_AGENT_TEST_PG_URL=pg.url)
        return subprocess.run(argv, env=env, check=False).returncode
    finally:
        pg.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
