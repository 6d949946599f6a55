#!/usr/bin/env bash
# Set edge-agent up as a systemd service once the package is installed in a venv.
#
#   sudo systemd/install-service.sh [--venv /opt/edge-agent/venv] [--root DIR] [--no-systemctl]
#
#   --venv DIR       the venv holding edge-agent (default /opt/edge-agent/venv)
#   --root DIR       install into DIR instead of / (tests; implies --no-systemctl)
#   --no-systemctl   do not run daemon-reload / enable (no systemd running, e.g. a container)
#   --systemd-version N   the target's systemd version (default: `systemctl --version`)
#
# Does, in order: the edge-agent system user (sysusers.d; groups video, dialout), the class
# drivers loaded at boot (modules-load.d), /etc/edge-agent/ with config.toml (the commented
# example, only if none exists) and an empty mqtt-password credential file (root, 0600), the
# model folder /var/lib/edge-agent/models, and the unit with ExecStart pointing at the venv;
# then daemon-reload and enable (the service is started by you, after editing the config).
# On systemd older than 247 (Ubuntu 18.04 = 237 on JetPack 4, 20.04 = 245 on JetPack 5) also a
# drop-in for what the unit needs from newer versions (see systemd/README.md, "Older systemd").
# Idempotent: an existing config or password file is never overwritten.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=/opt/edge-agent/venv
root=""
systemctl_too=1
user=edge-agent
sd_version=""

say() { printf 'install-service: %s\n' "$*"; }
die() { printf 'install-service: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case $1 in
        --venv) venv=$2; shift 2 ;;
        --root)
            [ -d "${2:-}" ] || die "--root ${2:-}: not a folder (create it first: it becomes the installed system's /)"
            root=$(cd "$2" && pwd); systemctl_too=0; shift 2 ;;
        --no-systemctl) systemctl_too=0; shift ;;
        --systemd-version) sd_version=$2; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[ "$(id -u)" = 0 ] || [ -n "$root" ] || die "run as root (sudo)"
agent=$venv/bin/edge-agent
[ -x "$agent" ] || die "$agent not found: install the package first (python3 -m venv $venv && $venv/bin/pip install .)"

# 1. the service user, from the sysusers.d file (useradd where systemd-sysusers is absent)
install -D -m 0644 "$here/edge-agent.sysusers" "$root/usr/lib/sysusers.d/$user.conf"
if command -v systemd-sysusers >/dev/null 2>&1; then
    # an empty --root has no etc/ yet: systemd-sysusers cannot lock its passwd without one
    [ -z "$root" ] || install -d -m 0755 "$root/etc"
    systemd-sysusers ${root:+--root="$root"} "$root/usr/lib/sysusers.d/$user.conf" 2>/dev/null ||
        die "systemd-sysusers could not add the user $user under ${root:-/} (run: systemd-sysusers ${root:+--root=$root }$root/usr/lib/sysusers.d/$user.conf)"
elif [ -z "$root" ] && ! getent passwd "$user" >/dev/null; then
    useradd --system --home-dir "/var/lib/$user" --no-create-home --shell /usr/sbin/nologin "$user"
    for group in video dialout; do getent group "$group" >/dev/null && usermod -a -G "$group" "$user"; done
fi
owner=$user group=$user
if [ -n "$root" ]; then # names resolve on the host, not in DIR: use DIR's numeric ids
    owner=$(awk -F: -v u="$user" '$1 == u { print $3 }' "$root/etc/passwd" 2>/dev/null)
    group=$(awk -F: -v u="$user" '$1 == u { print $3 }' "$root/etc/group" 2>/dev/null)
    owner=${owner:-0} group=${group:-0}
fi
say "service user $user"

# 2. class drivers at boot, so the unit's device allow-list covers hot-plugged cameras/adapters
install -D -m 0644 "$here/edge-agent.modules-load" "$root/etc/modules-load.d/$user.conf"

