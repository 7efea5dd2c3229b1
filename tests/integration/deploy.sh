#!/bin/sh
# deploy/: systemd units, shell scripts, Kubernetes manifests, the image's runtime libraries
# (deploy/check.sh). A tool that is not installed is a SKIP here; CI runs deploy/check.sh
# without --allow-missing so that it fails instead.
set -eu
cd "$(dirname "$0")/../.."
exec sh deploy/check.sh --allow-missing
