#!/usr/bin/env bash
# Install (or upgrade) Castle as a systemd service on Debian/Ubuntu. Run as root:
#
#     sudo deploy/install.sh [--with-local-zookeeper] [REPO]
#
# REPO: the Castle source tree to install (default: the one holding this script).
# --with-local-zookeeper: also install the drop-in that orders Castle after zookeeper.service.
#
# Idempotent: run it again to upgrade. It creates the system user and group castle,
# /var/lib/castle (data) and /etc/castle, a venv at /opt/castle/venv with Castle installed
# from REPO, the unit /etc/systemd/system/castle.service, and the configuration examples. It
# never overwrites /etc/castle/castle.properties or /etc/default/castle; the shipped
# example is refreshed as /etc/castle/castle.properties.example. It does not start or
# restart the service.
#
# Paths can be moved (for a test install) with CASTLE_PREFIX (/opt/castle), CASTLE_ETC
# (/etc/castle), CASTLE_DATA (/var/lib/castle), CASTLE_DEFAULTS (/etc/default/castle),
# CASTLE_UNIT_DIR (/etc/systemd/system), CASTLE_USER (castle) and PYTHON (python3).
set -euo pipefail

PREFIX=${CASTLE_PREFIX:-/opt/castle}
ETC=${CASTLE_ETC:-/etc/castle}
DATA=${CASTLE_DATA:-/var/lib/castle}
DEFAULTS=${CASTLE_DEFAULTS:-/etc/default/castle}
UNIT_DIR=${CASTLE_UNIT_DIR:-/etc/systemd/system}
USER_NAME=${CASTLE_USER:-castle}
PYTHON=${PYTHON:-python3}

with_zookeeper=0
repo=""
for arg in "$@"; do
    case "$arg" in
        --with-local-zookeeper) with_zookeeper=1 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        -*) echo "install.sh: unknown option $arg" >&2; exit 2 ;;
        *) repo=$arg ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "${repo:-$here/..}" && pwd)
deploy=$repo/deploy

say() { printf '==> %s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run me as root (sudo $0)"
[ -f "$repo/pyproject.toml" ] && [ -d "$repo/broker" ] || die "$repo is not a Castle source tree"
for f in castle.service castle.properties castle-secure.properties castle.default castle-zookeeper.conf; do
    [ -f "$deploy/$f" ] || die "missing $deploy/$f"
done

# Python >= 3.11 with venv and ensurepip (Debian: python3-venv).
if ! command -v "$PYTHON" >/dev/null; then
    die "$PYTHON not found (apt-get install python3 python3-venv)"
fi
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "Castle needs Python 3.11 or newer; $PYTHON is $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    say "installing python3-venv"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
fi

# The service's user and group (system accounts, no login, home = the data dir).
if ! getent group "$USER_NAME" >/dev/null; then
    say "creating group $USER_NAME"
    groupadd --system "$USER_NAME"
fi
if ! getent passwd "$USER_NAME" >/dev/null; then
    say "creating user $USER_NAME"
    useradd --system --gid "$USER_NAME" --home-dir "$DATA" --no-create-home \
        --shell /usr/sbin/nologin --comment "Castle message broker" "$USER_NAME"
fi

# Directories: data owned by the service; configuration readable by its group only.
# (run.dir, /run/castle, is the unit's RuntimeDirectory=: systemd creates it at start.)
install -d -m 0750 -o "$USER_NAME" -g "$USER_NAME" "$DATA"
install -d -m 0750 -o root -g "$USER_NAME" "$ETC"
install -d -m 0755 "$PREFIX" "$UNIT_DIR" "$(dirname "$DEFAULTS")"

# The venv, and Castle from the source tree (again on every run: that is the upgrade).
if [ ! -x "$PREFIX/venv/bin/python" ]; then
    say "creating the venv $PREFIX/venv"
    "$PYTHON" -m venv "$PREFIX/venv"
fi
say "installing Castle from $repo into $PREFIX/venv"
"$PREFIX/venv/bin/pip" install --quiet --disable-pip-version-check --upgrade "$repo"
"$PREFIX/venv/bin/castle" version

# Configuration: the example always, the live files only when missing.
install -m 0640 -o root -g "$USER_NAME" "$deploy/castle.properties" "$ETC/castle.properties.example"
# The TLS + SCRAM variant, to copy over castle.properties by hand (deploy/README.md).
install -m 0640 -o root -g "$USER_NAME" "$deploy/castle-secure.properties" "$ETC/castle-secure.properties.example"
if [ -e "$ETC/castle.properties" ]; then
    say "keeping $ETC/castle.properties (the new example is $ETC/castle.properties.example)"
else
    say "installing $ETC/castle.properties"
    install -m 0640 -o root -g "$USER_NAME" "$deploy/castle.properties" "$ETC/castle.properties"
fi
if [ ! -e "$DEFAULTS" ]; then
    say "installing $DEFAULTS"
    install -m 0644 "$deploy/castle.default" "$DEFAULTS"
fi
"$PREFIX/venv/bin/python" -c 'import sys; from broker.config import load_config; load_config(sys.argv[1])' \
    "$ETC/castle.properties" || die "$ETC/castle.properties does not load (fix it before starting the service)"

# The unit (ours: rewritten on every run; local changes belong in drop-ins), with the
# paths above when they were moved.
unit_tmp=$(mktemp)
trap 'rm -f "$unit_tmp"' EXIT
sed -e "s#/opt/castle/#$PREFIX/#g" -e "s#/etc/castle/#$ETC/#g" -e "s#/var/lib/castle#$DATA#g" \
    -e "s#/etc/default/castle#$DEFAULTS#g" -e "s#^User=castle\$#User=$USER_NAME#" -e "s#^Group=castle\$#Group=$USER_NAME#" \
    "$deploy/castle.service" >"$unit_tmp"
install -m 0644 "$unit_tmp" "$UNIT_DIR/castle.service"
say "installed $UNIT_DIR/castle.service"
if [ "$with_zookeeper" -eq 1 ]; then
    install -d -m 0755 "$UNIT_DIR/castle.service.d"
    install -m 0644 "$deploy/castle-zookeeper.conf" "$UNIT_DIR/castle.service.d/zookeeper.conf"
    say "installed $UNIT_DIR/castle.service.d/zookeeper.conf (After=/Wants=zookeeper.service)"
fi

if [ -d /run/systemd/system ] && [ "$UNIT_DIR" = /etc/systemd/system ]; then
    systemctl daemon-reload
    say "systemctl daemon-reload done"
else
    say "systemd is not running here (or the unit dir was moved): no daemon-reload"
fi

cat <<EOF

Castle is installed. Next steps:
  1. review $ETC/castle.properties (listeners, advertised.listeners, log.dirs, workers)
  2. systemctl enable --now castle        # start now and at boot
  3. systemctl status castle              # "serving on ..." once it is ready
     journalctl -u castle -f              # its log
After an upgrade (this script again): systemctl restart castle
EOF
