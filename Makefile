# tram — a continuous-batching LLM inference server daemon.
#
#   make            build build/tram (CUDA objects too when nvcc is found)
#   make run        set up everything, then serve the default model
#   make test       set up everything, then run every test suite
#   make test-long  the sweeps too long for make test (pytest -m long; CI runs it)
#   make sanitize   build everything with ASan + UBSan into build/san/
#   make model      fetch and verify the default model into models/
#   make model-gemma3  fetch and verify Gemma 3 270M Q4_K_M (a test model)
#   make fuzz       build the libFuzzer targets (clang) into build/fuzz/
#   make fuzz-long  run each to 10^7 executions (or 30 min), corpus merged back
#   make soak       an hour of mixed load on tram (SOAK_MINUTES, SOAK_CLIENTS)
#
# Knobs: V=1 (echo commands), CUDA=auto|0|1, SANITIZER=address,undefined,
# FAULTS=1 (the TRAM_FAULTS fault-injection hooks of base/fault.h; make
# sanitize sets it),
# ARCH_FLAGS (default -march=native), BUILD (output folder), PREFIX, DESTDIR.

.DEFAULT_GOAL := all
.SECONDARY:
.DELETE_ON_ERROR:
SHELL := /bin/bash

BUILD      ?= build
V          ?= 0
CUDA       ?= auto
SANITIZER  ?=
FAULTS     ?= 0
FUZZ       ?= 0
ARCH_FLAGS ?= -march=native
PREFIX     ?= /usr/local
DESTDIR    ?=
VENV       ?= .venv
PYTHON     ?= python3
DEFAULT_MODEL := models/SmolLM2-135M-Instruct.Q4_1.gguf
GEMMA3_MODEL  := models/gemma-3-270m-q4_k_m.gguf
MODEL      ?= $(DEFAULT_MODEL)

ifeq ($(V),1)
  Q :=
  say = @true
else
  Q := @
  say = @printf '  %-6s %s\n' $(1) $(2)
endif

