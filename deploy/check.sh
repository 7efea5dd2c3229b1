#!/bin/sh
# Checks deploy/ (run by CI; from anywhere):
#   systemd   systemd-analyze verify on the three units (ExecStart pointed at a stub inside a
#             temporary directory, since /usr/local/bin/planfarm need not exist here); any
#             warning it prints counts as a failure
#   shell     shellcheck on the shell scripts of deploy/, examples/, bench/ and on the integration
#             scripts that run them
#   yaml      yamllint (deploy/.yamllint) and deploy/k8s_schema.py on deploy/k8s/*.yaml
#   image     every shared library ./planfarm links (objdump NEEDED) comes from a package the
#             Containerfile's runtime stage installs (skipped when ./planfarm is not built);
#             the build stage's make command run on exactly the files it COPYs (what a podman
#             build compiles, without podman); the CUDA stage's make target built where nvcc is
#             found, else checked with make -n and its clean refusal without nvcc; agent-gpu's
#             cuBLAS package against what libpfcuda.so links, when it is built here
#   flags     every role started with exactly the flags of each unit's ExecStart (under the
#             unit's SystemCallFilter, through deploy/seccomp_run.c, on x86_64), each k8s
#             container's args and each srun line of the Slurm scripts (paths, keys and
#             endpoints replaced by local ones); it must still run after 2 s (an unknown flag or
#             a refused endpoint ends it at once). Needs ./planfarm built.
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
    runtime=$(sed -n '/^# RUNTIME-PACKAGES/,/rm -rf/p' "$here/Containerfile" \
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

# ---- the image's build stages, from exactly the files they copy ----
# stage_lines NAME: the Containerfile's lines of stage NAME (from its FROM to the next FROM)
stage_lines() { awk -v s="$1" '/^FROM /{ on = ($NF == s) } on' "$here/Containerfile"; }
# its COPY sources from the build context (not --from=), and its RUN line that starts with make
stage_copies() { stage_lines "$1" | awk '$1 == "COPY" && $2 !~ /^--/ { print $2, $3 }'; }
stage_make() { stage_lines "$1" | sed -n 's/^RUN \(make .*\)$/\1/p' | head -1; }
ctx=$tmp/context
mkdir -p "$ctx"
stage_copies build >"$tmp/copies"
ncopy=0 copy_ok=1
while read -r src dst; do
    # every COPY here keeps its path (COPY x x, or a file into ./): the context tree is the repo's
    case "$dst" in
        "$src"|./|.) ;;
        *) copy_ok=0; fail "Containerfile: COPY $src $dst moves a path (check.sh copies paths as they are)" ;;
    esac
    mkdir -p "$ctx/$(dirname "$src")"
    cp -R "$root/$src" "$ctx/$src" || copy_ok=0
    ncopy=$((ncopy + 1))
done <"$tmp/copies"
build_cmd=$(stage_make build)
if [ "$copy_ok" = 1 ] && [ "$ncopy" -gt 0 ] && [ -n "$build_cmd" ]; then
    if (cd "$ctx" && sh -c "$build_cmd") >"$tmp/image-build.log" 2>&1 && [ -x "$ctx/planfarm" ]; then
        pass "image stage build: '$build_cmd' from exactly the $ncopy paths it copies"
    else
        fail "image stage build: '$build_cmd' from the $ncopy paths it copies"
        grep -E 'error|Error|No rule' "$tmp/image-build.log" | head -5 | sed 's/^/    /'
    fi
else
    fail "image stage build: no COPY or no 'RUN make' line found in deploy/Containerfile"
fi
# build-cuda: FROM build, so the same tree; its make command builds libpfcuda.so with nvcc.
# With nvcc here the target is built for real (this machine's nvcc instead of the stage's
# Debian one); without, make -n proves the target and every file it needs are in the copied
# tree, and make without an nvcc must stop with its message.
cuda_cmd=$(stage_make build-cuda)
if [ "$(stage_lines build-cuda | awk '$1 == "FROM" { print $2 }')" != build ] || [ -z "$cuda_cmd" ]; then
    fail "image stage build-cuda: not 'FROM build' with a 'RUN make' line"
