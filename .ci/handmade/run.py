"""Hand-made bugs, the way issue 19's reviewer tried the suite (never in CI; docs/testing.md).

    python .ci/handmade/run.py .ci/handmade/collector.py [ID ...]

A bugs file holds ``BUGS = [(id, path, old_text, new_text, "test paths ..."), ...]``. Each bug is
one exact text replacement: it is applied to the working tree, ``python -m pytest -x`` runs the
given tests, and the file is restored whatever happens (run it in a scratch worktree: an
interrupted run leaves the bug in place). Exit 1 of pytest = killed; 0 = survived; anything else
(no tests collected, a usage error) is reported as an error, never as a kill. A bug whose old text
is not found exactly once is skipped with a line saying so (the code moved on).
"""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys
import time


def main() -> int:
    spec = importlib.util.spec_from_file_location("bugs", sys.argv[1])
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    only = set(sys.argv[2:])
    verdicts = []
    for bid, path, old, new, tests in mod.BUGS:
        if only and bid not in only:
            continue
        p = pathlib.Path(path)
        src = p.read_text()
        if src.count(old) != 1:
            print(f"{bid}: old text found {src.count(old)} times, skipped", flush=True)
            continue
        p.write_text(src.replace(old, new))
        t = time.time()
        try:
            r = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests.split()],
                capture_output=True,
                text=True,
                timeout=900,
            )
            rc, tail = r.returncode, (r.stdout.strip().splitlines() or [""])[-1]
        except subprocess.TimeoutExpired:
            rc, tail = -1, "timeout (counted as killed, as mutmut does)"
        finally:
            p.write_text(src)
        verdict = "KILLED" if rc in (1, -1) else ("SURVIVED" if rc == 0 else f"ERROR rc={rc}")
        print(f"{bid}: {verdict} ({time.time() - t:.0f}s) {tail}", flush=True)
        verdicts.append(verdict)
    print(f"killed {verdicts.count('KILLED')} of {len(verdicts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
