#!/usr/bin/env bash
# Set up BeltSight on a fresh Debian 12 / Ubuntu 22.04+ machine: system packages, a
# virtualenv in .venv, and the package itself (editable).
#
#   tools/bootstrap.sh          runtime + demo (redis-server, GStreamer RTSP server, Pillow)
#   tools/bootstrap.sh --dev    also the test and lint tools (and, for the tests, headless Chromium,
#                               systemd-analyze, openssl, mosquitto and Node.js clients)
#   tools/bootstrap.sh --train  also PyTorch (CPU) for python -m tools.model.train
#   tools/bootstrap.sh --gige   also GigE Vision cameras (gige:// URLs): Aravis and its Python binding
#                               (--dev includes it: the tests read Aravis' fake camera)
#
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=(demo)
dev=0
gige=0
for arg in "$@"; do
  case "$arg" in
    --dev) extras+=(dev); dev=1 ;;
    --train) extras+=(train) ;;
    --gige) gige=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done

# redis-server: the demo's and the tests' local Redis. GStreamer's RTSP server (driven by
# Debian's python3 + gi; a virtualenv cannot import gi): the demo's and the tests' cameras.
apt_packages=(
  python3 python3-venv python3-gi
  redis-server
  gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly
)
# The tests also drive the live view in headless Chromium, verify the systemd units, make TLS
# certificates for a TLS redis-server, compile the CUDA letterbox kernel's source as C++ on the
# CPU (g++), drop root's capabilities to test as another user (setpriv, util-linux) and create
# the service user in a scratch root (useradd, passwd).
if [ "$dev" -eq 1 ]; then
  apt_packages+=(redis-tools chromium chromium-driver fonts-liberation systemd openssl g++ util-linux passwd)
  # a real MQTT broker (the bridge's Sparkplug B tests) and Node.js for the clients from other stacks
  # (node-opcua, Eclipse Tahu's sparkplug-payload: tests/js/package.json); a Node.js that came with
  # its own npm (NodeSource's) is kept
  apt_packages+=(mosquitto)
  command -v npm >/dev/null 2>&1 || apt_packages+=(nodejs npm)
fi
# GigE Vision (gige:// cameras): Debian's Aravis (its GObject introspection typelib) and, in the
# virtualenv, PyGObject (the `gige` extra), which PyPI ships as source only: it builds against
# girepository 1.0 and cairo (pycairo), hence the -dev packages and a compiler. aravis-tools brings
# arv-fake-gv-camera-0.8, the tests' GigE Vision camera on loopback.
if [ "$dev" -eq 1 ]; then gige=1; fi
if [ "$gige" -eq 1 ]; then
  extras+=(gige)
  apt_packages+=(gir1.2-aravis-0.8 libgirepository1.0-dev libcairo2-dev pkg-config gcc python3-dev)
  if [ "$dev" -eq 1 ]; then apt_packages+=(aravis-tools); fi
fi
missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "==> apt-get install ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "bootstrap: BeltSight needs Python 3.11 or later; $python is $("$python" --version 2>&1)." >&2
  echo "  Debian 12 and Ubuntu 24.04 ship one; elsewhere set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
spec=".[$(IFS=,; echo "${extras[*]}")]"
echo "==> pip install -e $spec"
.venv/bin/python -m pip install -q -e "$spec"
if [ "$dev" -eq 1 ]; then
  echo "==> npm ci (tests/js: OPC UA and Sparkplug B clients from other stacks)"
  npm ci --prefix tests/js --no-audit --no-fund --loglevel=error
fi
echo "==> ready: $(.venv/bin/beltsight --help | head -n 1)"
