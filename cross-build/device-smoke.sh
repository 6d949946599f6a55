#!/usr/bin/env bash
# On-board check: which board and CPU, which Python/onnxruntime, then `edge-agent doctor`,
# `bench` and `infer` on the bundled demo model. Prints one short report to paste into an issue
# (also saved as ./edge-agent-smoke-<host>-<date>.txt).
#
#   ./device-smoke.sh [--agent PATH] [--model FILE.onnx] [--image FILE]
#
#   --agent   the edge-agent command (default: edge-agent on PATH, else /opt/edge-agent/venv/bin/edge-agent)
#   --model   model for bench/infer (default: first *.onnx in ./models or /opt/edge-agent/models)
#   --image   image for infer (default: first .jpg/.png next to the models)
#
# A command this edge-agent version does not have is reported as skipped, not as a failure.
# Exit status: 0 when every available command succeeded.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
agent=""
model=""
image=""
while [ $# -gt 0 ]; do
    case $1 in
        --agent) agent=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --image) image=$2; shift 2 ;;
        -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "device-smoke: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if [ -z "$agent" ]; then
    agent=$(command -v edge-agent || true)
    [ -n "$agent" ] || agent=/opt/edge-agent/venv/bin/edge-agent
fi
[ -x "$agent" ] || { echo "device-smoke: no edge-agent at $agent (install the bundle or pass --agent)" >&2; exit 2; }
# the venv's interpreter: the script's shebang, or the trampoline line pip writes for long paths
agent_py=$(sed -n "1s|^#!||p; 2s|^'''exec' \([^ ]*\) .*|\1|p" "$agent" | grep -v '^/bin/sh$' | tail -n1)

# the bundled INT8 demo detector and a demo frame; any detector/image when those are absent.
# Jetson: the float demo detector, so TensorRT builds its FP16 engine (a Nano's GPU has no INT8).
first=demo-detector-int8.onnx
[ -r /etc/nv_tegra_release ] && first=demo-detector.onnx
for dir in "$here/models" /opt/edge-agent/models; do
    for pat in "$first" '*detector*.onnx' '*.onnx'; do
        [ -z "$model" ] && [ -d "$dir" ] && model=$(find "$dir" -name "$pat" | sort | head -n1)
    done
    for sub in samples .; do
        [ -z "$image" ] && [ -d "$dir/$sub" ] && image=$(find "$dir/$sub" \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) | sort | head -n1)
    done
done

report=./edge-agent-smoke-$(hostname)-$(date +%Y%m%d-%H%M%S).txt
status=0

cpu_core() {  # CPU part -> core name (ARM Ltd parts; Jetson Orin = A78AE)
    case $1 in
        0xd03) echo cortex-a53 ;; 0xd07) echo cortex-a57 ;; 0xd08) echo cortex-a72 ;;
        0xd0b) echo cortex-a76 ;; 0xd42) echo cortex-a78ae ;; 0xd41) echo cortex-a78 ;;
        0x004) echo carmel ;; *) echo "part $1" ;;
    esac
}

# run CMD ARGS...: skipped when `edge-agent CMD --help` fails, output trimmed to 25 lines
run_cmd() {
    local cmd=$1; shift
    echo "-- edge-agent $cmd $*"
    if ! "$agent" "$cmd" --help >/dev/null 2>&1; then
        echo "   skipped: this edge-agent has no '$cmd' command yet"
        return 0
    fi
    local out rc t0=$SECONDS
    out=$(timeout 900 "$agent" "$cmd" "$@" 2>&1)
    rc=$?
    echo "$out" | tail -n 25 | sed 's/^/   /'
    echo "   exit $rc after $((SECONDS - t0)) s"
    [ "$rc" -eq 0 ] || status=1
}

# run_model CMD ARGS...: the model as `--model FILE` when CMD's help has that option, else positional
run_model() {
    local cmd=$1; shift
    if "$agent" "$cmd" --help 2>/dev/null | grep -q -- '--model'; then
        run_cmd "$cmd" --model "$model" "$@"
    else
        run_cmd "$cmd" "$model" "$@"
    fi
}