# --- Debian packages: installed once by scripts/setup.sh, before pkg-config
# is asked anything (a fresh machine has none of them). -----------------------
DEPS_STAMP := build/.deps-ok
NO_DEPS_GOALS := clean distclean help gpu-tests
ifneq ($(filter-out $(NO_DEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
  ifeq ($(wildcard $(DEPS_STAMP)),)
    $(info setup: checking Debian packages (scripts/setup.sh))
    DEPS_OUT := $(shell scripts/setup.sh $(DEPS_STAMP) >&2; echo $$?)
    ifneq ($(DEPS_OUT),0)
      $(error scripts/setup.sh failed; see the messages above)
    endif
  endif
endif

# msgpack-c names its pkg-config file msgpack-c from 6.0 on, msgpack before
MSGPACK_PC := $(shell pkg-config --exists msgpack-c 2>/dev/null && echo msgpack-c || echo msgpack)
PKGS       := libuv libcjson libpcre2-8 libsystemd libzmq $(MSGPACK_PC) icu-uc
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

LLHTTP_SRC := /usr/share/llhttp
LLHTTP_INC := /usr/share/include/llhttp

# --- CUDA: auto builds the .cu objects when nvcc is found. -------------------
NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
ifeq ($(CUDA),auto)
  CUDA_ON := $(if $(NVCC),1,0)
else ifeq ($(CUDA),1)
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found (put it on PATH or set NVCC=))
  endif
  CUDA_ON := 1
else
  CUDA_ON := 0
endif
ifneq ($(SANITIZER),)
  CUDA_ON := 0   # the CUDA runtime and ASan do not mix; sanitize the CPU build
endif
ifeq ($(wildcard kernels/cuda/*.cu),)
  CUDA_ON := 0   # no CUDA sources yet
endif
CUDA_HOME  := $(if $(NVCC),$(realpath $(dir $(realpath $(NVCC)))/..))
CUDA_ARCHS ?= -gencode arch=compute_80,code=sm_80 \
              -gencode arch=compute_90,code=sm_90 \
              -gencode arch=compute_90,code=compute_90

# --- flags ------------------------------------------------------------------
CSTD     := -std=gnu11
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CPPFLAGS := -I. -I$(LLHTTP_INC) $(PKG_CFLAGS) -D_GNU_SOURCE -MMD -MP
CFLAGS   ?= -O2 -g
CFLAGS   += $(CSTD) $(WARN) $(ARCH_FLAGS) -pthread -fno-strict-aliasing
LDFLAGS  += -pthread
LDLIBS   := $(PKG_LIBS) -lm
NVFLAGS  ?= -O2 -g -lineinfo
# NVWERROR: warnings fatal (here and in CI); tests/gpu/run-on-device.sh empties
# it, as nvcc passes it to the host compiler and another gcc warns elsewhere
NVWERROR ?= --Werror all-warnings
# NVCC_COMPAT: nvcc refuses (an error, which NVWERROR does not govern) a host
# gcc newer than the ones it was released for; a one-line CUDA file run
# through the preprocessor (where that check sits) shows whether it does, and
# then -allow-unsupported-compiler is passed. Probed once (exported to the
# sub-makes), and only where nvcc exists; set it to skip the probe.
ifeq ($(origin NVCC_COMPAT),undefined)
  ifneq ($(NVCC),)
    NVCC_COMPAT := $(shell d=$$(mktemp -d) && echo 'int main(void) { return 0; }' >$$d/p.cu && \
      { $(NVCC) -E $$d/p.cu -o /dev/null >/dev/null 2>&1 || \
        { $(NVCC) -allow-unsupported-compiler -E $$d/p.cu -o /dev/null >/dev/null 2>&1 && \
          echo -allow-unsupported-compiler; }; }; rm -rf $$d)
  endif
  export NVCC_COMPAT
endif
NVFLAGS  += -std=c++17 $(NVCC_COMPAT) $(CUDA_ARCHS) -I. $(CUBLAS_CFLAGS) -Xcompiler -Wall,-Wextra,-Wno-unused-parameter \
            $(NVWERROR) -MMD -MP

ifeq ($(FUZZ),1)
  FUZZ_CFLAGS := -fsanitize=fuzzer-no-link
  CFLAGS += $(FUZZ_CFLAGS)
endif
# test builds only: base/fault.h's hooks (release builds compile them out)
ifeq ($(FAULTS),1)
  CPPFLAGS += -DTRAM_FAULTS=1
endif
ifneq ($(SANITIZER),)
  SAN_FLAGS := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
  CFLAGS  += $(SAN_FLAGS)
  LDFLAGS += $(SAN_FLAGS)
endif

ifeq ($(CUDA_ON),1)
  CPPFLAGS += -DTRAM_CUDA=1
  LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
endif

# --- sources ----------------------------------------------------------------
# Every .c in these folders is part of the library; server/main.c is the
# program. New files need no Makefile change.
SRC_DIRS := base gguf st hf model text text/jinja sample http api server scheduler boot attention cache kernels kernels/cpu config grammar
MAIN_SRC := server/main.c
LIB_SRCS := $(filter-out $(MAIN_SRC),$(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c)))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
# The dashboard's page (server/dashboard/) embedded as C arrays
# (scripts/embed-assets.sh), compiled into the library.
DASH_ASSETS := $(sort $(wildcard server/dashboard/*.html server/dashboard/*.css server/dashboard/*.js))
DASH_GEN    := $(BUILD)/gen/dash_assets.c
LIB_OBJS    += $(DASH_GEN:%.c=$(BUILD)/obj/%.o)
# The objects that include base/fault.h are rebuilt when FAULTS changes
# (the stamp holds the value they were built with).
FAULT_STAMP := $(BUILD)/.faults
FAULT_USERS := $(patsubst %.c,$(BUILD)/obj/%.o,$(shell grep -l '"base/fault.h"' $(LIB_SRCS) 2>/dev/null))
ifneq ($(filter-out $(NO_DEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
  $(shell mkdir -p $(BUILD) && [ "$$(cat $(FAULT_STAMP) 2>/dev/null)" = "$(FAULTS)" ] || echo "$(FAULTS)" > $(FAULT_STAMP))
endif
$(FAULT_USERS): $(FAULT_STAMP)
$(FAULT_STAMP): ;
CU_SRCS  := $(if $(filter 1,$(CUDA_ON)),$(wildcard kernels/cuda/*.cu))
CU_OBJS  := $(CU_SRCS:%.cu=$(BUILD)/obj/%.o)
LIB      := $(BUILD)/libtram.a
LLHTTP_OBJS := $(addprefix $(BUILD)/llhttp/,llhttp.o api.o http.o)
LLHTTP_LIB  := $(BUILD)/libllhttp.a
TRAM     := $(BUILD)/tram

# C unit tests: one cmocka binary per tests/unit/test_*.c; other .c files in
# tests/unit/ are shared test support linked into every test binary.
UNIT_SRCS    := $(wildcard tests/unit/test_*.c)
UNIT_BINS    := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_SUPPORT := $(filter-out $(UNIT_SRCS),$(wildcard tests/unit/*.c))
UNIT_SUPPORT_OBJS := $(UNIT_SUPPORT:%.c=$(BUILD)/obj/%.o)

# Test tools: small programs the pytest suites drive (tests/tools/*.c), e.g.
# to compare tram's tokenizer or dequantization with a Python reference.
TOOL_SRCS := $(wildcard tests/tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tests/tools/%.c=$(BUILD)/tests/tools/%)

# libFuzzer targets: tests/fuzz/fuzz_*.c, built by `make fuzz` with clang,
# ASan and UBSan into build/fuzz/ (the library is instrumented too).
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/%)

# Benchmarks written in C (bench/*.c), each its own program.
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)

ALL_OBJS := $(LIB_OBJS) $(CU_OBJS) $(BUILD)/obj/$(MAIN_SRC:.c=.o) \
            $(UNIT_BINS:$(BUILD)/tests/%=$(BUILD)/obj/tests/unit/%.o) $(UNIT_SUPPORT_OBJS) \
            $(BENCH_BINS:$(BUILD)/bench/%=$(BUILD)/obj/bench/%.o) \
            $(FUZZ_BINS:$(BUILD)/%=$(BUILD)/obj/tests/fuzz/%.o) \
            $(TOOL_BINS:$(BUILD)/tests/tools/%=$(BUILD)/obj/tests/tools/%.o)

# --- build rules ------------------------------------------------------------

.PHONY: tools fuzz fuzz-long soak fuzzers all unit-tests benches sanitize test test-long test-unit test-python run model model-gemma3 venv \
        deps clean distclean install uninstall compile_commands.json cuda-check help

all: $(TRAM) unit-tests benches tools

# The fuzz build leaves the CPU kernels uninstrumented: no fuzz target feeds
# them, and instrumented (fuzzer + ASan + UBSan) the SIMD matmul files take
# minutes each to compile; ASan allows instrumented and plain objects together.
ifeq ($(FUZZ),1)
$(BUILD)/obj/kernels/cpu/%.o: SAN_FLAGS :=
$(BUILD)/obj/kernels/cpu/%.o: FUZZ_CFLAGS :=
endif

$(BUILD)/obj/%.o: %.c
	$(call say,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cu
	$(call say,NVCC,$<)
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/llhttp/%.o: $(LLHTTP_SRC)/%.c
	$(call say,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) -I$(LLHTTP_INC) -O2 -g $(ARCH_FLAGS) $(SAN_FLAGS) -c $< -o $@

$(DASH_GEN): $(DASH_ASSETS) scripts/embed-assets.sh
	$(call say,GEN,$@)
	@mkdir -p $(@D)
	$(Q)scripts/embed-assets.sh $@ $(DASH_ASSETS)

$(LLHTTP_LIB): $(LLHTTP_OBJS)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIB): $(LIB_OBJS) $(CU_OBJS)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(TRAM): $(BUILD)/obj/$(MAIN_SRC:.c=.o) $(LIB) $(LLHTTP_LIB)
	$(call say,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $< $(LIB) $(LLHTTP_LIB) $(LDLIBS) -o $@

unit-tests: $(UNIT_BINS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(UNIT_SUPPORT_OBJS) $(LIB) $(LLHTTP_LIB)
	$(call say,LINK,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) $< $(UNIT_SUPPORT_OBJS) $(LIB) $(LLHTTP_LIB) $(LDLIBS) $(CMOCKA_LIBS) -o $@

tools: $(TOOL_BINS)

$(BUILD)/tests/tools/%: $(BUILD)/obj/tests/tools/%.o $(LIB) $(LLHTTP_LIB)
	$(call say,LINK,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) $< $(LIB) $(LLHTTP_LIB) $(LDLIBS) -o $@

benches: $(BENCH_BINS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB) $(LLHTTP_LIB)
	$(call say,LINK,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(LDFLAGS) $< $(LIB) $(LLHTTP_LIB) $(LDLIBS) -o $@

fuzz:
	$(Q)$(MAKE) --no-print-directory BUILD=build/fuzz CC=clang FUZZ=1 SANITIZER=address,undefined \
		CUDA=0 fuzzers

fuzzers: $(FUZZ_BINS)

# Long fuzzing (not in make test): every target to 10^7 executions or 30 min,
# new coverage merged into tests/fuzz/corpus (scripts/run-fuzz-long.sh).
fuzz-long: fuzz
	$(Q)scripts/run-fuzz-long.sh

# The soak (not in make test; tests/integration/test_soak.py, in make test-long, is its 30 s
# form): writes docs/benchmarks/reliability.md (bench/soak.py).
SOAK_MINUTES ?= 60
SOAK_CLIENTS ?= 32
soak: venv model $(TRAM)
	$(Q).venv/bin/python bench/soak.py --minutes $(SOAK_MINUTES) --clients $(SOAK_CLIENTS)

$(BUILD)/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(LIB) $(LLHTTP_LIB)
	$(call say,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -fsanitize=fuzzer $< $(LIB) $(LLHTTP_LIB) $(LDLIBS) -o $@

# --- CUDA ---------------------------------------------------------------------
# cuda-check compiles every CUDA source and the GPU test programs (CI runs it
# where nvcc exists; no GPU needed). gpu-tests builds, with nvcc and the CUDA
# toolkit (no Debian libraries: a bare GPU machine builds them; no set-up):
#   $(BUILD)/tests/gpu/gpu_check     every CUDA kernel vs float64 (tests/gpu/*.cu)
#   $(BUILD)/tests/gpu/model_check   the full model, CUDA vs CPU (tests/gpu/model_check.c)
#   $(BUILD)/tests/gpu/engine_bench  bench/engine_bench.c (--device cuda)
# The last two link the model, cache, attention, scheduler and both backends,
# compiled here without the Debian packages' flags; they need PCRE2 (the
# tokenizer): PCRE2_DIR names a folder holding include/pcre2.h and
# lib/libpcre2-8.so.0 (tests/gpu/prepare-carry.sh makes one for a GPU
# machine); empty, the system's. tests/gpu/run-on-device.sh builds, checks
# and times on a GPU machine.
GPU_CU_SRCS   := $(wildcard kernels/cuda/*.cu) $(wildcard tests/gpu/*.cu)
GPU_C_SRCS    := kernels/kern_types.c kernels/kern_join.c kernels/cuda_geom.c kernels/kern_sample.c base/log.c base/alloc.c base/utf8.c tests/unit/testutil.c
GPU_TEST_OBJS := $(GPU_CU_SRCS:%.cu=$(BUILD)/obj/%.o) $(GPU_C_SRCS:%.c=$(BUILD)/obj/gpu/%.o)
GPU_CHECK     := $(BUILD)/tests/gpu/gpu_check
# the toolkit's libraries (cuBLAS) found at run time without LD_LIBRARY_PATH
GPU_RPATH     := $(if $(CUDA_HOME),-Xlinker -rpath=$(CUDA_HOME)/lib64)
# how the GPU programs link cuBLAS; run-on-device.sh probes where the device's
# toolkit keeps it and passes the folder and, without the unversioned
# libcublas.so, the versioned name
CUBLAS_LIBS   ?= -lcublas
CUBLAS_CFLAGS ?=

PCRE2_DIR ?=
ifneq ($(PCRE2_DIR),)
  PCRE2_CFLAGS := -I$(abspath $(PCRE2_DIR))/include
  PCRE2_LIBS   := -L$(abspath $(PCRE2_DIR))/lib -Xlinker -l:libpcre2-8.so.0 \
                  -Xlinker -rpath=$(abspath $(PCRE2_DIR))/lib
else
  PCRE2_CFLAGS := $(shell pkg-config --cflags libpcre2-8 2>/dev/null)
  PCRE2_LIBS   := $(or $(shell pkg-config --libs libpcre2-8 2>/dev/null),-lpcre2-8)
endif
GPU_MODEL_SRCS := $(wildcard base/*.c gguf/*.c model/*.c sample/*.c text/*.c text/jinja/*.c) \
                  $(wildcard kernels/*.c kernels/cpu/*.c attention/*.c cache/*.c scheduler/*.c) \
                  $(filter-out grammar/gram_schema%.c,$(wildcard grammar/*.c))
# (the engine masks structured-output rows: grammar/, all but the JSON Schema
# compiler, which takes cJSON documents and only the server calls)
GPU_MODEL_LIB  := $(BUILD)/gpu/libtram-model.a
GPU_LINK_OBJS  := $(patsubst %.cu,$(BUILD)/obj/%.o,$(wildcard kernels/cuda/*.cu)) \
                  $(BUILD)/obj/gpu/tests/unit/testutil.o
GPU_MODEL_BINS := $(BUILD)/tests/gpu/model_check $(BUILD)/tests/gpu/engine_bench

.PHONY: gpu-tests
cuda-check:
	$(Q)if [ -z "$(wildcard kernels/cuda/*.cu)" ]; then echo "cuda-check: no CUDA sources yet"; \
	else $(MAKE) --no-print-directory CUDA=1 $(TRAM) gpu-tests; fi

gpu-tests: $(GPU_CHECK) $(GPU_MODEL_BINS)

$(GPU_CHECK): $(GPU_TEST_OBJS)
	$(if $(NVCC),,$(error gpu-tests: nvcc not found (put it on PATH or set NVCC=)))
	$(call say,LINK,$@)
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(NVCC_COMPAT) $(CUDA_ARCHS) $^ $(CUBLAS_LIBS) $(GPU_RPATH) -o $@

$(GPU_MODEL_LIB): $(GPU_MODEL_SRCS:%.c=$(BUILD)/obj/gpu/%.o)
	$(call say,AR,$@)
	@mkdir -p $(@D)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/tests/gpu/model_check: $(BUILD)/obj/gpu/tests/gpu/model_check.o $(BUILD)/obj/gpu/tests/gpu/model_lane.o
$(BUILD)/tests/gpu/engine_bench: $(BUILD)/obj/gpu/bench/engine_bench.o
$(GPU_MODEL_BINS): $(GPU_LINK_OBJS) $(GPU_MODEL_LIB)
	$(if $(NVCC),,$(error gpu-tests: nvcc not found (put it on PATH or set NVCC=)))
	$(call say,LINK,$@)
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(NVCC_COMPAT) $(CUDA_ARCHS) $(filter %.o,$^) $(GPU_MODEL_LIB) $(CUBLAS_LIBS) $(PCRE2_LIBS) $(GPU_RPATH) -lm -o $@

# The C sources, compiled without the Debian packages' flags (PCRE2's aside);
# without cJSON, so without Hugging Face checkpoints (TRAM_NO_HF: GGUF only).
# GPU_WARN: run-on-device.sh drops -Werror (another machine's gcc may warn
# where this one does not; a device minute is too dear to lose to that).
GPU_WARN ?= $(WARN)
$(BUILD)/obj/gpu/%.o: %.c
	$(call say,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) -I. -DTRAM_CUDA=1 -DTRAM_NO_HF=1 $(PCRE2_CFLAGS) -D_GNU_SOURCE -MMD -MP $(CSTD) $(GPU_WARN) -O2 -g $(ARCH_FLAGS) \
		-pthread -c $< -o $@

-include $(GPU_TEST_OBJS:.o=.d) $(GPU_MODEL_SRCS:%.c=$(BUILD)/obj/gpu/%.d) \
	$(addprefix $(BUILD)/obj/gpu/,tests/gpu/model_check.d tests/gpu/model_lane.d bench/engine_bench.d)
# --- end of CUDA ---------------------------------------------------------------

# The sanitized build is also the fault-injection build (FAULTS=1): the
# tests that wedge the engine or fail allocations run it under ASan.
sanitize:
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/san SANITIZER=address,undefined CUDA=0 FAULTS=1 \
		$(BUILD)/san/tram unit-tests tools

# --- set-up: Python tools, the model ----------------------------------------
deps:
	$(Q)scripts/setup.sh $(DEPS_STAMP)

venv: $(VENV)/.stamp
$(VENV)/.stamp: tests/requirements.txt
	@echo "setup: Python tools into $(VENV)/ (tests/requirements.txt)"
	$(Q)test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(Q)$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	$(Q)touch $@

model: $(DEFAULT_MODEL)
$(DEFAULT_MODEL):
	$(Q)scripts/fetch-model.sh

# a real Gemma 3 (262,144-token vocabulary) the tests use beside the default
model-gemma3: $(GEMMA3_MODEL)
$(GEMMA3_MODEL):
	$(Q)scripts/fetch-model.sh $(notdir $(GEMMA3_MODEL))

# --- run and test -----------------------------------------------------------
# make run: set-up (Debian packages, the model), build, then serve in the
# foreground on 127.0.0.1:8080 until Ctrl-C (SIGINT drains, then exits).
# More settings: make run RUN_ARGS="--threads 4 --log-level debug".
RUN_ARGS ?=
run: model $(TRAM)
	@echo "tram: serving $(MODEL) on http://127.0.0.1:8080 (Ctrl-C stops it)"
	@echo "tram: once it logs \"ready\", try in another terminal:"
	@echo "  curl -s http://127.0.0.1:8080/v1/completions -H 'Content-Type: application/json' \\"
	@echo "    -d '{\"prompt\": \"The capital of France is\", \"max_tokens\": 16, \"temperature\": 0}'"
	$(Q)exec $(TRAM) serve -m $(MODEL) --host 127.0.0.1 --port 8080 $(RUN_ARGS)

test: venv model model-gemma3
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory sanitize
	$(Q)BUILD=$(BUILD) VENV=$(VENV) MODEL=$(MODEL) GEMMA3=$(GEMMA3_MODEL) scripts/run-tests.sh

# The sweeps too long for make test (pytest marker `long`: the whole
# structured-output corpus, every allocation-failure period, the accuracy
# gates on Gemma 3 and of the quantizer, the 30 s soak, the router's
# cache-aware vs round-robin workload); CI runs it after make test.
test-long: venv model model-gemma3 $(TRAM) tools
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/san SANITIZER=address,undefined CUDA=0 FAULTS=1 $(BUILD)/san/tram
	$(Q)TRAM_BUILD=$(BUILD) TRAM_BIN=$(TRAM) TRAM_SAN_BIN=$(BUILD)/san/tram TRAM_MODEL=$(MODEL) TRAM_GEMMA3=$(GEMMA3_MODEL) \
		$(VENV)/bin/pytest -q -p no:cacheprovider -m long tests/integration tests/reference

test-unit: all
	$(Q)scripts/run-unit-tests.sh $(BUILD)/tests

test-python: venv model model-gemma3 $(TRAM)
	$(Q)TRAM_BUILD=$(BUILD) TRAM_BIN=$(TRAM) TRAM_MODEL=$(MODEL) TRAM_GEMMA3=$(GEMMA3_MODEL) $(VENV)/bin/pytest $(wildcard tests/integration tests/reference)

compile_commands.json:
	bear -- $(MAKE) -B all

# --- benchmarks: bench/*.py, tram against llama.cpp (docs/benchmarks/) ------
#   make bench        the whole comparison: builds tram and the C probes, the
#                     llama.cpp peer once (scripts/build-llamacpp.sh, into
#                     .bench-peer/), runs every workload and concurrency, and
#                     writes docs/benchmarks/README.md, its PNG plots and
#                     results.json
#   make bench-smoke  tram only, a tiny sweep (under 2 minutes); the report
#                     goes to build-bench/smoke/. Fails if tram cannot serve.
#   make bench-accuracy  the full accuracy gates of --precision fast
#                     (bench/accuracy.py, > 20,000 tokens, a few minutes);
#                     fails if a gate is missed.
#   make bench-loop   the event loop under hostile load (bench/loop_stall.py:
#                     /health latency and the loop's longest stall while
#                     clients send costly prompts, flood idle connections or
#                     stream), appended to docs/benchmarks/loop-stall.md.
# Knobs: BENCH_SERVERS (tram,llamacpp), BENCH_ARGS (more bench/compare.py
# flags, e.g. --concurrency 1,4,16 --requests 8 --note "...").
BENCH_SERVERS ?= tram,llamacpp
BENCH_ARGS    ?=
BENCH_PEER    := $(if $(findstring llamacpp,$(BENCH_SERVERS)),bench-peer)

.PHONY: bench bench-smoke bench-peer bench-accuracy bench-structured bench-loop bench-cpu bench-cpu-goals

bench-peer:
	$(Q)scripts/build-llamacpp.sh

bench: venv model $(TRAM) benches $(BENCH_PEER)
	$(Q)$(VENV)/bin/python bench/compare.py --servers $(BENCH_SERVERS) --model $(MODEL) \
		--tram-bin $(TRAM) --build-dir $(BUILD) $(BENCH_ARGS)

bench-smoke: venv model $(TRAM)
	$(Q)$(VENV)/bin/python bench/compare.py --smoke --model $(MODEL) --tram-bin $(TRAM) \
		--build-dir $(BUILD) $(BENCH_ARGS)

bench-accuracy: venv model model-gemma3 tools
	$(Q)$(VENV)/bin/python bench/accuracy.py --model $(MODEL) --build-dir $(BUILD) --json $(BUILD)/accuracy.json
	$(Q)$(VENV)/bin/python bench/accuracy.py --model $(GEMMA3_MODEL) --build-dir $(BUILD) --ref-prefix 64 \
		--json $(BUILD)/accuracy-gemma.json

# CPU decode at real model sizes, tram against llama.cpp in one run: writes
# random-weight shape models (SmolLM2-1.7B, Llama-3.2-3B, Llama-3.1-8B shapes;
# Q4_0, Q4_K_M, Q5_K_M, Q6_K, Q8_0) into build-bench/shapes/ (git-ignored;
# ~35 GB for all of them), then the side-by-side with the read bandwidth
# (bench/cpu_decode.py; BENCH_CPU_ARGS narrows it, e.g. --shapes smollm2-1.7b
# --types Q4_0 --threads 1,2 --streams 1,8,32); table in build-bench/cpu-decode.md.
BENCH_CPU_ARGS ?=
bench-cpu: venv model model-gemma3 $(TRAM) benches bench-peer
	$(Q)$(VENV)/bin/python bench/cpu_decode.py --model $(MODEL) --model $(GEMMA3_MODEL) $(BENCH_CPU_ARGS)

# Every goal of issue 29 in one side-by-side run, sized for a 2-core machine
# (bench/cpu_goals.sh: the decode matrix at 1 and 2 threads, 8 and 32
# streams, the 512-token prefill, the read probe after each model, one perf
# profile of tram per goal kind; writes missing shape models); the report in
# $(BUILD)/cpu-goals/report.md. Run it as `nice -n -20 make bench-cpu-goals`
# on a machine shared with others.
bench-cpu-goals: venv model model-gemma3 $(TRAM) benches bench-peer
	$(Q)BUILD=$(BUILD) PY=$(VENV)/bin/python MODEL=$(MODEL) GEMMA3=$(GEMMA3_MODEL) bench/cpu_goals.sh

bench-structured: venv model $(TRAM)
	$(Q)$(VENV)/bin/python bench/structured_bench.py --tram $(TRAM) --model $(MODEL) $(BENCH_ARGS)

bench-loop: venv model $(TRAM)
	$(Q)TRAM_BIN=$(TRAM) $(VENV)/bin/python bench/loop_stall.py --report docs/benchmarks/loop-stall.md $(BENCH_ARGS)

# --- install ----------------------------------------------------------------
# The program, the systemd units (ExecStart and Documentation pointed at the
# installed files), the example config and the docs. /etc/tram/tram.json is
# the operator's: copy it from $(DOCDIR)/tram.json (docs/deployment.md).
# uninstall removes exactly these files (and $(DOCDIR) once empty).
UNITDIR      ?= $(PREFIX)/lib/systemd/system
DOCDIR       ?= $(PREFIX)/share/doc/tram
INSTALL_DOCS := deploy/tram.json docs/configuration.md docs/deployment.md

install: $(TRAM)
	install -Dm755 $(TRAM) $(DESTDIR)$(PREFIX)/bin/tram
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	sed -e 's|/usr/local/bin/tram|$(PREFIX)/bin/tram|g' -e 's|/usr/local/share/doc/tram|$(DOCDIR)|g' \
		deploy/tram.service > $(DESTDIR)$(UNITDIR)/tram.service
	sed -e 's|/usr/local/share/doc/tram|$(DOCDIR)|g' deploy/tram.socket > $(DESTDIR)$(UNITDIR)/tram.socket
	chmod 644 $(DESTDIR)$(UNITDIR)/tram.service $(DESTDIR)$(UNITDIR)/tram.socket
	install -m644 $(INSTALL_DOCS) $(DESTDIR)$(DOCDIR)/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/tram $(DESTDIR)$(UNITDIR)/tram.service $(DESTDIR)$(UNITDIR)/tram.socket \
		$(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(INSTALL_DOCS)))
	rmdir --ignore-fail-on-non-empty $(DESTDIR)$(DOCDIR) 2>/dev/null || true

clean:
	rm -rf $(BUILD)

distclean: clean
	rm -rf $(VENV) models

help:
	@sed -n '2,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

-include $(ALL_OBJS:.o=.d) $(LLHTTP_OBJS:.o=.d)
