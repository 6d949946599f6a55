"""Shared test support: one ``cli`` runner, one ``wait_until``/``poll``, one ``free_port``.

``tests/`` is on ``sys.path`` (pyproject ``pythonpath``), so every test imports
``from support import cli, wait_until, free_port`` and the fixtures of one area from its module
(``support.world`` for a whole agent: its world, config and process, ``support.mqtt`` for a real mosquitto, ``support.models``
for test-built ONNX models ...). Fakes for tests live here, never in ``edge_agent``.
"""

from __future__ import annotations

from support.ports import free_port
from support.runner import cli
from support.waiting import poll, wait_until

__all__ = ["cli", "free_port", "poll", "wait_until"]
