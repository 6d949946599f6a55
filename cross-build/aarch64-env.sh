# shellcheck shell=bash
# Sourced by qemu-test.sh, qemu-env.sh and build-bundle.sh: one cached aarch64 userland per
# dependency set, run under qemu-aarch64-static with an exact board core (-cpu cortex-a72 ...).
#
# Why a real Debian sysroot and real aarch64 wheels: passing on x86, or under QEMU's default
# "max" CPU, proves little about a Pi (onnxruntime 1.21's aarch64 wheel died with "Illegal
# instruction" on a Pi 4 while it ran fine under default emulation).
#
# Layout of $EA_CACHE/env-<key>/ (immutable once renamed into place):
#   sysroot/                 Debian bookworm arm64, python3.11 (what Raspberry Pi OS bookworm has);
#                            deps in sysroot/usr/local/lib/python3.11/dist-packages (a plain
#                            `-m venv` made from it stays clean, as on a board)
#   cores/<core>/            qemu -L prefix: hard-linked copy of sysroot/ + proc/cpuinfo for that core
#                            (onnxruntime segfaults under qemu-user on the host's x86 cpuinfo)
#   bin-<core>/python3.11    wrapper: sys.executable of the emulated interpreter, so tests that
#                            spawn sys.executable get the same emulated core
#
# Host x86 binaries (mosquitto, systemd-analyze) spawned from the emulated python run natively:
# qemu-user hands execve to the host kernel untranslated, so no binfmt_misc is involved.

EA_CROSS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034  # used by the scripts that source this file
EA_REPO=$(dirname "$EA_CROSS")
if [ -n "${EDGE_AGENT_QEMU_CACHE:-}" ]; then
    EA_CACHE=$EDGE_AGENT_QEMU_CACHE
elif [ "$(id -u)" = 0 ] || [ -w /var/cache/edge-agent-qemu ]; then
    EA_CACHE=/var/cache/edge-agent-qemu
else
    EA_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/edge-agent-qemu
fi
EA_SUITE=bookworm
EA_DEB_PACKAGES=python3.11,libstdc++6
EA_SOURCES=${EDGE_AGENT_DEBIAN_SOURCES:-/etc/apt/sources.list.d/debian.sources}
# EDGE_AGENT_QEMU_CONSTRAINTS: another pin set, e.g. constraints-aarch64-ort1.16.txt (JetPack 5's
# onnxruntime); the cache key covers the file, so it gets an environment of its own
EA_CONSTRAINTS=${EDGE_AGENT_QEMU_CONSTRAINTS:-$EA_CROSS/constraints-aarch64.txt}
# bump when the layout below changes, so existing caches are rebuilt rather than misread
EA_LAYOUT_VERSION=4
EA_CORES="cortex-a72 cortex-a57 cortex-a76 cortex-a53"
EA_PY=3.11

ea_log() { printf '%s: %s\n' "${EA_PROG:-aarch64-env}" "$*" >&2; }
ea_die() { ea_log "error: $*"; exit 1; }

# pip flags selecting CPython <py> aarch64 wheels for glibc <= <glibc> (bookworm: 2.36).
# pip matches platform tags exactly, so every manylinux_2_N tag has to be listed.
ea_pip_platform_flags() {
    local py=${1:-$EA_PY} glibc=${2:-2.36} n
    local max=${glibc#2.}
    printf -- '--platform manylinux2014_aarch64'
    for ((n = 17; n <= max; n++)); do printf -- ' --platform manylinux_2_%s_aarch64' "$n"; done
    printf -- ' --python-version %s --implementation cp --abi cp%s --only-binary=:all:\n' "$py" "${py/./}"
}

# Core -> /proc/cpuinfo "CPU part" and Features line (what a real board's kernel prints).
ea_core_part() {
    case $1 in
        cortex-a72) echo 0xd08 ;; cortex-a57) echo 0xd07 ;; cortex-a76) echo 0xd0b ;; cortex-a53) echo 0xd03 ;;
        *) return 1 ;;
    esac
}
ea_core_features() {
    local base="fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid"
    case $1 in
        cortex-a76) echo "$base atomics fphp asimdhp asimdrdm lrcpc dcpop asimddp" ;;
        *) echo "$base" ;;
    esac
}

