#!/usr/bin/env bash
# CI: build the JetPack 4 bundle (Jetson Nano: CPython 3.8, aarch64, glibc 2.27) from PyPI and
# fail when any wheel in it needs a newer glibc or Python, or when the CPU onnxruntime slipped in.
# build-bundle.sh runs cross-build/wheel_check.py on its wheels before writing the tarball; this
# script re-checks the finished tarball, so a later change to the bundle script cannot skip it.
#
#   .ci/jetpack-wheels.sh [4|5]      (default 4; needs PyPI)
set -euo pipefail
cd "$(dirname "$0")/.."
jp=${1:-4}
case $jp in 4) glibc=2.27 ;; 5) glibc=2.31 ;; *) echo "jetpack-wheels: 4 or 5, got '$jp'" >&2; exit 2 ;; esac
out=$(mktemp -d "${TMPDIR:-/tmp}/jetpack-wheels.XXXXXX")
trap 'rm -rf "$out"' EXIT
tarball=$(cross-build/build-bundle.sh --jetpack "$jp" -o "$out/dist" | tail -n1)
tar -C "$out" -xzf "$tarball"
dir=$(find "$out" -mindepth 1 -maxdepth 1 -type d -name 'edge-agent-*')
grep -qx "onnxruntime=external" "$dir/BUNDLE.txt" || { echo "jetpack-wheels: BUNDLE.txt lacks onnxruntime=external" >&2; exit 1; }
python3 cross-build/wheel_check.py "$dir/wheels" --python 3.8 --glibc "$glibc" --no-onnxruntime
# signed updates on an offline Jetson: PyNaCl (cp36-abi3) and its cffi must be in the bundle
for pkg in pynacl cffi pycparser; do
    find "$dir/wheels" -maxdepth 1 -iname "$pkg-*.whl" | grep -q . || { echo "jetpack-wheels: no $pkg wheel in the bundle" >&2; exit 1; }
done
ls "$dir/wheels"
