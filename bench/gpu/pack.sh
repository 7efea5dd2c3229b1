#!/bin/bash
# Gathers the shared libraries planfarm and pf_tests load (not glibc's own) into .gpu/lib, so
# that a GPU machine without Debian's packages runs them (bench/gpu/run.sh).
set -eu
mkdir -p .gpu/lib
for bin in planfarm build/pf_tests; do
    ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" .gpu/lib/; done
ls .gpu/lib