ea_cpuinfo() {  # <core> <nproc>
    local core=$1 n=$2 i part feats
    part=$(ea_core_part "$core") || return 1
    feats=$(ea_core_features "$core")
    for ((i = 0; i < n; i++)); do
        printf 'processor\t: %d\nBogoMIPS\t: 108.00\nFeatures\t: %s\nCPU implementer\t: 0x41\n' "$i" "$feats"
        printf 'CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: %s\nCPU revision\t: 3\n\n' "$part"
    done
}

ea_key() {
    local reqs
    reqs=$(python3 "$EA_CROSS/aarch64_reqs.py" test --python "$EA_PY") || ea_die "cannot read requirements from pyproject.toml"
    {
        echo "layout=$EA_LAYOUT_VERSION suite=$EA_SUITE debs=$EA_DEB_PACKAGES cores=$EA_CORES"
        ea_pip_platform_flags "$EA_PY" 2.36
        echo "$reqs"
        cat "$EA_CONSTRAINTS"
    } | sha256sum | cut -c1-16
}

# Check a core name; print the wrapper path for it (env must exist).
ea_python() {
    ea_core_part "$1" >/dev/null || ea_die "unsupported QEMU_CPU '$1' (supported: $EA_CORES)"
    echo "$EA_ENV/bin-$1/python3.11"
}

ea_check_host_tools() {
    command -v qemu-aarch64-static >/dev/null || ea_die "qemu-aarch64-static missing: apt-get install qemu-user-static"
    command -v mmdebstrap >/dev/null || ea_die "mmdebstrap missing: apt-get install mmdebstrap"
    command -v flock >/dev/null || ea_die "flock missing (util-linux)"
    [ -r "$EA_SOURCES" ] || ea_die "no apt sources at $EA_SOURCES (set EDGE_AGENT_DEBIAN_SOURCES to a deb822 sources file)"
}

# Make sure $EA_CACHE/env-<key> exists; sets EA_ENV. Fast path: one stat, no lock.
ea_ensure_env() {
    local key
    key=$(ea_key)
    EA_ENV=$EA_CACHE/env-$key
    if [ -f "$EA_ENV/.ready" ]; then
        touch "$EA_ENV/.last-used" 2>/dev/null || true
        return 0
    fi
    ea_check_host_tools
    mkdir -p "$EA_CACHE"
    local lockfd
    exec {lockfd}>"$EA_CACHE/.lock"
    if ! flock -n "$lockfd"; then
        ea_log "waiting for another setup of $EA_CACHE to finish..."
        flock "$lockfd"
    fi
    if [ ! -f "$EA_ENV/.ready" ]; then
        # a separate bash so `set -e` holds inside (it is ignored in a `cmd || ...` subshell)
        EA_PROG=${EA_PROG:-aarch64-env} bash -c 'set -euo pipefail; . "$1"; ea_build_env "$2"' _ \
            "$EA_CROSS/aarch64-env.sh" "$key" || ea_die "setup of $EA_ENV failed (see messages above)"
    fi
    touch "$EA_ENV/.last-used"
    ea_prune "$key"
    exec {lockfd}>&-
}

