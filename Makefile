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
PKGS := hdf5 yaml-0.1 openblas
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

VERSION := 0.1.0
GIT_REV := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
GIT_DIRTY := $(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)

CFLAGS ?= $(OPT) -g
# -Wno-format-truncation: messages are cut to their fixed buffers on purpose.
CFLAGS += -std=c11 -Wall -Wextra -Werror -Wno-format-truncation -fPIC $(SANFLAGS) $(PKG_CFLAGS) \
          -DDSV4_VERSION='"$(VERSION)"' -DDSV4_GIT_REV='"$(GIT_REV)$(GIT_DIRTY)"'
LDFLAGS += $(SANFLAGS)
LDLIBS := $(PKG_LIBS) -ldl -lm

LIB_SRCS := $(wildcard ref/*.c compare/*.c) $(filter-out harness/main.c,$(wildcard harness/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
HEADERS := $(wildcard ref/*.h compare/*.h harness/*.h)

PREFIX ?= /usr/local

.PHONY: all setup setup-hip run check unit-tests test-asan bench clean install goldens verify-goldens valgrind \
        hip hip-compile-check gpu-bundle
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

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(BUILD)/libdsv4.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -o $@ $< $(BUILD)/libdsv4.a $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS)

# ---- hip backend (hip/, harness/dsv4_plugin.h) ----
# `make hip` builds $(BUILD)/libdsv4_hip.so with nvcc where present (NVIDIA:
# -arch=sm_90 embeds sm_90 code plus compute_90 PTX), else with hipcc for AMD
# (always with --offload-arch: without it hipcc silently targets gfx803,
# toolchain.md 2).  `make hip-compile-check` compiles the backend both ways
# without a GPU; a missing compiler is skipped with a message.
NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
HIPCC ?= $(shell command -v hipcc 2>/dev/null)
HIP_SRCS := $(wildcard hip/*.cpp)
HIP_DEPS := $(HIP_SRCS) $(wildcard hip/*.h) harness/dsv4_plugin.h
NVCC_FLAGS := -x cu -O2 -std=c++17 -arch=sm_90 -Xcompiler -fPIC,-Wall,-Wextra,-Werror -shared
HIP_ARCHS ?= gfx90a gfx940
HIPCC_FLAGS := -x hip -O2 -std=c++17 -fPIC -shared -Wall -Wextra -Werror $(HIP_ARCHS:%=--offload-arch=%)

hip: $(BUILD)/libdsv4_hip.so

$(BUILD)/libdsv4_hip.so: $(HIP_DEPS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  GPU     $@")
	$(Q)if [ -n "$(NVCC)" ]; then $(NVCC) $(NVCC_FLAGS) -o $@ $(HIP_SRCS); \
	elif [ -n "$(HIPCC)" ]; then HIP_PLATFORM=amd $(HIPCC) $(HIPCC_FLAGS) -o $@ $(HIP_SRCS); \
	else echo "make hip: neither nvcc nor hipcc found (scripts/setup.sh --hip installs hipcc)"; exit 1; fi

hip-compile-check: $(HIP_DEPS)
	@mkdir -p $(BUILD)/hip-check
	@if [ -n "$(NVCC)" ]; then echo "  NVCC    $(BUILD)/hip-check/libdsv4_hip_cuda.so"; \
	  $(NVCC) $(NVCC_FLAGS) -o $(BUILD)/hip-check/libdsv4_hip_cuda.so $(HIP_SRCS) || exit 1; \
	else echo "hip-compile-check: nvcc not found, NVIDIA half skipped"; fi
	@if [ -n "$(HIPCC)" ]; then echo "  HIPCC   $(BUILD)/hip-check/libdsv4_hip_amd.so ($(HIP_ARCHS))"; \
	  HIP_PLATFORM=amd $(HIPCC) $(HIPCC_FLAGS) -o $(BUILD)/hip-check/libdsv4_hip_amd.so $(HIP_SRCS) || exit 1; \
	else echo "hip-compile-check: hipcc not found, AMD half skipped (scripts/setup.sh --hip)"; fi

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

unit-tests: all $(TEST_BINS)
	@fail=0; for t in $(TEST_BINS); do \
	  echo "== $$t"; DSV4CHECK=$(BUILD)/dsv4check $$t || fail=1; done; \
	  exit $$fail

# make check: the hip backend compiled with nvcc and hipcc (no GPU needed;
# tests/test_hip then loads those builds), the unit and end-to-end tests in
# a normal build, then again under ASan+UBSan.  Chromium is for the HTML
# report's end-to-end test.
check: setup-hip
	@scripts/setup.sh --chromium
	@$(MAKE) --no-print-directory hip-compile-check
	@$(MAKE) --no-print-directory unit-tests
	@$(MAKE) --no-print-directory SAN=1 unit-tests

bench: all
	$(BUILD)/dsv4check bench

goldens: all
	$(BUILD)/dsv4check gen cases/ci.yaml --force

valgrind: all
	valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=3 \
	  $(BUILD)/dsv4check run cases/ci.yaml --impl ref

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/include/dsv4check/ref $(DESTDIR)$(PREFIX)/include/dsv4check/compare \
	  $(DESTDIR)$(PREFIX)/include/dsv4check/harness
	install -m 755 $(BUILD)/dsv4check $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(BUILD)/libdsv4.a $(BUILD)/libdsv4.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 ref/*.h $(DESTDIR)$(PREFIX)/include/dsv4check/ref/
	install -m 644 compare/*.h $(DESTDIR)$(PREFIX)/include/dsv4check/compare/
	install -m 644 harness/*.h $(DESTDIR)$(PREFIX)/include/dsv4check/harness/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' dsv4check.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/dsv4check.pc

clean:
	rm -rf build build-asan

# The example plug-in (tests/plugin_example.c) as three shared libraries:
# correct, with a planted bug, and with a wrong ABI version (issue 8.5).
PLUGINS := $(BUILD)/tests/libexample.so $(BUILD)/tests/libexample_wrong.so $(BUILD)/tests/libexample_badabi.so
$(BUILD)/tests/libexample.so: tests/plugin_example.c harness/dsv4_plugin.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -shared -o $@ $< $(LDFLAGS)
$(BUILD)/tests/libexample_wrong.so: tests/plugin_example.c harness/dsv4_plugin.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DEXAMPLE_WRONG -shared -o $@ $< $(LDFLAGS)
$(BUILD)/tests/libexample_badabi.so: tests/plugin_example.c harness/dsv4_plugin.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -DEXAMPLE_BAD_ABI -shared -o $@ $< $(LDFLAGS)
$(BUILD)/tests/test_ci_features: $(PLUGINS)
