#!/usr/bin/env bash
# Build the offline install bundle for aarch64 boards (no internet needed on the board):
#
#   cross-build/build-bundle.sh [-o DIR] [--python 3.11] [--glibc 2.36] [--constraints FILE|none]
#   cross-build/build-bundle.sh --jetpack 4|5 [-o DIR]
#
# -> DIR/edge-agent-<version>-aarch64.tar.gz (DIR defaults to ./dist) containing
#      wheels/      edge-agent's wheel + every runtime dependency for CPython <python> manylinux
#                   aarch64 (glibc <= <glibc>), + pip to bootstrap a venv without ensurepip
#      systemd/     unit files from systemd/ (if the repo has them)
#      models/      demo models and samples from models/ (if the repo has them)
#      install.sh   installs into /opt/edge-agent (see install.sh --help)
#      device-smoke.sh  on-board check: doctor + bench + infer, one report to paste
#      BUNDLE.txt   version, target, git commit, sha256 of every wheel
#
# Defaults fit Raspberry Pi OS bookworm (Python 3.11, glibc 2.36). JetPack 6 (Ubuntu 22.04):
# --python 3.10 --glibc 2.35. Versions come from cross-build/constraints-aarch64.txt: the ones the
# emulated cores tested (for another --python they float unless --constraints names a file).
#
# --jetpack 4 (Jetson Nano, Ubuntu 18.04): CPython 3.8, glibc 2.27; --jetpack 5 (Ubuntu 20.04):
# CPython 3.8, glibc 2.31. Pins from cross-build/constraints-jetpack.txt, and NO onnxruntime:
# install.sh --ort-wheel takes NVIDIA's onnxruntime-gpu (Jetson Zoo). Every wheel is checked by
# cross-build/wheel_check.py (tags and Requires-Python) before the tarball is written.
set -euo pipefail
EA_PROG="build-bundle"
# shellcheck source=cross-build/aarch64-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/aarch64-env.sh"

out=$EA_REPO/dist
py=3.11
glibc=2.36
constraints=default
jetpack=""
while [ $# -gt 0 ]; do
    case $1 in
        -o | --output) out=$2; shift 2 ;;
        --python) py=$2; shift 2 ;;
        --glibc) glibc=$2; shift 2 ;;
        --constraints) constraints=$2; shift 2 ;;
        --jetpack) jetpack=$2; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) ea_die "unknown argument '$1' (see --help)" ;;
    esac
done
case $jetpack in
    "") ;;
    4) py=3.8 glibc=2.27 ;;
    5) py=3.8 glibc=2.31 ;;
    *) ea_die "--jetpack wants 4 or 5 (JetPack 6: --python 3.10 --glibc 2.35), got '$jetpack'" ;;
esac
if [ -n "$jetpack" ] && [ "$constraints" = default ]; then constraints=$EA_CROSS/constraints-jetpack.txt; fi
[[ $py =~ ^3\.[0-9]+$ ]] || ea_die "--python wants X.Y, got '$py'"
[[ $glibc =~ ^2\.[0-9]+$ ]] || ea_die "--glibc wants 2.N, got '$glibc'"
if [ "$constraints" = default ]; then
    if [ "$py" = "$EA_PY" ]; then
        constraints=$EA_CONSTRAINTS
    else
        # the pins are for 3.11 (numpy 2.3+ has no 3.10 wheels); newest compatible wheels then
        ea_log "warning: Python $py: versions float (the pins and the emulated tests are for $EA_PY)"
        constraints=none
    fi
