#!/bin/sh
# Checks deploy/ (run by CI; from anywhere):
#   systemd   systemd-analyze verify on the three units (ExecStart pointed at a stub inside a
#             temporary directory, since /usr/local/bin/planfarm need not exist here); any
#             warning it prints counts as a failure
#   shell     shellcheck on the shell scripts of deploy/, examples/, bench/ and on the integration
#             scripts that run them
#   yaml      yamllint (deploy/.yamllint) and deploy/k8s_schema.py on deploy/k8s/*.yaml
#   image     every shared library ./planfarm links (objdump NEEDED) comes from a package the
#             Containerfile's runtime stage installs (skipped when ./planfarm is not built)
# Needs (Debian): systemd, shellcheck, yamllint, python3-yaml, binutils (objdump).
# --allow-missing turns a missing tool into a SKIP line instead of a failure (for `make
# integration` on machines without them); CI runs it without.
# Ends with "N passed, N failed, N skipped"; exit status 1 when a check failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
allow_missing=0
[ "${1:-}" = "--allow-missing" ] && allow_missing=1

passed=0 failed=0 skipped=0
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }
skip() { skipped=$((skipped + 1)); echo "SKIP $1"; }
# have TOOL PACKAGE: whether TOOL is installed; says what to install when it is not.
have() {
    command -v "$1" >/dev/null 2>&1 && return 0
    if [ "$allow_missing" = 1 ]; then
        skip "$1: not installed (Debian package $2)"
    else
        fail "$1: not installed (Debian package $2)"
    fi
    return 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# ---- systemd ----
if have systemd-analyze systemd; then
    mkdir -p "$tmp/bin" "$tmp/units"
    printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/planfarm"
    chmod +x "$tmp/bin/planfarm"
    for unit in "$here"/systemd/*.service; do
        sed "s#/usr/local/bin/planfarm#$tmp/bin/planfarm#g" "$unit" > "$tmp/units/$(basename "$unit")"
    done
    # A template is verified through one instance of it.
    cp "$tmp/units/planfarm-worker@.service" "$tmp/units/planfarm-worker@1.service"
    for unit in planfarm-broker.service planfarm-worker@1.service planfarm-agent.service; do
        if out=$(cd "$tmp/units" && systemd-analyze verify "./$unit" 2>&1) && [ -z "$out" ]; then
            pass "systemd-analyze verify $unit"
        else
            fail "systemd-analyze verify $unit"
            printf '%s\n' "$out" | sed "s#$tmp/units/##g; s/^/    /"
        fi
    done
fi

# ---- shell scripts ----
if have shellcheck shellcheck; then
    scripts=$(cd "$root" && for f in deploy/check.sh deploy/slurm/*.sbatch examples/*.sh bench/*.sh \
        tests/integration/deploy.sh tests/integration/torch2planfarm.sh; do
        [ -f "$f" ] && echo "$f"; done)
    for f in $scripts; do
        case "$f" in *.sbatch) shell=bash ;; *) shell=$(head -1 "$root/$f" | sed -n 's@^#!.*/\(env \)*\([a-z]*\).*@\2@p') ;; esac
        if out=$(cd "$root" && shellcheck -s "${shell:-sh}" "$f" 2>&1); then
            pass "shellcheck $f"
        else
            fail "shellcheck $f"
            printf '%s\n' "$out" | sed 's/^/    /'
        fi
    done
fi

# ---- Kubernetes manifests ----
if have yamllint yamllint; then
    if out=$(cd "$here" && yamllint -c .yamllint -s k8s 2>&1); then
        pass "yamllint deploy/k8s"
    else
        fail "yamllint deploy/k8s"
        printf '%s\n' "$out" | sed 's/^/    /'
    fi
fi
if python3 -c 'import yaml' 2>/dev/null; then py=python3
elif /usr/bin/python3 -c 'import yaml' 2>/dev/null; then py=/usr/bin/python3
else py=""; fi
if [ -n "$py" ]; then
    if out=$("$py" "$here/k8s_schema.py" "$here"/k8s/*.yaml 2>&1); then
        pass "k8s_schema deploy/k8s ($(printf '%s\n' "$out" | tail -1 | sed 's/^k8s_schema: //'))"
    else
        fail "k8s_schema deploy/k8s"
        printf '%s\n' "$out" | sed 's/^/    /'
    fi
elif [ "$allow_missing" = 1 ]; then
    skip "k8s_schema: python3 cannot import yaml (Debian package python3-yaml)"
else
    fail "k8s_schema: python3 cannot import yaml (Debian package python3-yaml)"
fi

# ---- the image's runtime libraries ----
if [ ! -x "$root/planfarm" ]; then
    skip "Containerfile runtime libraries: ./planfarm not built"
elif have objdump binutils && have dpkg dpkg; then
    runtime=$(sed -n '/RUNTIME-PACKAGES/,/rm -rf/p' "$here/Containerfile" \
        | tr -c 'a-z0-9.+\n-' '\n' | grep -E '^lib[a-z0-9.+-]+$' | sort -u)
    missing=""
    # what it links, and what the broker opens with dlopen (libmicrohttpd, for `broker --http`)
    opened=$(sed -n 's/.*dlopen("\(lib[^"]*\)".*/\1/p' "$root"/broker/*.c)
    for so in $(objdump -p "$root/planfarm" | awk '/NEEDED/ {print $2}') $opened; do
        path=$(ldd "$root/planfarm" | awk -v so="$so" '$1 == so {print $3}')
        [ -n "$path" ] || path=$(ldconfig -p | awk -v so="$so" '$1 == so {print $NF; exit}')
        pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null)
        pkg=$(printf '%s\n' "$pkg" | head -1 | cut -d: -f1)
        case "$pkg" in libc6|libgcc-s1|'') continue ;; esac  # in every Debian image
        printf '%s\n' "$runtime" | grep -qx "$pkg" || missing="$missing $pkg($so)"
    done
    if [ -z "$missing" ]; then
        pass "Containerfile runtime stage installs every library planfarm links or opens"
    else
        fail "Containerfile runtime stage lacks:$missing"
    fi
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
