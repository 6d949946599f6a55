"""Check that every wheel in a directory installs on the target board: CPython X.Y, aarch64, glibc <= 2.N.

pip's own platform filter is only as good as the --platform list it is given; this reads the
file names (PEP 427 tags) and each wheel's Requires-Python, so a bundle can never carry a wheel
that needs a newer glibc or Python than the board has (JetPack 4: CPython 3.8, glibc 2.27).

Usage: python3 cross-build/wheel_check.py DIR --python 3.8 --glibc 2.27 [--no-onnxruntime]
Exit 1 with one line per bad wheel; 0 with a one-line summary.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

try:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
except ImportError:  # hosts without the packaging distribution still have pip's vendored copy
    from pip._vendor.packaging.specifiers import InvalidSpecifier, SpecifierSet  # type: ignore[assignment]


def _py_ok(tag: str, abi: str, py: tuple[int, int]) -> bool:
    m = re.fullmatch(r"(cp|py)(\d)(\d*)", tag)
    if not m:
        return False
    kind, major, minor = m.group(1), int(m.group(2)), int(m.group(3) or 0)
    if major != py[0]:
        return False
    if kind == "py":  # pure: py3 / py38 (a minimum)
        return abi == "none" and (not m.group(3) or minor <= py[1])
    if abi == "abi3":  # stable ABI: built for cp3Y, loads on any later 3.x
        return minor <= py[1]
    return minor == py[1] and abi in (f"cp{py[0]}{py[1]}", f"cp{py[0]}{py[1]}m", "none")


def _plat_ok(plat: str, glibc: tuple[int, int]) -> bool:
    if plat == "any":
        return True
    if plat == "manylinux2014_aarch64":
        return glibc >= (2, 17)
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_aarch64", plat)
    return bool(m) and (int(m.group(1)), int(m.group(2))) <= glibc


def check_wheel(path: Path, py: tuple[int, int], glibc: tuple[int, int]) -> list[str]:
    """Problems with one wheel (empty = installs on the target)."""
    parts = path.name[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        return [f"{path.name}: not a wheel file name (PEP 427)"]
    pytags, abis, plats = parts[-3].split("."), parts[-2].split("."), parts[-1].split(".")
    problems = []
    if not any(_py_ok(t, a, py) for t in pytags for a in abis):
        problems.append(
            f"{path.name}: built for {parts[-3]}-{parts[-2]}, the board has CPython {py[0]}.{py[1]}"
        )
    if not any(_plat_ok(p, glibc) for p in plats):
        problems.append(
            f"{path.name}: platform {parts[-1]} does not load on aarch64 with glibc {glibc[0]}.{glibc[1]}"
        )
    try:
        with zipfile.ZipFile(path) as zf:
            meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            meta = HeaderParser().parsestr(zf.read(meta_name).decode("utf-8", "replace"))
    except (OSError, zipfile.BadZipFile, StopIteration) as exc:
        return [*problems, f"{path.name}: unreadable wheel ({exc or 'no METADATA'})"]
    requires = meta.get("Requires-Python")
    if requires:
        try:
            if f"{py[0]}.{py[1]}.0" not in SpecifierSet(requires):
                problems.append(f"{path.name}: Requires-Python {requires} excludes {py[0]}.{py[1]}")
        except InvalidSpecifier:
            problems.append(f"{path.name}: unparsable Requires-Python {requires!r}")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--python", required=True, help="X.Y")
    parser.add_argument("--glibc", required=True, help="2.N")
    parser.add_argument(
        "--no-onnxruntime", action="store_true", help="fail if an onnxruntime wheel is present"
    )
    args = parser.parse_args(argv)
    py = tuple(int(x) for x in args.python.split("."))[:2]
    glibc = tuple(int(x) for x in args.glibc.split("."))[:2]
    wheels = sorted(args.dir.glob("*.whl"))
    if not wheels:
        sys.stderr.write(f"wheel-check: no wheels in {args.dir}\n")
        return 1
    problems = [p for w in wheels for p in check_wheel(w, py, glibc)]  # type: ignore[arg-type]
    if args.no_onnxruntime:
        problems += [
            f"{w.name}: CPU onnxruntime in a bundle that takes NVIDIA's onnxruntime-gpu (install.sh --ort-wheel)"
            for w in wheels
            if re.match(r"onnxruntime[-_]", w.name, re.I)
        ]
    for p in problems:
        sys.stderr.write(f"wheel-check: {p}\n")
    if problems:
        return 1
    sys.stdout.write(
        f"wheel-check: {len(wheels)} wheels ok for CPython {args.python} aarch64 glibc <= {args.glibc}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
