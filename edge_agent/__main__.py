"""``python -m edge_agent`` is the same as the ``edge-agent`` console script."""

import sys

try:
    from edge_agent.app.cli.main import main
except KeyboardInterrupt:  # Ctrl-C while the package itself imports: one line, as in main
    sys.stderr.write("edge-agent: interrupted\n")
    sys.exit(130)

sys.exit(main())
