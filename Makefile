# planfarm: one build for everything.
#   make          build libplanner.a and the planfarm binary
#   make run      install what is missing, build, plan the examples/ models end to end
#   make test     install what is missing, build, run every CUnit suite and integration test
#   make bench    benchmarks (ratios against baselines measured in the same run);
#                 BENCH="partition mapping" runs only those (BENCH=peers: the peers)
#   make bench-peers   planfarm against PipeDream, Piper and Calculon themselves (bench/peers.sh)
#   make sanitize build the unit tests and build-asan/planfarm under ASan/UBSan and run the
#                 unit suites and the integration scripts with them (SAN_SCRIPTS)
#   make check-layers   fail on any #include that points up the layers (README "Architecture")
#                 or closes a circle between files
#   make check-code     fail on a call circle between files or a function over the size limits
#   make stress-test  `make test` 20 times and `make sanitize` 5 times under two CPU hogs per
#                 core (STRESS_N, STRESS_SANITIZE_N change the counts)
#   make cuda     build/libpfcuda.so, the profiler's CUDA probes (only where nvcc is found)
#   make test-gpu build it and run the GPU suite against tests/data/h100 (needs an H100)
#   make fuzz     libFuzzer targets (tests/fuzz), FUZZ_SECONDS each (default 60; FUZZ_ONLY="a b":
#                 only those); make fuzz-replay runs the committed corpus once (CI)

BUILD   ?= build
V       ?= 0
ifeq ($(V),0)
Q  := @
say = @printf '  %-6s %s\n' $(1) $(2);
else
Q  :=
say =
endif
CC      ?= cc
PKGS    := libczmq libzmq libsodium libprotobuf-c jansson sqlite3 cunit libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# libmicrohttpd: headers only; broker/http.c opens the library when a broker serves HTTP.
PKG_LIBS   := $(shell pkg-config --libs $(filter-out libmicrohttpd,$(PKGS)) 2>/dev/null)

OPT     ?= -O2
CFLAGS  ?=
CFLAGS  += -std=c11 -Wall -Wextra -Werror $(OPT) -g -fopenmp -D_GNU_SOURCE -I. -I$(BUILD)
LDLIBS  += -lm -lpthread -fopenmp -ldl

