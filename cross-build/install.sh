#!/usr/bin/env bash
# Install edge-agent from this offline bundle (no network needed).
#
#   sudo ./install.sh [--prefix /opt/edge-agent] [--python python3] [--ort-wheel FILE]
#                     [--no-systemd] [--no-user] [--no-link]
#
#   --prefix DIR      venv in DIR/venv, demo models in DIR/models      (default /opt/edge-agent)
#   --python PY       interpreter the venv is made from; must match the bundle's Python
#   --ort-wheel FILE  use this onnxruntime wheel instead of the bundled CPU one
#                     (Jetson: onnxruntime-gpu from NVIDIA's Jetson Zoo / JetPack repository)
#   --no-systemd      do not set up the service (systemd/install-service.sh: user, /etc/edge-agent, unit)
#   --no-user         do not create the edge-agent service user
#   --no-link         do not link /usr/local/bin/edge-agent
#
# Running it again upgrades in place to exactly the versions in wheels/.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prefix=/opt/edge-agent
python=python3
ort_wheel=""
do_systemd=1
do_user=1
do_link=1
user=edge-agent

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case $1 in
        --prefix) prefix=$2; shift 2 ;;
        --python) python=$2; shift 2 ;;
        --ort-wheel) ort_wheel=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
        --no-systemd) do_systemd=0; shift ;;
        --no-user) do_user=0; shift ;;
        --no-link) do_link=0; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

field() { sed -n "s/^$1=//p" "$here/BUNDLE.txt" | head -n1; }
version=$(field version)
want_py=$(field python)
if [ -z "$version" ] || [ -z "$want_py" ]; then die "$here/BUNDLE.txt is missing or damaged"; fi
[ -z "$ort_wheel" ] || [ -f "$ort_wheel" ] || die "--ort-wheel: no such file: $ort_wheel"
# JetPack bundles carry no onnxruntime: the GPU build comes from NVIDIA (cross-build/JETSON.md)
if [ "$(field onnxruntime)" = external ] && [ -z "$ort_wheel" ]; then
    die "this JetPack $(field jetpack) bundle has no onnxruntime: pass --ort-wheel onnxruntime_gpu-<ver>-cp${want_py/./}-cp${want_py/./}-linux_aarch64.whl (NVIDIA's Jetson Zoo; see JETSON.md)"
fi

# The wheels are CPython $want_py aarch64 builds: any other interpreter cannot load them.
command -v "$python" >/dev/null 2>&1 || die "'$python' not found (Raspberry Pi OS bookworm: apt install python3)"
got=$("$python" -c 'import platform, sys; print(platform.machine(), "%d.%d" % sys.version_info[:2])') \
    || die "'$python' does not run"
[ "$got" = "aarch64 $want_py" ] \
    || die "bundle is for aarch64 Python $want_py, '$python' is: $got (64-bit OS needed; see JETSON.md for JetPack)"
if { [ $do_systemd = 1 ] || [ $do_user = 1 ] || [ $do_link = 1 ]; } && [ "$(id -u)" != 0 ]; then
    die "run as root (sudo), or pass --no-systemd --no-user --no-link with a writable --prefix"
fi

venv=$prefix/venv
mkdir -p "$prefix"
if [ ! -x "$venv/bin/python" ]; then
    # --without-pip: Debian's ensurepip lives in python3-venv, which an offline board may lack;
    # pip is bootstrapped from the bundle's own pip wheel instead.
    say "creating venv $venv"
    "$python" -m venv --without-pip "$venv" || die "could not create a venv with $python"
fi
vpy=$venv/bin/python
if ! "$vpy" -m pip --version >/dev/null 2>&1; then
    pipwhl=$(find "$here/wheels" -maxdepth 1 -name 'pip-*.whl' | head -n1)
    [ -n "$pipwhl" ] || die "no pip wheel in $here/wheels"
    say "bootstrapping pip from ${pipwhl##*/}"
    "$vpy" "$pipwhl/pip" install --quiet --no-index --find-links "$here/wheels" "$pipwhl"
fi

# Every wheel by file name: a re-run replaces older versions with exactly these.
pip_install=("$vpy" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$here/wheels")
mapfile -t wheels < <(find "$here/wheels" -maxdepth 1 -name '*.whl' | sort)
if [ -z "$ort_wheel" ]; then
    say "installing edge-agent $version and ${#wheels[@]} wheels into $venv"
    "${pip_install[@]}" "${wheels[@]}"
else
    # onnxruntime-gpu installs the same `onnxruntime` package under another name: the CPU one
    # must not be installed next to it, so dependencies are given explicitly (--no-deps).
    mapfile -t wheels < <(printf '%s\n' "${wheels[@]}" | grep -v '/onnxruntime-[0-9]')
    say "installing edge-agent $version with ${ort_wheel##*/}"
    "${pip_install[@]}" --no-deps "${wheels[@]}"
    "$vpy" -m pip uninstall --quiet --yes onnxruntime >/dev/null 2>&1 || true
    "${pip_install[@]}" --no-deps --force-reinstall "$ort_wheel"
fi
"$venv/bin/edge-agent" --version >/dev/null || die "edge-agent does not start from $venv"

if [ -d "$here/models" ]; then
    mkdir -p "$prefix/models"
    cp -r "$here/models/." "$prefix/models/"
    say "demo models in $prefix/models"
fi

if [ $do_user = 1 ]; then
    if [ -f "$here/systemd/$user.sysusers" ] && command -v systemd-sysusers >/dev/null; then
        install -D -m 644 "$here/systemd/$user.sysusers" "/usr/lib/sysusers.d/$user.conf"
        systemd-sysusers "/usr/lib/sysusers.d/$user.conf"
    elif ! getent passwd "$user" >/dev/null; then
        useradd --system --home-dir /var/lib/$user --no-create-home --shell /usr/sbin/nologin "$user"
    fi
    # camera, serial sensor, GPIO/I2C: only groups this OS has
    for group in video dialout gpio i2c; do
        if getent group "$group" >/dev/null; then usermod -a -G "$group" "$user"; fi
    done
    say "service user: $(id "$user")"
fi

if [ $do_systemd = 1 ] && [ -x "$here/systemd/install-service.sh" ]; then
    # the same script as a checkout install (README): user, /etc/edge-agent with the example
    # config and the credential file, the model folder, the unit; daemon-reload + enable
    svc_flags=(--venv "$venv")
    [ -d /run/systemd/system ] || svc_flags+=(--no-systemctl)
    "$here/systemd/install-service.sh" "${svc_flags[@]}"
fi

if [ $do_link = 1 ]; then
    ln -sfn "$venv/bin/edge-agent" /usr/local/bin/edge-agent
fi

cat <<EOF

edge-agent $version installed in $venv.
Next steps:
  1. edit /etc/edge-agent/config.toml (--no-systemd: create it with "edge-agent config example")
  2. check the board:     $venv/bin/edge-agent doctor
  3. start the service:   sudo systemctl enable --now edge-agent.service
  4. follow its log:      journalctl -u edge-agent -f
  on-board report:        ./device-smoke.sh   (paste its output into bug reports)
EOF
