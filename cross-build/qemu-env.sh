#!/usr/bin/env bash
# Build (once) the cached aarch64 environment and print the emulated python for QEMU_CPU.
#   "$(cross-build/qemu-env.sh)" -c 'import platform; print(platform.machine())'
# The printed interpreter has the project's dependencies but not the clone: add PYTHONPATH=.
set -euo pipefail
EA_PROG="qemu-env"
# shellcheck source=cross-build/aarch64-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/aarch64-env.sh"
core=${QEMU_CPU:-cortex-a72}
ea_core_part "$core" >/dev/null || ea_die "unsupported QEMU_CPU '$core' (supported: $EA_CORES)"
ea_ensure_env
ea_python "$core"
