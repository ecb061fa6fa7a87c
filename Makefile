# dsv4check - build, setup, run, check, bench, install.
# `make` builds build/dsv4check and build/libdsv4.{a,so}.  `make SAN=1` builds
# the same into build-asan/ with ASan+UBSan.  See README.md.

SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build-asan
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT := -O1
else
BUILD ?= build
SANFLAGS :=
OPT := -O2
endif

CC ?= gcc
PKGS := hdf5 yaml-0.1 openblas zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

VERSION := 0.1.0
GIT_REV := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
GIT_DIRTY := $(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)

CFLAGS ?= $(OPT) -g
# -Wno-format-truncation: messages are cut to their fixed buffers on purpose
# (a gcc flag: clang has no such warning and refuses the unknown option).
NO_TRUNC_WARN := $(shell $(CC) -Werror -Wno-format-truncation -E -x c /dev/null >/dev/null 2>&1 && echo -Wno-format-truncation)
CFLAGS += -std=c11 -Wall -Wextra -Werror $(NO_TRUNC_WARN) -fPIC $(SANFLAGS) $(PKG_CFLAGS) \
          -DDSV4_VERSION='"$(VERSION)"' -DDSV4_GIT_REV='"$(GIT_REV)$(GIT_DIRTY)"'
LDFLAGS += $(SANFLAGS)
LDLIBS := $(PKG_LIBS) -ldl -lm

