#!/usr/bin/env bash
# Run the test suite on a real aarch64 CPython 3.11 (Debian bookworm's, as on Raspberry Pi OS
# bookworm) with the aarch64 wheels of every dependency, on an emulated board core.
#
#   cross-build/qemu-test.sh [pytest args]          e.g.  cross-build/qemu-test.sh -m arm_smoke
#   QEMU_CPU=cortex-a57 cross-build/qemu-test.sh    cortex-a72 (Pi 4, default), cortex-a57 (Jetson
#                                                   Nano), cortex-a76 (Pi 5), cortex-a53 (Pi 3/Zero 2)
#
# The environment is cached in ${EDGE_AGENT_QEMU_CACHE:-/var/cache/edge-agent-qemu} under a key
# made from the dependency list; the clone itself is put on PYTHONPATH (edits need no rebuild).
set -euo pipefail
EA_PROG="qemu-test"
# shellcheck source=cross-build/aarch64-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/aarch64-env.sh"

core=${QEMU_CPU:-cortex-a72}
ea_core_part "$core" >/dev/null || ea_die "unsupported QEMU_CPU '$core' (supported: $EA_CORES)"
ea_ensure_env
py=$(ea_python "$core")

cd "$EA_REPO"
# Host PYTHONPATH entries point at x86 site-packages: never hand them to the emulated python.
export PYTHONPATH=$EA_REPO
export PATH=$EA_ENV/bin-$core:$PATH      # `python3` in tests' subprocesses is the emulated one too
export EDGE_AGENT_QEMU_CPU=$core          # tests/arm checks the emulated core against this
export EDGE_AGENT_QEMU_ENV=$EA_ENV

# Separate process on purpose: an "Illegal instruction" while importing a wheel is named here
# with the module and core, instead of killing pytest during collection without a word.
set +e
"$py" "$EA_CROSS/qemu_banner.py"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
    case $rc in
        132) ea_die "aarch64 python died with SIGILL (Illegal instruction) on $core: a wheel uses an instruction this core lacks" ;;
        139) ea_die "aarch64 python died with SIGSEGV on $core (a missing ARM /proc/cpuinfo does this to onnxruntime)" ;;
        *) ea_die "environment check failed on $core (exit $rc)" ;;
    esac
fi
exec "$py" -m pytest "$@"