# 3. configuration: readable by the service's group only; the password never goes in it
install -d -m 0755 "$root/etc/edge-agent"
if [ ! -e "$root/etc/edge-agent/config.toml" ]; then
    "$agent" config example >"$root/etc/edge-agent/config.toml.new"
    chmod 0640 "$root/etc/edge-agent/config.toml.new"
    chgrp "$group" "$root/etc/edge-agent/config.toml.new"
    mv "$root/etc/edge-agent/config.toml.new" "$root/etc/edge-agent/config.toml"
    say "wrote the example config $root/etc/edge-agent/config.toml: edit it before starting"
else
    say "kept the existing $root/etc/edge-agent/config.toml"
fi
if [ ! -e "$root/etc/edge-agent/mqtt-password" ]; then
    # the unit passes it as a credential (LoadCredential=); empty means "no password"
    install -m 0600 /dev/null "$root/etc/edge-agent/mqtt-password"
fi

# 4. where models live (readable by the service under ProtectSystem=strict)
install -d -m 0750 "$root/var/lib/edge-agent"
install -d -m 0750 "$root/var/lib/edge-agent/models"
chown -R "$owner:$group" "$root/var/lib/edge-agent"

# 5. the unit, pointing at this venv
install -D -m 0644 "$here/edge-agent.service" "$root/etc/systemd/system/edge-agent.service"
[ "$venv" = /opt/edge-agent/venv ] \
    || sed -i "s#/opt/edge-agent/venv#$venv#g" "$root/etc/systemd/system/edge-agent.service"

# 6. older systemd: the unit is written for 247+. Directives an older systemd does not know are
# ignored with a warning (weaker hardening, listed in systemd/README.md); two would break the service:
#  - SystemCallFilter=@system-service (group since 239): before it, the allow-list holds only
#    @default and the agent cannot even load its libraries -> keep the unit's deny-list only;
#  - LoadCredential= (since 247): no $CREDENTIALS_DIRECTORY -> the agent reads the password file
#    where it is, which the service's group must then be able to read.
[ -n "$sd_version" ] || sd_version=$(systemctl --version 2>/dev/null | awk 'NR == 1 { print $2 }')
case $sd_version in
    '' | *[!0-9]*) say "systemd version unknown: no drop-in for older systemd written" ; sd_version=999 ;;
esac
dropin_dir=$root/etc/systemd/system/edge-agent.service.d
if [ "$sd_version" -lt 247 ]; then
    install -d -m 0755 "$dropin_dir"
    {
        echo "# written by install-service.sh for systemd $sd_version (edge-agent.service is written for 247+)"
        echo "[Service]"
        if [ "$sd_version" -lt 239 ]; then
            echo "# no @system-service before systemd 239: keep the deny-list only"
            echo "SystemCallFilter="
            grep '^SystemCallFilter=~' "$here/edge-agent.service"
        fi
        echo "# no LoadCredential= before systemd 247: read the password file in place (0640 root:$user)"
        echo "Environment=CREDENTIALS_DIRECTORY=/etc/edge-agent"
    } >"$dropin_dir/10-older-systemd.conf"
    chgrp "$group" "$root/etc/edge-agent/mqtt-password"
    chmod 0640 "$root/etc/edge-agent/mqtt-password"
    say "systemd $sd_version (< 247): wrote $dropin_dir/10-older-systemd.conf"
else
    rm -f "$dropin_dir/10-older-systemd.conf"
fi

if [ $systemctl_too = 1 ]; then
    systemctl daemon-reload
    systemctl enable edge-agent.service
fi

cat <<EOF
Next:
  1. copy your model(s) to /var/lib/edge-agent/models/ and edit /etc/edge-agent/config.toml
     (the MQTT password, if any, goes in /etc/edge-agent/mqtt-password)
  2. check:  sudo $agent doctor
  3. start:  sudo systemctl enable --now edge-agent && journalctl -u edge-agent -f
EOF
