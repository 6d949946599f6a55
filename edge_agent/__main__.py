"""``python -m edge_agent`` is the same as the ``edge-agent`` console script."""

import sys

from edge_agent.app.cli.main import main

sys.exit(main())