LIB_SRCS := $(wildcard ref/*.c compare/*.c ops/*.c ops/*/*.c) $(filter-out harness/main.c,$(wildcard harness/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
HEADERS := $(wildcard include/*.h ref/*.h compare/*.h harness/*.h ops/*.h ops/*/*.h) ops/ops.def

PREFIX ?= /usr/local

.PHONY: all setup setup-hip run check unit-tests python-tests bench-python test-asan bench clean install goldens \
        verify-goldens valgrind \
        hip hip-compile-check hip-check-nvcc hip-check-amd hip-check-prod gpu-bundle fuzz fuzz-build slurm-test check-citations mutants mutants-build soundness
.DEFAULT_GOAL := all

all: $(BUILD)/dsv4check $(BUILD)/libdsv4.a $(BUILD)/libdsv4.so

setup:
	@scripts/setup.sh

setup-hip:
	@scripts/setup.sh --hip

# V=1 shows the full command lines.
Q := $(if $(filter 1,$(V)),,@)

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libdsv4.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libdsv4.so: $(LIB_OBJS)
	$(Q)$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/dsv4check: $(BUILD)/obj/harness/main.o $(BUILD)/libdsv4.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -rdynamic -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testutil.h tests/actualutil.h $(BUILD)/libdsv4.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -o $@ $< $(BUILD)/libdsv4.a $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

# The soundness table (tests/soundness.h): every derived float bound
# against a model of a correct kernel on many seeded cases (worst err/bound
# <= 0.8) and against the reference moved one bf16 ulp (must fail).  `make
# soundness` runs the full table (a few minutes); test_soundness a slice.
SOUNDNESS_HDRS := tests/soundness.h tests/soundness_models.h
$(BUILD)/soundness: tests/soundness.c $(SOUNDNESS_HDRS) $(BUILD)/libdsv4.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libdsv4.a $(LDFLAGS) $(LDLIBS)
$(BUILD)/tests/test_soundness: $(SOUNDNESS_HDRS)
# the host build of the hip codecs: rebuilt when they change
$(BUILD)/tests/test_quant_rules: hip/quant_rules.h
$(BUILD)/tests/test_lookback: hip/lookback_rules.h

soundness: $(BUILD)/soundness
	$(BUILD)/soundness

# ---- hip backend (hip/, include/dsv4_plugin.h) ----
# `make hip` builds $(BUILD)/libdsv4_hip.so for the targets in HIP_ARCHS:
# sm_XX entries with nvcc (each embeds sm_XX code plus compute_XX PTX),
# gfx entries for AMD through scripts/hip-amd-build.sh, which picks the
# compiler that knows them (hipcc; Debian's clang-19/22 with completed device
# libraries for gfx941/gfx942/gfx950; always with --offload-arch: without
# it Debian's hipcc 5.2 silently targets gfx803).  One library holds one
# vendor's code.  The default is sm_90 where nvcc is present, else gfx90a
# gfx940.  `make hip-compile-check` compiles the backend without a GPU for
# NVIDIA sm_90, AMD gfx90a/gfx940 (hipcc) and the production targets gfx942
# (MI300X) and gfx950 (MI355X) with clang-22; a missing compiler is skipped
# with a message (CI has them all: scripts/setup.sh --hip).
NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
HIPCC ?= $(shell command -v hipcc 2>/dev/null)
HIP_SRCS := $(wildcard hip/*.cpp)
HIP_DEPS := $(HIP_SRCS) $(wildcard hip/*.h) include/dsv4_plugin.h include/dsv4_poison.h ops/ops.def scripts/hip-amd-build.sh \
            scripts/amd-devlibs.sh
HIP_ARCHS ?= $(if $(NVCC),sm_90,gfx90a gfx940)
HIP_CUDA_ARCHS := $(filter sm_%,$(HIP_ARCHS))
HIP_AMD_ARCHS := $(filter gfx%,$(HIP_ARCHS))
NVCC_FLAGS = -x cu -O2 -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra,-Werror -shared \
             $(foreach a,$(1),-gencode arch=compute_$(a:sm_%=%),code=[sm_$(a:sm_%=%),compute_$(a:sm_%=%)])
HIP_PRODUCTION_ARCHS := gfx942 gfx950

hip: $(BUILD)/libdsv4_hip.so

$(BUILD)/libdsv4_hip.so: $(HIP_DEPS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  GPU     $@ ($(HIP_ARCHS))")
	$(Q)if [ -n "$(filter-out sm_% gfx%,$(HIP_ARCHS))" ] || [ -z "$(HIP_ARCHS)" ]; then \
	  echo "make hip: HIP_ARCHS='$(HIP_ARCHS)': each entry is sm_XX (NVIDIA) or gfxNNN (AMD)"; exit 2; fi
	$(Q)if [ -n "$(HIP_CUDA_ARCHS)" ] && [ -n "$(HIP_AMD_ARCHS)" ]; then \
	  echo "make hip: HIP_ARCHS mixes NVIDIA and AMD targets; one library holds one vendor's code"; exit 2; fi
	$(Q)if [ -n "$(HIP_CUDA_ARCHS)" ]; then \
	  if [ -z "$(NVCC)" ]; then echo "make hip: $(HIP_CUDA_ARCHS) needs nvcc"; exit 1; fi; \
	  $(NVCC) $(call NVCC_FLAGS,$(HIP_CUDA_ARCHS)) -o $@ $(HIP_SRCS); \
	else scripts/hip-amd-build.sh $(BUILD) $@ "$(HIP_AMD_ARCHS)" $(HIP_SRCS); fi

# The three compilers' builds are independent: run two at a time.
hip-compile-check: $(HIP_DEPS)
	@$(MAKE) --no-print-directory -j2 hip-check-nvcc hip-check-amd hip-check-prod

hip-check-nvcc: $(HIP_DEPS)
	@mkdir -p $(BUILD)/hip-check
	@if [ -n "$(NVCC)" ]; then echo "  NVCC    $(BUILD)/hip-check/libdsv4_hip_cuda.so (sm_90)"; \
	  $(NVCC) $(call NVCC_FLAGS,sm_90) -o $(BUILD)/hip-check/libdsv4_hip_cuda.so $(HIP_SRCS) || exit 1; \
	else echo "hip-compile-check: nvcc not found, NVIDIA half skipped"; fi

hip-check-amd: $(HIP_DEPS)
	@mkdir -p $(BUILD)/hip-check
	@if [ -n "$(HIPCC)" ]; then echo "  HIPCC   $(BUILD)/hip-check/libdsv4_hip_amd.so (gfx90a gfx940)"; \
	  scripts/hip-amd-build.sh $(BUILD) $(BUILD)/hip-check/libdsv4_hip_amd.so "gfx90a gfx940" $(HIP_SRCS) || exit 1; \
	else echo "hip-compile-check: hipcc not found, AMD half skipped (scripts/setup.sh --hip)"; fi

hip-check-prod: $(HIP_DEPS)
	@mkdir -p $(BUILD)/hip-check
	@echo "  CLANG22 $(BUILD)/hip-check/libdsv4_hip_prod.so ($(HIP_PRODUCTION_ARCHS))"; \
	  scripts/hip-amd-build.sh $(BUILD) $(BUILD)/hip-check/libdsv4_hip_prod.so "$(HIP_PRODUCTION_ARCHS)" $(HIP_SRCS); \
	  rc=$$?; if [ $$rc = 77 ]; then echo "hip-compile-check: clang-22 not found, production targets skipped"; \
	  elif [ $$rc != 0 ]; then exit $$rc; fi

# A folder for the GPU machine: binaries, their shared libraries, cases,
# goldens and scripts/gpu-run.sh (see scripts/gpu-bundle.sh).
gpu-bundle: all hip
	scripts/gpu-bundle.sh

# The main job: the ci suite, reference against the committed goldens, then
# the hip backend where a GPU is present (exit 77 = no GPU, not a failure).
run: setup
	@$(MAKE) --no-print-directory all
	$(BUILD)/dsv4check run cases/ci.yaml --impl ref --junit $(BUILD)/ci-ref.xml
	$(BUILD)/dsv4check check data/ci/*.h5 --impl ref
	@rc=0; $(BUILD)/dsv4check run cases/ci.yaml --impl hip --junit $(BUILD)/ci-hip.xml || rc=$$?; \
	 if [ $$rc -eq 77 ]; then echo "run: hip backend skipped (no GPU)"; elif [ $$rc -ne 0 ]; then exit $$rc; fi

# The test programs run TEST_JOBS at a time (scripts/run-tests.sh: logs in
# $(BUILD)/test-logs, printed in order).
TEST_JOBS ?= 2
unit-tests: all $(TEST_BINS) $(PLUGINS)
	@fail=0; DSV4CHECK=$(BUILD)/dsv4check scripts/run-tests.sh $(TEST_JOBS) $(BUILD)/test-logs $(TEST_BINS) || fail=1; \
	  echo "== python-tests"; $(MAKE) --no-print-directory python-tests || fail=1; \
	  echo "== tests/test_install.sh"; BUILD=$(BUILD) CC="$(CC)" SANFLAGS="$(SANFLAGS)" tests/test_install.sh || fail=1; \
	  exit $$fail

# The Python front end (python/dsv4check) and its tests (tests/python, pytest)
# with Debian's python3, numpy, h5py, pytest and torch (torch tests skip
# without it).  Under SAN=1 the interpreter preloads the sanitizer runtime
# that build-asan/libdsv4.so needs; leak checking is off there (the
# interpreter's own allocations live to the end).
PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
PYTHON_VERSION = $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYTHON_SITE ?= $(PREFIX)/lib/python$(PYTHON_VERSION)/dist-packages
PY_SAN_ENV := $(if $(filter 1,$(SAN)),LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
              ASAN_OPTIONS=detect_leaks=0)
PY_TEST_ENV = DSV4CHECK=$(BUILD)/dsv4check DSV4CHECK_LIB=$(CURDIR)/$(BUILD)/libdsv4.so PYTHONPATH=python:tests/python

python-tests: all $(PLUGINS)
	@if ! $(PYTHON) -c 'import numpy, pytest, h5py' 2>/dev/null; then \
	  echo "python-tests: $(PYTHON) lacks numpy, pytest or h5py (scripts/setup.sh installs them)"; exit 1; fi
	$(PY_TEST_ENV) $(PY_SAN_ENV) $(PYTHON) -m pytest -q -p no:cacheprovider -rs tests/python

# The Python path's cost per case on the ci suite, the kernel aside.
bench-python: all
	$(PY_TEST_ENV) $(PYTHON) -m dsv4check bench-overhead cases/ci.yaml

# make check: the hip backend compiled with nvcc and hipcc (no GPU needed;
# tests/test_hip then loads those builds); the unit and end-to-end tests (the
# bad-input matrix, the determinism test and the fuzz-crash replays among
# them) in a normal build, then again under ASan+UBSan; the committed goldens
# regenerated and compared; the mutant kill matrix (about 35 s); the CLI on
# the ci suite under valgrind.
# Chromium is for the HTML report's end-to-end test.
check: setup-hip
	@scripts/setup.sh --chromium
	@$(MAKE) --no-print-directory hip-compile-check
	@$(MAKE) --no-print-directory unit-tests
	@$(MAKE) --no-print-directory SAN=1 unit-tests
	@$(MAKE) --no-print-directory verify-goldens
	@$(MAKE) --no-print-directory mutants
	@$(MAKE) --no-print-directory valgrind
	@$(MAKE) --no-print-directory slurm-test
	@$(MAKE) --no-print-directory check-citations

# The README's Slurm-array recipe on a one-node Slurm that tests/test_slurm.sh
# starts and stops itself (loopback only, files under a temp dir; ~15 s, at
# most about 4 min).  Exit 77 from the test (no Slurm, or its daemons cannot
# run here) is a skip.
slurm-test: all
	@scripts/setup.sh --slurm
	@rc=0; DSV4CHECK=$(BUILD)/dsv4check tests/test_slurm.sh || rc=$$?; \
	 if [ $$rc -eq 77 ]; then echo "slurm-test: skipped"; elif [ $$rc -ne 0 ]; then exit $$rc; fi

bench: all
	$(BUILD)/dsv4check bench

goldens: all
	$(BUILD)/dsv4check gen cases/ci.yaml --force

$(BUILD)/golden_same: tests/golden_same.c tests/golden_eq.h $(BUILD)/libdsv4.a
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libdsv4.a $(LDFLAGS) $(LDLIBS)

# Regenerate every committed golden of the ci suite into a temporary folder
# and check each is identical to the committed one except for the provenance
# attributes (generator, created), and that the two sets of files agree.
verify-goldens: all $(BUILD)/golden_same
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	 OPENBLAS_NUM_THREADS=1 $(BUILD)/dsv4check gen cases/ci.yaml -o "$$tmp" >/dev/null && \
	 (cd data/ci && ls *.h5) > "$$tmp/committed.lst" && (cd "$$tmp" && ls *.h5) > "$$tmp/fresh.lst" && \
	 if ! cmp -s "$$tmp/committed.lst" "$$tmp/fresh.lst"; then \
	   echo "verify-goldens: committed and regenerated file sets differ:"; \
	   diff "$$tmp/committed.lst" "$$tmp/fresh.lst"; exit 1; fi && \
	 set -- && for f in $$(cat "$$tmp/committed.lst"); do set -- "$$@" "data/ci/$$f" "$$tmp/$$f"; done && \
	 $(BUILD)/golden_same "$$@" && echo "verify-goldens: $$(wc -l < "$$tmp/committed.lst") goldens identical"

# The CLI on the ci suite and on the committed goldens: no memory error and
# no definite leak (exit 3 otherwise).
# Four processes, two at a time: the suite in two shards, the goldens in two
# halves (valgrind runs a program's threads one at a time, so the cores are
# used by running several).
VALGRIND := valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=3
valgrind: all
	@set -- data/ci/*.h5; half=$$(( ($$# + 1) / 2 )); \
	 first=$$(ls data/ci/*.h5 | head -n $$half | tr '\n' ' '); rest=$$(ls data/ci/*.h5 | tail -n +$$((half + 1)) | tr '\n' ' '); \
	 printf '%s\n' "run cases/ci.yaml --impl ref --shard 1/2" "run cases/ci.yaml --impl ref --shard 2/2" \
	   "check $$first --impl ref" "check $$rest --impl ref" | \
	   xargs -P 2 -I{} sh -c '$(VALGRIND) $(BUILD)/dsv4check $$1 >/dev/null; rc=$$?; [ $$rc = 0 ] || { echo "valgrind: dsv4check $$1: exit $$rc" | cut -c1-200; exit 255; }' _ {} \
	 && echo "valgrind: clean"

# The repository cites only itself: scripts/check-citations.sh lists every
# tracked line outside docs/ that names material outside the repository, and
# every docs/semantics citation whose page or tag does not exist.  Its own
# test (planted bad lines in a scratch repository) runs first.
check-citations:
	@tests/test_citations.sh
	@scripts/check-citations.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/include/dsv4check/ref $(DESTDIR)$(PREFIX)/include/dsv4check/compare \
	  $(DESTDIR)$(PREFIX)/include/dsv4check/harness $(DESTDIR)$(PREFIX)/include/dsv4check/include
	install -m 755 $(BUILD)/dsv4check $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/libdsv4.a $(BUILD)/libdsv4.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 ref/*.h $(DESTDIR)$(PREFIX)/include/dsv4check/ref/
	install -m 644 compare/*.h $(DESTDIR)$(PREFIX)/include/dsv4check/compare/
	install -m 644 harness/*.h $(DESTDIR)$(PREFIX)/include/dsv4check/harness/
	install -m 644 include/*.h $(DESTDIR)$(PREFIX)/include/dsv4check/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' dsv4check.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/dsv4check.pc
	install -d $(DESTDIR)$(PYTHON_SITE)/dsv4check/adapters
	install -m 644 python/dsv4check/*.py $(DESTDIR)$(PYTHON_SITE)/dsv4check/
	install -m 644 python/dsv4check/adapters/*.py $(DESTDIR)$(PYTHON_SITE)/dsv4check/adapters/
	printf 'LIBDIR = "%s"\nBINDIR = "%s"\n' '$(PREFIX)/lib' '$(PREFIX)/bin' \
	  > $(DESTDIR)$(PYTHON_SITE)/dsv4check/_installed.py

clean:
	rm -rf build build-asan build-fuzz

# The example plug-in (tests/plugin_example.c) as four shared libraries:
# correct (ABI 2), with a planted bug, with a wrong ABI version, and as an
# ABI 1 plug-in (the plug-in tests check that a wrong kernel fails, a wrong
# ABI is refused and ABI 1 still loads).
PLUGINS := $(BUILD)/tests/libexample.so $(BUILD)/tests/libexample_wrong.so $(BUILD)/tests/libexample_badabi.so \
           $(BUILD)/tests/libexample_abi1.so
$(BUILD)/tests/libexample.so: tests/plugin_example.c include/dsv4_plugin.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -shared -o $@ $< $(LDFLAGS)
$(BUILD)/tests/libexample_wrong.so: tests/plugin_example.c include/dsv4_plugin.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DEXAMPLE_WRONG -shared -o $@ $< $(LDFLAGS)
$(BUILD)/tests/libexample_badabi.so: tests/plugin_example.c include/dsv4_plugin.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DEXAMPLE_BAD_ABI -shared -o $@ $< $(LDFLAGS)
$(BUILD)/tests/libexample_abi1.so: tests/plugin_example.c include/dsv4_plugin.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DEXAMPLE_ABI1 -shared -o $@ $< $(LDFLAGS)
$(BUILD)/tests/test_ci_features $(BUILD)/tests/test_actual $(BUILD)/tests/test_api: $(PLUGINS)
# identify's test: plug-ins built from the reference of a non-default variant.
$(BUILD)/tests/test_identify: $(PLUGINS) $(BUILD)/mutants/libmut_mxfp8_log2_exact.so \
                              $(BUILD)/mutants/libmut_qquant_variant_a_for_b.so

# The reference as a plug-in (tests/plugin_chain.c) for the layer-chain
# tests: every op, a subset, and three builds with one planted bug each
# (-DCHAIN_BUG=1 fused_qnorm_rope_kv_insert, 2 wo_a, 3
# combine_topk_swa_indices).  Like the mutants, they take the reference
# from the dsv4check that loads them (one copy of every global).
CHAIN_PLUGINS := $(BUILD)/tests/libchain_ref.so $(BUILD)/tests/libchain_partial.so \
                 $(BUILD)/tests/libchain_bug1.so $(BUILD)/tests/libchain_bug2.so $(BUILD)/tests/libchain_bug3.so
CHAIN_PLUGIN_DEPS := tests/plugin_chain.c include/dsv4_plugin.h $(HEADERS) $(BUILD)/dsv4check
CHAIN_PLUGIN_LINK = -shared -o $@ $< $(LDFLAGS) -lm
$(BUILD)/tests/libchain_ref.so: $(CHAIN_PLUGIN_DEPS)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(CHAIN_PLUGIN_LINK)
$(BUILD)/tests/libchain_partial.so: $(CHAIN_PLUGIN_DEPS)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DCHAIN_OPS='"rocm_sparse_attn_prefill,rocm_sparse_attn_decode,combine_topk_swa_indices"' \
	  $(CHAIN_PLUGIN_LINK)
$(BUILD)/tests/libchain_bug%.so: $(CHAIN_PLUGIN_DEPS)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DCHAIN_BUG=$* $(CHAIN_PLUGIN_LINK)
$(BUILD)/tests/test_chain: $(CHAIN_PLUGINS) $(PLUGINS)
# test_readpast: the chain plug-in reading one element past an input (bug 4)
# and a nondeterministic one (bug 5), loaded into the test itself as well
# (the in-process path): the test exports every library symbol to them.
READPAST_PLUGINS := $(BUILD)/tests/libchain_ref.so $(BUILD)/tests/libchain_bug4.so $(BUILD)/tests/libchain_bug5.so
$(BUILD)/tests/test_readpast: tests/test_readpast.c tests/testutil.h $(BUILD)/libdsv4.a $(READPAST_PLUGINS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -rdynamic -o $@ $< -Wl,--whole-archive $(BUILD)/libdsv4.a \
	  -Wl,--no-whole-archive $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

# The hostile plug-ins (tests/plugins/hostile.c), one misbehaviour each:
# build/tests/plugins/libhostile_<mode>.so, for test_integrity and test_badinput.
HOSTILE_MODES := exit _exit abort segv hang ctor_exit gemm overrun errstr
HOSTILE := $(HOSTILE_MODES:%=$(BUILD)/tests/plugins/libhostile_%.so)
$(BUILD)/tests/plugins/libhostile_%.so: tests/plugins/hostile.c include/dsv4_plugin.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DHOSTILE_MODE_$* -shared -o $@ $< $(LDFLAGS)
$(BUILD)/tests/test_integrity $(BUILD)/tests/test_badinput: $(HOSTILE) $(PLUGINS)

# make fuzz FUZZ_SECONDS=N: libFuzzer targets (clang 14 or newer, ASan+UBSan)
# for the YAML loader, the HDF5 golden reader (raw images, and
# fuzz_golden_struct: HDF5 files written from mutated descriptions) and the
# actuals-file reader (fuzz_actual), each run
# N seconds on a copy of its seeds and past crash inputs
# (tests/fuzz/corpus/, tests/fuzz/regress/); crashes land in build-fuzz/.  A
# single allocation over -rss_limit_mb (2048 MB) is reported as
# out-of-memory.  Another clang: FUZZ_CC=clang-15 FUZZ_BUILD=build-fuzz-15.
# See tests/fuzz/README.md.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_BUILD ?= build-fuzz
FUZZ_FLAGS := -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
              -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -std=c11 -Wall -Wextra -Werror $(PKG_CFLAGS) \
               -DDSV4_VERSION='"$(VERSION)"' -DDSV4_GIT_REV='"$(GIT_REV)$(GIT_DIRTY)"'
FUZZ_OBJS := $(LIB_SRCS:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_TARGETS := cases golden golden_struct actual
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

$(FUZZ_BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_FLAGS) -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS)
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -g -O1 -fno-omit-frame-pointer \
	  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -o $@ $< $(FUZZ_OBJS) $(PKG_LIBS) -ldl -lm

.SECONDARY: $(FUZZ_OBJS)
fuzz-build: $(FUZZ_BINS)

# While tests/fuzz/regress/golden_struct/OPEN lists unfixed findings,
# fuzz_golden_struct runs with GS_SKIP_OPEN=1 so that they do not stop it.
fuzz: fuzz-build
	@open=$$(grep -c '^[^#]' tests/fuzz/regress/golden_struct/OPEN 2>/dev/null); \
	if [ "$${open:-0}" -gt 0 ]; then export GS_SKIP_OPEN=1; \
	  echo "fuzz: $$open open finding(s) in tests/fuzz/regress/golden_struct/OPEN: GS_SKIP_OPEN=1"; fi; \
	for t in $(FUZZ_TARGETS); do \
	  rm -rf $(FUZZ_BUILD)/corpus-$$t && mkdir -p $(FUZZ_BUILD)/corpus-$$t && \
	  cp tests/fuzz/corpus/$$t/* tests/fuzz/regress/$$t/* $(FUZZ_BUILD)/corpus-$$t/ && \
	  rm -f $(FUZZ_BUILD)/corpus-$$t/README.md $(FUZZ_BUILD)/corpus-$$t/OPEN && \
	  echo "== fuzz_$$t for $(FUZZ_SECONDS) s" && \
	  dict=$$([ ! -f tests/fuzz/$$t.dict ] || echo -dict=$(CURDIR)/tests/fuzz/$$t.dict) && \
	  (cd $(FUZZ_BUILD) && LSAN_OPTIONS=print_suppressions=0 ./fuzz_$$t \
	     -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=25 -print_final_stats=1 \
	     $$dict corpus-$$t </dev/null) || exit 1; \
	  done

# ---- the mutant catalogue (tests/mutants/README.md) ----
# One plug-in per line of tests/mutants/catalogue.def: the reference with
# one planted bug, loaded into dsv4check.  `make mutants` runs each on
# the ci cases of its op (--filter '^op/', two at a time) and prints the
# kill matrix; it fails when a mutant that should be killed survives or a
# legitimate one fails.
MUTANT_IDS := $(shell grep -o '^MUTANT.[A-Za-z0-9_]*' tests/mutants/catalogue.def | cut -c8-)
MUTANT_SRCS := $(filter-out tests/mutants/entry.c,$(wildcard tests/mutants/*.c))
MUTANT_OBJS := $(MUTANT_SRCS:%.c=$(BUILD)/obj/%.o)
MUTANT_LIBS := $(MUTANT_IDS:%=$(BUILD)/mutants/libmut_%.so)
MUTANT_DEPS := $(wildcard tests/mutants/*.h) tests/mutants/catalogue.def
MUTANT_JOBS ?= 2
PYTHON ?= python3

$(BUILD)/obj/tests/mutants/%.o: tests/mutants/%.c $(HEADERS) $(MUTANT_DEPS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/mutants/libmutants.a: $(MUTANT_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

# The reference's symbols stay undefined: the plug-in takes them from the
# dsv4check that loads it (linked -rdynamic), so that one copy of every
# global exists (a second, from libdsv4, is an ODR violation under ASan).
$(BUILD)/mutants/libmut_%.so: tests/mutants/entry.c tests/mutants/plugin_abi.h $(BUILD)/mutants/libmutants.a $(BUILD)/dsv4check
	$(Q)$(CC) $(CFLAGS) -DMUTANT_ID=$* -shared -o $@ $< $(BUILD)/mutants/libmutants.a $(LDFLAGS) -lm

mutants-build: $(MUTANT_LIBS)

mutants: all mutants-build
	@$(PYTHON) tests/mutants/killmatrix.py --dsv4check $(BUILD)/dsv4check --plugins $(BUILD)/mutants \
	  --catalogue tests/mutants/catalogue.def --suite cases/ci.yaml --jobs $(MUTANT_JOBS)