fi
constraint_args=()
[ "$constraints" = none ] || constraint_args=(-c "$constraints")
mkdir -p "$out"
out=$(cd "$out" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/edge-agent-bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. the project's wheel (pure Python: py3-none-any), built from a copy of the files git tracks
#    (plus new unignored ones), so stray local files never end up in a release
ea_log "building the edge-agent wheel"
mkdir "$work/src"
if git -C "$EA_REPO" rev-parse --git-dir >/dev/null 2>&1; then
    # (tracked files deleted in the work tree are skipped with a warning)
    git -C "$EA_REPO" ls-files -z --cached --others --exclude-standard \
        | tar -C "$EA_REPO" --null -T - --ignore-failed-read -cf - | tar -C "$work/src" -xf -
else
    cp -r "$EA_REPO"/. "$work/src/"
fi
if [ ! -f "$work/src/README.md" ]; then
    ea_log "warning: no README.md in the repo; the wheel gets a one-line description"
    echo "# edge-agent" >"$work/src/README.md"
fi
if python3 -c 'import build, hatchling' 2>/dev/null; then
    # build and hatchling already here: no isolated env to download
    python3 -m build --wheel --no-isolation --outdir "$work/dist" "$work/src" >"$work/build.log" 2>&1 \
        || { cat "$work/build.log" >&2; ea_die "wheel build failed"; }
else
    python3 -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$work/src" \
        || ea_die "wheel build failed"
fi
wheel=$(echo "$work"/dist/onnx_edge_agent-*.whl)
[ -f "$wheel" ] || ea_die "no onnx_edge_agent wheel produced"
version=${wheel##*/onnx_edge_agent-}
version=${version%%-*}
suffix=""
[ "$py" = "3.11" ] || suffix="-py${py/./}"
[ -z "$jetpack" ] || suffix="-jetpack$jetpack"
name=edge-agent-$version-aarch64$suffix
stage=$work/$name
mkdir -p "$stage/wheels"
cp "$wheel" "$stage/wheels/"

# 2. every runtime dependency, for the board's platform; markers evaluated for the board's
#    Python (pip would evaluate `tomli; python_version < "3.11"` for the host's)
ea_log "downloading aarch64 wheels for CPython $py, glibc <= $glibc"
python3 "$EA_CROSS/aarch64_reqs.py" runtime --python "$py" >"$work/requirements.txt"
echo pip >>"$work/requirements.txt"
own=("$wheel")
required=(onnxruntime numpy pip)
check_args=()
if [ -n "$jetpack" ]; then
    # NVIDIA's onnxruntime-gpu replaces it on the board: the requirement lines minus onnxruntime,
    # and our wheel without its dependencies (it would pull the CPU onnxruntime back in)
    grep -v -i '^onnxruntime\b' "$work/requirements.txt" >"$work/req-noort.txt"
    # what NVIDIA's onnxruntime-gpu wheels require to import; they install with --no-deps
    printf '%s\n' flatbuffers protobuf packaging >>"$work/req-noort.txt"
    # PyNaCl ([signing] extra, cp36-abi3 aarch64 wheel + cffi + pycparser): a Jetson is typically
    # offline, and the agent refuses to start with [model_update] trusted_keys and no PyNaCl
    echo pynacl >>"$work/req-noort.txt"
    mv "$work/req-noort.txt" "$work/requirements.txt"
    own=()
    required=(numpy pip pynacl cffi)
    check_args=(--no-onnxruntime)
fi
# shellcheck disable=SC2046
python3 -m pip download --quiet --disable-pip-version-check --dest "$stage/wheels" \
    $(ea_pip_platform_flags "$py" "$glibc") "${constraint_args[@]}" \
    "${own[@]}" -r "$work/requirements.txt" >"$work/pip.log" 2>&1 \
    || { grep -v "^WARNING: Location .* is ignored" "$work/pip.log" >&2; ea_die "pip download failed"; }
for pkg in "${required[@]}"; do
    # case-insensitive: PyNaCl's wheel is named PyNaCl-1.5.0-...
    find "$stage/wheels" -maxdepth 1 -iname "$pkg-*.whl" | grep -q . || ea_die "no $pkg wheel for CPython $py aarch64"
done
# every wheel (ours included) must load on the board: CPython $py, aarch64, glibc <= $glibc
python3 "$EA_CROSS/wheel_check.py" "$stage/wheels" --python "$py" --glibc "$glibc" "${check_args[@]}" >&2 \
    || ea_die "a wheel does not fit CPython $py aarch64 glibc <= $glibc (see above)"

# 3. service files, demo models, installer
if [ -d "$EA_REPO/systemd" ]; then
    cp -r "$EA_REPO/systemd" "$stage/systemd"
else
    ea_log "no systemd/ in the repo: bundle has no unit files"
fi
if [ -d "$EA_REPO/models" ]; then
    mkdir "$stage/models"
    (cd "$EA_REPO/models" && find . -path '*/__pycache__' -prune -o -type f -print0 \
        | xargs -0 -r cp --parents -t "$stage/models")
else
    ea_log "no models/ in the repo: bundle has no demo models"
fi
cp "$EA_CROSS/install.sh" "$EA_CROSS/device-smoke.sh" "$stage/"
chmod 755 "$stage/install.sh" "$stage/device-smoke.sh"
[ -f "$EA_REPO/LICENSE" ] && cp "$EA_REPO/LICENSE" "$stage/"

epoch=$(git -C "$EA_REPO" log -1 --format=%ct 2>/dev/null || date +%s)
commit=$(git -C "$EA_REPO" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$EA_REPO" status --porcelain 2>/dev/null | head -c1 || true)
{
    echo "name=edge-agent"
    echo "version=$version"
    echo "python=$py"
    echo "platform=manylinux_${glibc/./_}_aarch64"
    if [ -n "$jetpack" ]; then
        echo "jetpack=$jetpack"
        echo "onnxruntime=external"  # install.sh --ort-wheel NVIDIA's onnxruntime-gpu
    fi
    echo "constraints=${constraints##*/}"
    echo "commit=$commit${dirty:+-dirty}"
    echo "source_date=$(date -u -d "@$epoch" +%FT%TZ)"
    echo
    (cd "$stage/wheels" && sha256sum -- *.whl)
} >"$stage/BUNDLE.txt"

# 4. tarball; file order, owners and mtimes fixed so two builds of one commit compare equal
tarball=$out/$name.tar.gz
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    -C "$work" -cf - "$name" | gzip -n -6 >"$tarball.tmp"
mv -f "$tarball.tmp" "$tarball"
ea_log "$(du -h "$tarball" | cut -f1)  $tarball ($(find "$stage/wheels" -name '*.whl' | wc -l) wheels)"
echo "$tarball"