# The profiler's CUDA probes are a separate shared object, loaded with dlopen at run time, so
# that everything else builds and tests with no CUDA at all. NVCC= (empty) turns them off.
NVCC    ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVCCFLAGS ?= -O2 -std=c++17 $(CUDA_ARCH)
# cuBLAS is found where nvcc's toolkit keeps it, whatever the loader's path says at run time.
CUDA_LIBDIR ?= $(if $(NVCC),$(abspath $(dir $(NVCC))../lib64))
CUDA_SRC := $(wildcard profiler/cuda/*.cu)

PLANNER_SRC := $(wildcard planner/*/*.c)
PROTO_SRC   := $(wildcard proto/*.c)
NET_SRC     := $(wildcard broker/*.c worker/*.c profiler/*.c client/*.c)
CLI_SRC     := $(wildcard cli/*.c)
TEST_SRC    := $(wildcard tests/*.c)
BENCH_SRC   := $(wildcard bench/*.c)
PROTO_DEF   := $(wildcard proto/*.proto)
PROTO_GEN   := $(patsubst proto/%.proto,$(BUILD)/proto/%.pb-c.c,$(PROTO_DEF))

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
PLANNER_OBJ := $(call obj,$(PLANNER_SRC))
PROTO_OBJ   := $(call obj,$(PROTO_SRC)) $(PROTO_GEN:.c=.o)
NET_OBJ     := $(call obj,$(NET_SRC))
CLI_OBJ     := $(call obj,$(CLI_SRC))
TEST_OBJ    := $(call obj,$(TEST_SRC))
BENCH_OBJ   := $(call obj,$(BENCH_SRC))

LIBS := $(BUILD)/libpfnet.a $(BUILD)/libpfproto.a $(BUILD)/libplanner.a

.PHONY: setup-test all run test check-code unit integration bench bench-build bench-peers sanitize clean setup check-layers stress-test cuda test-gpu fuzz fuzz-build fuzz-replay fuzz-merge
all: planfarm $(if $(NVCC),$(BUILD)/libpfcuda.so)

# Debian packages (scripts/packages.txt): `build` for make and make run, `test` for make test.
setup:
	@./scripts/setup.sh build
setup-test:
	@./scripts/setup.sh build test

# The planner must not know about sockets or protobuf: it is compiled without their include paths.
$(BUILD)/planner/%.o: planner/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c $(PROTO_GEN)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/proto/%.pb-c.c: proto/%.proto
	@mkdir -p $(dir $@)
	$(call say,PROTOC,$<)protoc-c --proto_path=proto --c_out=$(BUILD)/proto $<
$(BUILD)/proto/%.pb-c.h: $(BUILD)/proto/%.pb-c.c ;
.SECONDARY: $(PROTO_GEN)

$(BUILD)/proto/%.pb-c.o: $(BUILD)/proto/%.pb-c.c
	$(call say,CC,$<)$(CC) $(filter-out -Werror,$(CFLAGS)) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/libplanner.a: $(PLANNER_OBJ)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^
$(BUILD)/libpfproto.a: $(PROTO_OBJ)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^
$(BUILD)/libpfnet.a: $(NET_OBJ)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^ $(if $^,,$(BUILD)/.empty.o)

$(BUILD)/.empty.o:
	@mkdir -p $(BUILD) && echo 'typedef int pf_empty_unit;' > $(BUILD)/.empty.c
	$(Q)$(CC) $(CFLAGS) -c $(BUILD)/.empty.c -o $@
$(BUILD)/libpfnet.a: | $(BUILD)/.empty.o

$(BUILD)/libpfcuda.so: $(CUDA_SRC) profiler/cuda_abi.h
	@mkdir -p $(dir $@)
	@test -n "$(NVCC)" || { echo "libpfcuda.so: no nvcc found (set NVCC=/path/to/nvcc)" >&2; exit 1; }
	$(call say,NVCC,$@)$(NVCC) $(NVCCFLAGS) -I. -Xcompiler -fPIC,-Wall,-Werror,-fvisibility=hidden \
	    -shared -o $@ $(CUDA_SRC) -L$(CUDA_LIBDIR) -Xlinker -rpath,$(CUDA_LIBDIR) -lcublas

cuda: $(BUILD)/libpfcuda.so

planfarm: $(CLI_OBJ) $(LIBS)
	$(call say,LD,$@)$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIBS) $(PKG_LIBS) $(LDLIBS)

# Each tests/test_<suite>.c defines pf_suite_<suite>(); the registry is generated from the file names.
$(BUILD)/tests/suites.h: $(TEST_SRC)
	@mkdir -p $(dir $@)
	@{ for f in $(patsubst tests/test_%.c,%,$(filter tests/test_%.c,$(TEST_SRC))); do \
	     echo "PF_SUITE($$f)"; done; } > $@.tmp && mv $@.tmp $@
$(BUILD)/tests/runner.o: $(BUILD)/tests/suites.h

$(BUILD)/pf_tests: $(TEST_OBJ) $(LIBS)
	$(call say,LD,$@)$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(LIBS) $(PKG_LIBS) $(LDLIBS)

# Each bench/bench_<name>.c defines `int pf_bench_<name>(void)`; same generated registry.
$(BUILD)/bench/benches.h: $(BENCH_SRC)
	@mkdir -p $(dir $@)
	@{ for f in $(patsubst bench/bench_%.c,%,$(filter bench/bench_%.c,$(BENCH_SRC))); do \
	     echo "PF_BENCH($$f)"; done; } > $@.tmp && mv $@.tmp $@
$(BUILD)/bench/main.o: $(BUILD)/bench/benches.h

$(BUILD)/pf_bench: $(BENCH_OBJ) $(LIBS)
	$(call say,LD,$@)$(CC) $(CFLAGS) -o $@ $(BENCH_OBJ) $(LIBS) $(PKG_LIBS) $(LDLIBS)

check-layers:
	@./scripts/check-layers.sh
	@./scripts/check-cycles.sh /nonexistent

# No include or call circle between files (from the objects), no function over the size limits.
check-code: $(LIBS) planfarm
	@./scripts/check-cycles.sh $(BUILD)
	@./scripts/check-names.sh $(BUILD)
	@./scripts/check-functions.sh

# The tests' OpenMP threads sleep when idle: libgomp's default spinning between the mapping
# probes' many short parallel regions starves a loaded 2-core machine (the map_symmetry suite
# took 65 s beside two builds, 1.5 s passive). No test measures time.
unit integration sanitize: export OMP_WAIT_POLICY := passive

unit: planfarm $(BUILD)/pf_tests
	PF_BIN=$(CURDIR)/planfarm PF_DATA=$(CURDIR)/tests/data $(BUILD)/pf_tests

# Small helpers the integration scripts need (plan comparison, a hostile client): C, not python.
$(BUILD)/pf_testtool: tests/tools/pf_testtool.c $(LIBS)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(LIBS) $(PKG_LIBS) $(LDLIBS)

integration: planfarm $(BUILD)/pf_testtool
	@set -e; for t in tests/integration/*.sh; do [ -f "$$t" ] || continue; \
	    echo "== $$t"; PF_BIN=$(CURDIR)/planfarm PF_TESTTOOL=$(CURDIR)/$(BUILD)/pf_testtool \
	    PF_DATA=$(CURDIR)/tests/data sh "$$t"; done

test: setup-test
	$(MAKE) check-layers check-code unit integration

# On a machine with a GPU: the CUDA probes against tests/data/h100 (class bounds), then a
# profiled cluster planned end to end. The GPU suite registers itself only when PF_GPU_TESTS=1.
test-gpu: planfarm $(BUILD)/pf_tests $(BUILD)/libpfcuda.so
	PF_GPU_TESTS=1 PF_CUDA_LIB=$(CURDIR)/$(BUILD)/libpfcuda.so PF_BIN=$(CURDIR)/planfarm \
	    PF_DATA=$(CURDIR)/tests/data $(BUILD)/pf_tests gpu

bench-build: setup
	$(MAKE) planfarm $(BUILD)/pf_bench

bench: bench-build
	$(if $(BENCH),$(if $(filter-out peers,$(BENCH)),PF_DATA=$(CURDIR)/tests/data $(BUILD)/pf_bench $(filter-out peers,$(BENCH))),PF_DATA=$(CURDIR)/tests/data $(BUILD)/pf_bench)
	$(if $(BENCH),$(if $(filter peers,$(BENCH)),$(MAKE) bench-peers),$(MAKE) bench-peers)

# planfarm against PipeDream's optimizer, Piper's planner and Calculon's search themselves, on their
# own inputs, in the same run (bench/peers.sh; SKIP when ../shared/peers is absent, a SKIP line for
# a peer whose packages are missing). Calculon's rows take minutes to an hour each: PF_CALCULON_ROWS,
# PF_PEERS_CALCULON_BIG=1 and PF_PEER_ONLY=calculon choose them (bench/peers.sh's header).
bench-peers: setup
	@./scripts/setup.sh bench
	$(MAKE) planfarm
	BUILD=$(BUILD) ./bench/peers.sh

# The unit suites run in-process under ASan/UBSan; the CLI suites and the integration scripts
# run build-asan/planfarm, the same sources instrumented (tests/sanitize.sh: every process a script
# starts, brokers and workers in the background included, writes its report to a file, and any
# report fails the run). UBSan halts on the first report. LeakSanitizer is on for every script
# (SAN_SCRIPTS, <script>=1): a process a script kill -9s writes no report, and one that stops on
# SIGTERM or exits by itself must free what it holds. Not run here: deploy, layers, structure
# (they run no planfarm) and torch2planfarm (python and torch trace three models and drive the
# binary: its time under ASan could not be measured where torch is not installed, and the
# check/plan calls it makes are the other scripts' too; `make test` runs it). make sanitize took
# 3 min 22 s on 2 shared cores from an empty build-asan/: unit suites 31 s, scripts 110 s
# (journal.sh 59 s, netfault.sh 16 s, readme.sh 11 s).
SAN_SCRIPTS := cli_options=1 simulate=1 readme=1 agent=1 security=1 metrics=1 wire=1 journal=1 \
               netfault=1 layer_aligned=1 calibrate=1
SAN_FLAGS   := -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
sanitize: setup-test planfarm $(BUILD)/pf_testtool
	$(MAKE) BUILD=build-asan OPT="$(SAN_FLAGS)" \
	    LDLIBS="-lm -lpthread -fopenmp -ldl -fsanitize=address,undefined" build-asan/pf_tests \
	    build-asan/planfarm
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    PF_BIN=$(CURDIR)/build-asan/planfarm PF_DATA=$(CURDIR)/tests/data build-asan/pf_tests
	sh tests/sanitize.sh $(CURDIR)/build-asan/planfarm $(CURDIR)/$(BUILD)/pf_testtool $(SAN_SCRIPTS)

# The binary at build-asan/planfarm (make sanitize); the plain one stays ./planfarm.
$(BUILD)/planfarm: $(CLI_OBJ) $(LIBS)
	$(call say,LD,$@)$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIBS) $(PKG_LIBS) $(LDLIBS)

stress-test:
	sh tests/stress.sh $(or $(STRESS_N),20) $(or $(STRESS_SANITIZE_N),5)

# Fuzzing: the libraries again with clang, ASan, UBSan and coverage in build-fuzz/; one binary per
# tests/fuzz/fuzz_<target>.c; seeds from build/pf_fuzz_seeds and tests/data (tests/fuzz/run.sh).
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,build-fuzz/fuzz_%,$(wildcard tests/fuzz/fuzz_*.c))
$(BUILD)/pf_fuzz_seeds: tests/fuzz/seeds.c tests/fuzz/fuzz.h $(LIBS)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(LIBS) $(PKG_LIBS) $(LDLIBS)
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h build-fuzz/libplanner.a build-fuzz/libpfnet.a
	clang $(filter-out -O2 -I$(BUILD),$(CFLAGS)) -O1 $(FUZZ_SAN) -fsanitize=fuzzer -Ibuild-fuzz \
	    $(PKG_CFLAGS) -o $@ $< build-fuzz/libpfnet.a build-fuzz/libpfproto.a build-fuzz/libplanner.a \
	    $(PKG_LIBS) $(LDLIBS)
fuzz-build: setup-test
	$(MAKE) BUILD=build-fuzz CC=clang OPT="-O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link" \
	    build-fuzz/libplanner.a build-fuzz/libpfproto.a build-fuzz/libpfnet.a
	$(MAKE) $(BUILD)/pf_fuzz_seeds $(FUZZ_TARGETS)
fuzz: fuzz-build
	sh tests/fuzz/run.sh fuzz build-fuzz $(FUZZ_SECONDS)
fuzz-replay: fuzz-build
	sh tests/fuzz/run.sh replay build-fuzz
fuzz-merge: fuzz-build
	sh tests/fuzz/run.sh merge build-fuzz

# The examples (examples/make-examples.sh) planned end to end through the embedded broker and
# one worker thread per core: BERT-large on 4 x DGX-1, then Llama-7B on 2 x DGX-H100. The
# summaries go to stderr, the plans to build/plan.json and build/llama-plan.json.
run: setup
	$(MAKE) planfarm
	examples/make-examples.sh $(BUILD)/examples
	./planfarm check $(BUILD)/examples/bert-large.json
	./planfarm check $(BUILD)/examples/dgx1x4.json
	./planfarm plan $(BUILD)/examples/bert-large.json $(BUILD)/examples/dgx1x4.json -o $(BUILD)/plan.json
	./planfarm plan $(BUILD)/examples/llama-7b.json $(BUILD)/examples/dgx-h100x2.json -o $(BUILD)/llama-plan.json

clean:
	rm -rf $(BUILD) build-asan build-fuzz planfarm

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
