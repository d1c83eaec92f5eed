#!/usr/bin/env bash
# Install BeltSight as a systemd service, idempotently (run it again to upgrade):
#   - the system user and group `beltsight` (groups video and render where they exist),
#   - the package into a virtual environment at /opt/beltsight/.venv (plus models/ and README.md),
#   - systemd/beltsight.service and systemd/beltsight@.service into /etc/systemd/system,
#   - a config: /etc/beltsight/beltsight.toml, or with --gpus one /etc/beltsight/<index>.toml per
#     GPU for beltsight@<index> (its own credentials path and [health] port 9108 + index).
#     An existing config is never overwritten (the operator's edits stay); passwords are yours
#     to put into /etc/beltsight/redis-password and camera-password (mode 0600).
#
# Usage: sudo tools/deploy/install-service.sh [--gpus "0 1"] [--python python3] [--pip-args "..."]
#                                              [--root DIR] [--no-systemctl]
#   --root DIR      install under DIR instead of / (a throwaway root for tests and packaging;
#                   the user goes into DIR/etc/passwd via useradd --prefix; implies --no-systemctl)
#   --pip-args ARGS extra arguments for pip (e.g. "--no-deps", an index URL, extras ".[gpu]")
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ROOT=""
GPUS=""
PYTHON="python3"
PIP_ARGS=""
EXTRAS=""
SYSTEMCTL=1
USER_NAME="beltsight"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --root) ROOT="${2%/}"; SYSTEMCTL=0; shift 2 ;;
        --gpus) GPUS="$2"; shift 2 ;;
        --python) PYTHON="$2"; shift 2 ;;
        --pip-args) PIP_ARGS="$2"; shift 2 ;;
        --extras) EXTRAS="[$2]"; shift 2 ;;
        --no-systemctl) SYSTEMCTL=0; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "install-service.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done

for gpu in $GPUS; do
    [[ "$gpu" =~ ^[0-9]+$ ]] || { echo "install-service.sh: --gpus takes GPU indices, got '$gpu'" >&2; exit 2; }
done

OPT="$ROOT/opt/beltsight"
ETC="$ROOT/etc/beltsight"
UNITS="$ROOT/etc/systemd/system"
say() { printf 'install-service: %s\n' "$*"; }

ensure_user() {
    local prefix=()
    [[ -n "$ROOT" ]] && prefix=(--prefix "$ROOT")
    if grep -q "^${USER_NAME}:" "$ROOT/etc/passwd" 2>/dev/null; then
        say "user $USER_NAME exists"
    else
        useradd "${prefix[@]}" --system --user-group --home-dir /var/lib/beltsight --no-create-home \
            --shell /usr/sbin/nologin --comment "BeltSight daemon" "$USER_NAME"
        say "user $USER_NAME created"
    fi
    local group
    for group in video render; do
        if grep -q "^${group}:" "$ROOT/etc/group" 2>/dev/null; then
            usermod "${prefix[@]}" --append --groups "$group" "$USER_NAME"
        fi
    done
}

install_package() {
    install -d -m 0755 "$OPT" "$OPT/models"
    if [[ ! -x "$OPT/.venv/bin/python" ]]; then
        "$PYTHON" -m venv "$OPT/.venv"
        say "virtual environment created at $OPT/.venv"
    fi
    # Build from a clean copy: pip must not write build/ or *.egg-info into the checkout.
    local stage
    stage="$(mktemp -d)"
    tar -C "$SRC" --exclude=.git --exclude=.venv --exclude=build --exclude='*.egg-info' \
        --exclude=__pycache__ --exclude=runs --exclude=demo-data -cf - . | tar -C "$stage" -xf -
    # shellcheck disable=SC2086  # PIP_ARGS is a list of words on purpose
    "$OPT/.venv/bin/python" -m pip install --quiet --upgrade $PIP_ARGS "$stage$EXTRAS" || { rm -rf "$stage"; return 1; }
    rm -rf "$stage"
    install -m 0644 "$SRC"/models/*.onnx "$OPT/models/"
    install -m 0644 "$SRC/README.md" "$OPT/README.md"
    say "package installed into $OPT/.venv"
}

install_units() {
    install -d -m 0755 "$UNITS"
    install -m 0644 "$SRC/systemd/beltsight.service" "$SRC/systemd/beltsight@.service" "$UNITS/"
    say "units installed into $UNITS"
}

# write_config DEST INSTANCE: the example config for one instance ("" = the single unit)
write_config() {
    local dest="$1" instance="$2"
    if [[ -e "$dest" ]]; then
        say "kept existing $dest"
        return
    fi
    local unit="beltsight.service" port=9108 state="/var/lib/beltsight"
    if [[ -n "$instance" ]]; then
        unit="beltsight@${instance}.service"
        port=$((9108 + instance))
        state="/var/lib/beltsight/${instance}"
    fi
    sed -e "s#/run/credentials/beltsight.service/#/run/credentials/${unit}/#g" \
        -e "s#^spool_dir = .*#spool_dir = \"${state}/spool\"#" \
        -e "s#^listen = \"127.0.0.1:9108\"#listen = \"127.0.0.1:${port}\"#" \
        "$SRC/configs/beltsight.toml" > "$dest.tmp"
    if [[ -n "$instance" ]]; then
        sed -i -e "1i # beltsight@${instance}: GPU ${instance} ([engine.cuda] device_id comes from the unit)" "$dest.tmp"
    fi
    chmod 0640 "$dest.tmp"
    mv "$dest.tmp" "$dest"
    say "config written: $dest"
}

install_configs() {
    install -d -m 0750 "$ETC"
    if [[ -z "$GPUS" ]]; then
        write_config "$ETC/beltsight.toml" ""
    fi
    for gpu in $GPUS; do
        write_config "$ETC/${gpu}.toml" "$gpu"
    done
    # The credentials are read by systemd (root) and handed over; the files stay root-only.
    for secret in redis-password camera-password; do
        [[ -e "$ETC/$secret" ]] || { install -m 0600 /dev/null "$ETC/$secret"; say "empty $ETC/$secret: put the password in"; }
    done
    if [[ -z "$ROOT" ]]; then  # the service user reads its config (root:beltsight 0640)
        chgrp "$USER_NAME" "$ETC" "$ETC"/*.toml
    fi
}

ensure_user
install_package
install_units
install_configs
if [[ "$SYSTEMCTL" == 1 ]]; then
    systemctl daemon-reload
    if [[ -n "$GPUS" ]]; then
        say "start with: systemctl enable --now$(for g in $GPUS; do printf ' beltsight@%s' "$g"; done)"
    else
        say "start with: systemctl enable --now beltsight"
    fi
fi
