"""Print what the emulated interpreter really is, importing each native wheel in turn.

Run by qemu-test.sh before pytest: each line is flushed before the next import, so when a
wheel dies with SIGILL on the emulated core the last line printed names the culprit.
"""

from __future__ import annotations

import os
import platform
import sys


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def cpuinfo_field(name: str) -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError as exc:
        return f"unreadable ({exc})"
    return "absent"


def main() -> int:
    core = os.environ.get("EDGE_AGENT_QEMU_CPU", "?")
    say(
        f"== aarch64 test environment: emulated core {core} (cpuinfo CPU part {cpuinfo_field('CPU part')}) =="
    )
    say(f"platform.machine(): {platform.machine()}")
    say(f"python:             {sys.version.split()[0]} ({sys.executable})")
    say(f"cpu features:       {cpuinfo_field('Features')}")
    import numpy

    say(f"numpy:              {numpy.__version__}")
    import onnxruntime

    say(f"onnxruntime:        {onnxruntime.__version__}")
    say(f"providers:          {', '.join(onnxruntime.get_available_providers())}")
    import cv2

    say(f"opencv:             {cv2.__version__}")
    if platform.machine() != "aarch64":
        say("error: this is not an aarch64 interpreter")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
