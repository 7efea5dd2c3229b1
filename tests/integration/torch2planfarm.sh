#!/bin/sh
# tools/torch2planfarm.py on a small GPT, resnet18 and a Llama-style block, each graph checked
# and planned by planfarm (tests/tools/test_torch2planfarm.py). Uses the first Python that can
# import torch: /usr/bin/python3 (Debian's python3-torch) before python3 on PATH; skips when none.
set -eu
cd "$(dirname "$0")/../.."
PF_BIN=${PF_BIN:-$PWD/planfarm}
export PF_BIN
for py in /usr/bin/python3 python3; do
    if "$py" -c 'import torch, torchvision' >/dev/null 2>&1; then
        exec "$py" tests/tools/test_torch2planfarm.py
    fi
done
echo "SKIP torch2planfarm: no python3 imports torch and torchvision (Debian: apt-get install python3-torch python3-torchvision)"