{
    echo "== edge-agent device smoke $(date -u +%FT%TZ) =="
    model_file=/proc/device-tree/model
    if [ -r "$model_file" ]; then
        echo "board:     $(tr -d '\0' <"$model_file")"
    elif [ -r /etc/nv_tegra_release ]; then
        echo "board:     Jetson ($(head -n1 /etc/nv_tegra_release))"
    else
        echo "board:     unknown (no device-tree model)"
    fi
    if [ -r /etc/nv_tegra_release ]; then
        echo "jetpack:   $(head -n1 /etc/nv_tegra_release)"
        trt=$(find /usr/lib/aarch64-linux-gnu -maxdepth 1 -name 'libnvinfer.so.*.*.*' 2>/dev/null | sed 's/.*\.so\.//' | sort -V | tail -n1)
        echo "tensorrt:  ${trt:-not found (libnvinfer)}"
        [ -r /etc/nvpmodel.conf ] && command -v nvpmodel >/dev/null && echo "nvpmodel:  $(nvpmodel -q 2>/dev/null | head -n1)"
    fi
    echo "os:        $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}")"
    echo "kernel:    $(uname -srm)"
    parts=$(sed -n 's/^CPU part[[:space:]]*: //p' /proc/cpuinfo | sort | uniq -c | awk '{print $2 "x" $1}')
    cores=""
    for p in $parts; do cores="$cores $(cpu_core "${p%x*}") x${p#*x}"; done
    echo "cpu:      ${cores:- $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)}"
    features=$(sed -n 's/^Features[[:space:]]*: //p' /proc/cpuinfo | head -n1)
    echo "features:  $features"
    notable=""
    for f in asimddp asimdhp fphp i8mm bf16 sve sve2 atomics; do
        case " $features " in *" $f "*) notable="$notable $f" ;; esac
    done
    echo "notable:  ${notable:- none (no dot product: int8 models get no sdot speed-up)}"
    echo "memory:    $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    if [ -r /sys/class/thermal/thermal_zone0/temp ]; then
        echo "temp:      $(awk '{printf "%.1f C", $1/1000}' /sys/class/thermal/thermal_zone0/temp)"
    fi
    command -v vcgencmd >/dev/null && echo "throttled: $(vcgencmd get_throttled 2>&1)"
    echo "agent:     $agent ($("$agent" --version 2>&1))"
    if [ -n "$agent_py" ] && [ -x "$agent_py" ]; then
        "$agent_py" - <<'EOF' 2>&1 | sed 's/^/           /;1s/^ */python:    /'
import platform, sys
print(sys.version.split()[0], platform.machine())
try:
    import numpy, onnxruntime
    print("onnxruntime", onnxruntime.__version__, "numpy", numpy.__version__)
    print("providers", ", ".join(onnxruntime.get_available_providers()))
except ImportError as exc:
    print("import failed:", exc)
EOF
    fi
    echo "model:     ${model:-none found} / image: ${image:-none found}"
    echo
    # doctor checks what a config names (model, camera, serial, broker): the service's config when
    # there is one, else a throw-away config with the model and image found above
    config=${EDGE_AGENT_CONFIG:-/etc/edge-agent/config.toml}
    if [ ! -r "$config" ] && [ -n "$model" ] && [ -n "$image" ]; then
        config=$(mktemp "${TMPDIR:-/tmp}/edge-agent-smoke.XXXXXX.toml")
        trap 'rm -f "$config"' EXIT
        printf '[device]\nstate_dir = "%s"\n[detector]\nmodel = "%s"\n[camera]\nsource = "%s"\n[mqtt]\nenabled = false\n' \
            "${TMPDIR:-/tmp}/edge-agent-smoke-state" "$model" "$(dirname "$image")" >"$config"
        echo "(no service config: doctor checks the model and images found above)"
    fi
    run_cmd doctor --config "$config"
    if [ -n "$model" ]; then
        run_model bench
        if [ -n "$image" ]; then run_model infer "$image"; else echo "-- infer: skipped (no image)"; fi
    else
        echo "-- bench, infer: skipped (no .onnx model found; pass --model)"
    fi
    echo "== end (status $status) =="
    exit "$status"
} 2>&1 | tee "$report"
rc=${PIPESTATUS[0]}
echo "(saved to $report)" >&2
exit "$rc"
