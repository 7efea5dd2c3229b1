#!/bin/sh
# Installs the Debian packages planfarm builds against, only when one is missing.
# Called by `make run` and `make test`; safe to run again.
set -eu
PKGS="build-essential pkg-config libzmq3-dev libczmq-dev libprotobuf-c-dev protobuf-c-compiler \
libcunit1-dev libjansson-dev libsqlite3-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "setup: installing$missing" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: need root (or sudo) to install:$missing" >&2; exit 1; }
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q $missing