elif [ ! -x "$ctx/planfarm" ]; then
    skip "image stage build-cuda: the build stage did not build"
elif [ -n "$(stage_copies build-cuda)" ]; then
    fail "image stage build-cuda copies files of its own: check.sh builds it from build's tree"
elif command -v nvcc >/dev/null 2>&1; then
    target=$(printf '%s\n' "$cuda_cmd" | awk '{ print $2 }')
    if (cd "$ctx" && make "$target" NVCC="$(command -v nvcc)") >"$tmp/cuda-build.log" 2>&1 &&
        [ -f "$ctx/build/libpfcuda.so" ]; then
        pass "image stage build-cuda: make $target (this machine's nvcc) from the build stage's files"
    else
        fail "image stage build-cuda: make $target from the build stage's files"
        tail -5 "$tmp/cuda-build.log" | sed 's/^/    /'
    fi
elif ! (cd "$ctx" && sh -c "$cuda_cmd -n") >"$tmp/cuda-n.log" 2>&1; then
    fail "image stage build-cuda: '$cuda_cmd -n': a target or file is missing from the copied tree"
    tail -3 "$tmp/cuda-n.log" | sed 's/^/    /'
elif (cd "$ctx" && make cuda NVCC=) >"$tmp/cuda.log" 2>&1 ||
    ! grep -q 'libpfcuda.so: no nvcc found' "$tmp/cuda.log"; then
    fail "image stage build-cuda: without nvcc, make cuda does not stop with 'no nvcc found'"
    tail -3 "$tmp/cuda.log" | sed 's/^/    /'
else
    pass "image stage build-cuda: '$cuda_cmd' finds its target and inputs in the copied tree (make -n); not compiled: no nvcc here (make cuda without one stops with 'no nvcc found')"
fi
# agent-gpu's runtime: a package for every library libpfcuda.so links beyond the C/C++ runtime
# and the driver's libcuda (mounted by the NVIDIA runtime): cuBLAS, whose package carries its
# soname's major (libcublas11 in bookworm; a local toolkit may be another CUDA, so only the
# library is compared, not its version)
cuda_runtime=$(sed -n '/^# CUDA-RUNTIME-PACKAGES/,/rm -rf/p' "$here/Containerfile" \
    | tr -c 'a-z0-9.+\n-' '\n' | grep -E '^lib[a-z0-9.+-]+$' | sort -u)
so=""
for f in "$ctx/build/libpfcuda.so" "$root/build/libpfcuda.so"; do
    if [ -f "$f" ]; then so=$f; break; fi
done
if [ -z "$so" ]; then
    skip "agent-gpu runtime libraries: no libpfcuda.so built here (needs nvcc)"
elif have objdump binutils; then
    missing=""
    for lib in $(objdump -p "$so" | awk '/NEEDED/ { print $2 }'); do
        case "$lib" in
            libcublas.so.*|libcublasLt.so.*) pkg=$(printf '%s\n' "$cuda_runtime" | grep -E '^libcublas[0-9]+$' | head -1) ;;
            libc.so.*|libm.so.*|libgcc_s.so.*|libstdc++.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libcuda.so.*) continue ;;
            *) pkg="?" ;;
        esac
        [ -n "$pkg" ] && printf '%s\n' "$cuda_runtime" | grep -qx "$pkg" || missing="$missing $lib"
    done
    if [ -z "$missing" ]; then
        pass "agent-gpu installs the cuBLAS that libpfcuda.so links ($(echo "$cuda_runtime" | tr '\n' ' '))"
    else
        fail "agent-gpu runtime stage lacks a package for:$missing"
    fi
fi

# ---- every command line against the binary ----
# run_role LABEL WORD...: the role runs 2 s (timeout's 124) or the check fails with its output.
run_role() {
    label=$1
    shift
    rc=0
    timeout 2 "$@" >"$tmp/role.out" 2>&1 || rc=$?
    if [ "$rc" = 124 ]; then
        pass "flags: $label"
    else
        fail "flags: $label: exit $rc: $*"
        sed 's/^/    /' "$tmp/role.out" | head -5
    fi
}
if [ ! -x "$root/planfarm" ]; then
    if [ "$allow_missing" = 1 ]; then skip "flags: ./planfarm not built"; else fail "flags: ./planfarm not built"; fi
