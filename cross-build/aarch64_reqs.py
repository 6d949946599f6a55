"""Print the requirement lines an aarch64 board (or the emulated test sysroot) needs.

Read from pyproject.toml rather than copied into a second list, so a dependency added to
the project is picked up by the emulated test environment and the offline bundle without
anyone remembering to edit cross-build/. Environment markers are evaluated for the *target*
(aarch64 Linux, the given Python version), not for the host running this script: pip would
otherwise evaluate ``tomli; python_version < '3.11'`` against the host interpreter.

Usage: python3 cross-build/aarch64_reqs.py {runtime|test} [--python 3.11] [--pyproject PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # a developer's older host python
    import tomli as tomllib

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
except ImportError:  # hosts without the packaging distribution still have pip's vendored copy
    from pip._vendor.packaging.markers import Marker  # type: ignore[assignment]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[assignment]

# Host-only tools in the dev extra: linters/type checkers never run on the board, torch is a
# dev-only extra that would pull gigabytes of aarch64 wheels, and the emulated smoke subset runs
# in one process (pytest-xdist would only change the cached environment's key and rebuild it).
HOST_ONLY = ("ruff", "mypy", "torch", "types-", "pytest-xdist")


def target_env(python: str) -> dict[str, str]:
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_machine": "aarch64",
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
    }


def applies(req: Requirement, env: dict[str, str]) -> bool:
    return req.marker is None or Marker(str(req.marker)).evaluate(env)


def strip_marker(req: Requirement) -> str:
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def requirements(pyproject: Path, kind: str, python: str) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lines: list[str] = list(project.get("dependencies", []))
    if kind == "test":
        extras = project.get("optional-dependencies", {})
        for name in ("models", "dev"):
            lines += extras.get(name, [])
    env = target_env(python)
    out: list[str] = []
    for line in lines:
        req = Requirement(line)
        if kind == "test" and req.name.lower().startswith(HOST_ONLY):
            continue
        if applies(req, env):
            text = strip_marker(req)
            if text not in out:
                out.append(text)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("runtime", "test"))
    parser.add_argument("--python", default="3.11", help="target Python version (default 3.11)")
    default = Path(__file__).resolve().parent.parent / "pyproject.toml"
    parser.add_argument("--pyproject", type=Path, default=default)
    args = parser.parse_args()
    sys.stdout.write("".join(f"{line}\n" for line in requirements(args.pyproject, args.kind, args.python)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