# Runs under the lock, in its own bash process with `set -euo pipefail`.
ea_build_env() {
    local key=$1 final=$EA_CACHE/env-$1 t0=$SECONDS tmp qemu nproc core site
    rm -rf "$EA_CACHE"/.build-*  # leftovers of a killed setup (we hold the lock, nobody else builds)
    tmp=$(mktemp -d "$EA_CACHE/.build-$key.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    qemu=$(command -v qemu-aarch64-static)
    nproc=$(nproc)
    ea_log "building aarch64 test environment $key in $EA_CACHE (one-time, about a minute)"

    ea_log "  sysroot: Debian $EA_SUITE arm64 ($EA_DEB_PACKAGES) via mmdebstrap"
    mmdebstrap --quiet --variant=extract --architectures=arm64 --include="$EA_DEB_PACKAGES" \
        "$EA_SUITE" "$tmp/sysroot" "$EA_SOURCES" </dev/null >"$tmp/mmdebstrap.log" 2>&1 \
        || { cat "$tmp/mmdebstrap.log" >&2; return 1; }
    # Under `qemu -L` an existing sysroot path hides the host's: these must come from the host.
    rm -rf "$tmp/sysroot"/{tmp,var/tmp,dev,proc,sys,run,home,root,mnt,media} \
        "$tmp/sysroot"/etc/{resolv.conf,hosts,hostname,mtab,fstab,localtime,timezone} \
        "$tmp/sysroot"/var/cache/apt "$tmp/sysroot"/var/lib/apt/lists

    site=$tmp/sysroot/usr/local/lib/python3.11/dist-packages
    ea_log "  aarch64 wheels -> $site"
    # host pip, target platform flags: no arm64 code runs during install
    # shellcheck disable=SC2046
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --no-compile \
        --target "$site" $(ea_pip_platform_flags "$EA_PY" 2.36) -c "$EA_CONSTRAINTS" \
        -r <(python3 "$EA_CROSS/aarch64_reqs.py" test --python "$EA_PY") >"$tmp/pip.log" 2>&1 \
        || { grep -v "^WARNING: Location .* is ignored" "$tmp/pip.log" >&2; return 1; }
    rm -rf "${site:?}/bin"  # console scripts with an x86 host-python shebang

    # Debian ships no .pyc and the emulated interpreter would otherwise recompile the stdlib on
    # every start (6 s -> 2.5 s per smoke run). Host paths are passed, so nothing is written
    # outside the sysroot.
    ea_log "  compiling stdlib and site-packages with the emulated interpreter"
    mkdir "$tmp/sysroot/proc"
    ea_cpuinfo cortex-a72 "$nproc" >"$tmp/sysroot/proc/cpuinfo"
    "$qemu" -cpu cortex-a72 -L "$tmp/sysroot" "$tmp/sysroot/usr/bin/python3.11" \
        -m compileall -qq -j0 "$tmp/sysroot/usr/lib/python3.11" "$site" >"$tmp/compileall.log" 2>&1 \
        || ea_log "  (some files did not compile; see $final/compileall.log)"
    rm -rf "$tmp/sysroot/proc"

    # One -L prefix per core, differing only in proc/cpuinfo. Hard-linked copies, not symlink
    # farms: os.path.realpath() in the guest would follow a top-level symlink out of the prefix.
    for core in $EA_CORES; do
        mkdir -p "$tmp/cores" "$tmp/bin-$core"
        cp -al "$tmp/sysroot" "$tmp/cores/$core"
        mkdir "$tmp/cores/$core/proc"
        ea_cpuinfo "$core" "$nproc" >"$tmp/cores/$core/proc/cpuinfo"
        cat >"$tmp/bin-$core/python3.11" <<EOF
#!/bin/sh
# Debian $EA_SUITE aarch64 python3.11 on an emulated $core (generated by cross-build/aarch64-env.sh)
exec $qemu -cpu $core -L $final/cores/$core -0 "\$0" $final/cores/$core/usr/bin/python3.11 "\$@"
EOF
        chmod +x "$tmp/bin-$core/python3.11"
        ln -s python3.11 "$tmp/bin-$core/python3"
        ln -s python3.11 "$tmp/bin-$core/python"
    done

    printf 'key=%s\nbuilt=%s\nseconds=%s\n' "$key" "$(date -u +%FT%TZ)" "$((SECONDS - t0))" >"$tmp/.ready"
    mv -T "$tmp" "$final"
    trap - EXIT
    ea_log "ready in $((SECONDS - t0)) s: $final"
}

# Drop other envs unused for 3 days (each is ~370 MB). Called with the lock held.
ea_prune() {
    local keep=$EA_CACHE/env-$1 d
    for d in "$EA_CACHE"/env-*; do
        if [ ! -d "$d" ] || [ "$d" = "$keep" ]; then continue; fi
        if [ -z "$(find "$d/.last-used" -mtime -3 2>/dev/null)" ]; then
            ea_log "removing unused environment $d"
            rm -rf "$d"
        fi
    done
}