else
    bin=$root/planfarm
    # keys where the files expect them: /etc/planfarm (allow-lists, the broker's public cert),
    # credentials (secret certs under the names the units and Secrets give them)
    etc=$tmp/etc cred=$tmp/cred keys=$tmp/keys
    mkdir -p "$etc/clients" "$etc/workers" "$etc/agents" "$etc/admins" "$cred" "$tmp/state" "$keys"
    for k in broker worker agent client; do "$bin" keygen "$k" -d "$keys" >/dev/null; done
    cp "$keys/broker" "$etc/broker"
    cp "$keys/client" "$etc/clients/"; cp "$keys/client" "$etc/admins/"
    cp "$keys/worker" "$etc/workers/"; cp "$keys/agent" "$etc/agents/"
    for k in broker worker agent; do cp "$keys/${k}_secret" "$cred/$k.cert"; done
    cp -r "$etc/clients" "$etc/workers" "$etc/agents" "$keys/"
    # a port nothing listens on, for workers and agents (they keep reconnecting)
    dead=tcp://127.0.0.1:9
    # filter_for UNIT: the system call numbers its SystemCallFilter= lines allow, as systemd
    # reads them (the first line an allow-list, later ones add, "~" ones remove; @groups
    # expanded by systemd-analyze), for seccomp_run.c, which kills the role on any other call
    filter_for() {
        command -v systemd-analyze >/dev/null 2>&1 || { echo "no systemd-analyze"; return 1; }
        [ -x "$tmp/seccomp_run" ] || { echo "cannot build deploy/seccomp_run.c (x86_64, cc)"; return 1; }
        "$py3" - "$1" <<'PY'
import re, subprocess, sys
def expand(name, seen):
    if not name.startswith("@"):
        return {name}
    if name in seen:
        return set()
    seen.add(name)
    out = subprocess.run(["systemd-analyze", "syscall-filter", name], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    calls = set()
    for line in out[1:]:
        word = line.strip()
        if word and not word.startswith("#"):
            calls |= expand(word, seen)
    return calls
allowed = None
for line in open(sys.argv[1]):
    m = re.match(r"SystemCallFilter=(~?)(.*)", line.strip())
    if not m:
        continue
    names = set()
    for w in m.group(2).split():
        names |= expand(w, set())
    if allowed is None:
        if m.group(1):
            sys.exit("a deny-list unit: not modelled")
        allowed = names
    elif m.group(1):
        allowed -= names
    else:
        allowed |= names
if allowed is None:
    sys.exit("no SystemCallFilter")
nr = dict(re.findall(r"#define __NR_(\w+) (\d+)",
                     open("/usr/include/x86_64-linux-gnu/asm/unistd_64.h").read()))
print("\n".join(sorted(nr[c] for c in allowed if c in nr)))
PY
    }
    py3=$(command -v python3 || true)
    if [ "$(uname -m)" = x86_64 ] && [ -n "$py3" ] && [ -r /usr/include/x86_64-linux-gnu/asm/unistd_64.h ]; then
        cc -std=c11 -O2 -o "$tmp/seccomp_run" "$here/seccomp_run.c" 2>"$tmp/cc.err" || true
    fi
    # The units run as a DynamicUser: as root, SQLite would fchown its journal (in @privileged)
    # where the service never does, so run them as an unprivileged user (throwaway keys made
    # readable for it)
    as_user=""
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
        as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
        chmod 755 "$tmp"
        chmod -R a+rX "$etc" "$cred" "$keys"
        chmod 777 "$tmp/state"
    fi
    # systemd: the unit's defaults, its credentials and state directory; ${X} and $X as systemd
    # splits them (one word, words)
    for unit in "$here"/systemd/*.service; do
        cmd=$(sed -n 's/^ExecStart=//p' "$unit" | sed "s#/usr/local/bin/planfarm#$bin#; s#/etc/planfarm#$etc#g; s/%H/host/; s/%i/1/")
        # shellcheck disable=SC2034 # used by the eval below
        PLANFARM_BIND=tcp://127.0.0.1:0 PLANFARM_HTTP=127.0.0.1:0 PLANFARM_BROKER=$dead \
            PLANFARM_WORKER_ARGS="--threads 1" CREDENTIALS_DIRECTORY=$cred STATE_DIRECTORY=$tmp/state
        eval "set -- $cmd"
        if filter_for "$unit" >"$tmp/calls" 2>"$tmp/calls.err"; then
            # shellcheck disable=SC2086 # as_user: a command and its flags, or nothing
            run_role "systemd/$(basename "$unit") under its SystemCallFilter" $as_user \
                "$tmp/seccomp_run" "$tmp/calls" "$@"
        else
            skip "SystemCallFilter of $(basename "$unit"): $(cat "$tmp/calls.err")"
            run_role "systemd/$(basename "$unit")" "$@"
        fi
    done
    # Kubernetes: each container's args, with the mounts and Service names made local
    if [ -n "$py" ]; then
        "$py" - "$here"/k8s/*.yaml >"$tmp/k8s.args" <<PY
import shlex, sys, yaml
subst = [("/etc/planfarm/keys/", "$cred/"), ("/etc/planfarm/broker-key/", "$etc/"),
         ("/etc/planfarm/", "$etc/"), ("/var/lib/planfarm", "$tmp/state"),
         ("tcp://0.0.0.0:5710", "tcp://127.0.0.1:0"), ("tcp://planfarm-broker:5710", "$dead"),
         ("127.0.0.1:9710", "127.0.0.1:0"), ("\$(NODE_NAME)", "node0"), ("\$(POD_IP)", "127.0.0.1")]
for path in sys.argv[1:]:
    for doc in yaml.safe_load_all(open(path)):
        pod = (doc or {}).get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("containers", []):
            args = []
            for a in c.get("args", []):
                for old, new in subst:
                    a = a.replace(old, new)
                args.append(a)
            print(path.rsplit("/", 1)[-1] + ":" + c["name"], shlex.join(args))
PY
        while read -r label cmd; do
            eval "set -- $cmd"
            run_role "k8s/$label" "$bin" "$@"
        done <"$tmp/k8s.args"
    fi
    # Slurm: srun runs each command 2 s and logs its exit status; scontrol names this machine
    mkdir -p "$tmp/slurm"
    printf '#!/bin/sh\necho 127.0.0.1\n' >"$tmp/slurm/scontrol"
    cat >"$tmp/slurm/srun" <<'SH'
#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done
rc=0
timeout 2 "$@" >>"$SRUN_LOG.out" 2>&1 || rc=$?
echo "$rc $*" >>"$SRUN_LOG"
SH
    chmod +x "$tmp/slurm/scontrol" "$tmp/slurm/srun"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for keyed in "$keys" ""; do
        for script in planfarm-farm planfarm-agents; do
            mode="(--insecure)"
            [ -n "$keyed" ] && mode="(keys)"
            log=$tmp/srun-$script-${keyed:+keys}.log
            : >"$log"
            args=""
            [ "$script" = planfarm-agents ] && args=$dead
            # shellcheck disable=SC2086 # args: one endpoint or none
            PATH="$tmp/slurm:$PATH" SRUN_LOG=$log PLANFARM=$bin PLANFARM_KEYS=$keyed \
                PLANFARM_PORT=$port SLURM_JOB_NODELIST=node0 SLURM_JOB_ID=1 \
                SLURM_SUBMIT_DIR=$tmp/state timeout 30 bash "$here/slurm/$script.sbatch" $args \
                >"$log.script" 2>&1 || true
            n=$(grep -c . "$log")
            bad=$(grep -v '^124 ' "$log" || true)
            if [ "$n" -gt 0 ] && [ -z "$bad" ]; then
                pass "flags: slurm/$script.sbatch $mode: $n srun lines ran"
            else
                fail "flags: slurm/$script.sbatch $mode: ${bad:-no srun line ran}"
                tail -5 "$log.script" "$log.out" 2>/dev/null | sed 's/^/    /'
            fi
        done
    done
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
