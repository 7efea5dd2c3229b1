#!/bin/bash
# The GPU session's checks, as run on a lent GPU machine (bench/results/ keeps the output):
# the CUDA probes built with that machine's nvcc, `make test-gpu`'s suite, `planfarm profile
# --local` (cluster), `--sweep` (the device model's calibration records) and `--graph` on GPT
# layers. planfarm and pf_tests are built on a Debian machine and travel with their libraries
# in .gpu/lib (the GPU machine has no Debian packages and no network): bench/gpu/pack.sh.
#   usage: bench/gpu/run.sh OUTDIR
set -u
out=${1:?usage: bench/gpu/run.sh OUTDIR}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.gpu/lib
log=$out/gpu.log
step() { echo "== $*" | tee -a "$log"; }
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit,memory.total --format=csv
    nvcc --version | tail -2
} >>"$log" 2>&1
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
step "build libpfcuda.so"
$NVCC -O2 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -gencode arch=compute_90,code=compute_90 -I. -Xcompiler -fPIC,-Wall,-Werror,-fvisibility=hidden \
    -shared -o build/libpfcuda.so profiler/cuda/pfcuda.cu -L"$(dirname "$NVCC")/../lib64" \
    -Xlinker -rpath,"$(dirname "$NVCC")/../lib64" -lcublas >>"$log" 2>&1 || { echo "nvcc failed" >>"$log"; exit 1; }
export PF_CUDA_LIB=$PWD/build/libpfcuda.so
step "make test-gpu (the suite, run directly: PF_GPU_TESTS=1 build/pf_tests gpu)"
PF_GPU_TESTS=1 PF_BIN=$PWD/planfarm PF_DATA=$PWD/tests/data timeout 240 build/pf_tests gpu >>"$log" 2>&1
echo "test-gpu exit $?" | tee -a "$log"
step "planfarm profile --local -o cluster.json"
timeout 120 ./planfarm profile --local -o "$out/cluster.json" >>"$log" 2>&1
echo "exit $?" >>"$log"
step "planfarm profile --local --sweep -o sweep.json"
timeout 300 ./planfarm profile --local --sweep -q -o "$out/sweep.json" >>"$log" 2>&1
echo "exit $?" >>"$log"
for h in 4096 12288; do
    step "GPT layers at hidden $h, seq 2048, micro-batch 1, measured"
    ./planfarm model gpt --layers 2 --hidden $h --heads $((h / 128)) --seq 2048 --vocab 51200 \
        -o /tmp/g$h.json >>"$log" 2>&1
    timeout 120 ./planfarm profile --local --graph /tmp/g$h.json -q -o "$out/gpt_h$h.measured.json" >>"$log" 2>&1
    echo "exit $?" >>"$log"
done
date -u >>"$log"
