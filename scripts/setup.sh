#!/bin/sh
# Installs the Debian packages of scripts/packages.txt that are missing, for the groups named
# (default: build). Called by `make run` (build) and `make test` (build test); safe to run again.
#   scripts/setup.sh [--list] [GROUP...]   --list prints the packages instead of installing
set -eu
here=$(dirname "$0")
list=0
if [ "${1:-}" = "--list" ]; then list=1; shift; fi
[ $# -gt 0 ] || set -- build
pkgs=""
for g in "$@"; do
    found=$(awk -v g="$g" '!/^#/ && $1 == g { print $2 }' "$here/packages.txt")
    [ -n "$found" ] || { echo "setup: no package group '$g' in $here/packages.txt" >&2; exit 2; }
    pkgs="$pkgs $found"
done
if [ $list = 1 ]; then echo "${pkgs# }"; exit 0; fi
missing=""
for p in $pkgs; do
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
