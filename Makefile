# chainrules-c: the commands (a thin layer over CMake; see docs/building.md).
#
#   make demo          build, then run every example program in order
#   make test          build everything (library, tests, tools, examples, benchmarks) and
#                      run the whole CTest suite: unit tests, examples, header checks,
#                      install/consumer check, docs
#   make sanitize      the tests again under AddressSanitizer + UBSan (build-asan/)
#   make tsan          the tests under ThreadSanitizer (build-tsan/)
#   make valgrind      the unit tests under valgrind memcheck (build-valgrind/)
#   make coverage      the tests in a --coverage build (build-cov/), then the line coverage
#                      of every source file (tools/coverage.sh)
#   make docs          the API reference (doxygen; warnings are errors unless
#                      DOCS_WERROR=OFF) in build/docs/html
#   make fuzz          the libFuzzer harnesses of fuzz/ (clang-19, ASan + UBSan, build-fuzz/),
#                      each run for FUZZ_SECONDS (10), then the inputs of fuzz/regressions/
#   make format-check  clang-format check; `make format` rewrites the files
#   make install       install build/ into PREFIX (default /usr/local)
#   make clean         remove every build tree
#
# Each target first runs tools/deps.sh, which checks (and as root installs) the Debian
# packages. Variables: JOBS (2), BUILD (build), BUILD_TYPE (RelWithDebInfo), CMAKE_ARGS
# (extra -D options), CTEST_ARGS (e.g. CTEST_ARGS='-L unit'), PREFIX, FUZZ_SECONDS,
# FUZZ_CC (clang-19). With CI=true, warnings are errors (-DCR_WERROR=ON).

JOBS       ?= 2
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
PREFIX     ?= /usr/local
CMAKE      ?= cmake
CTEST      ?= ctest
CMAKE_ARGS ?=
CTEST_ARGS ?=
WERROR     ?= $(if $(filter true TRUE 1 yes,$(CI)),ON,OFF)
DOCS_WERROR ?= ON
DEPS       := sh tools/deps.sh

FUZZ_CC      ?= clang-19
FUZZ_SECONDS ?= 10

# Every build tree shares these; each target adds its own.
COMMON_ARGS = -DCR_WERROR=$(WERROR) $(CMAKE_ARGS)
MAIN_ARGS   = -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCR_ENABLE_ASSERTS=ON -DCR_DOCS_WERROR=$(DOCS_WERROR) $(COMMON_ARGS)
# Sanitizer and valgrind trees: Debug, no benchmarks; the tree-level checks (headers,
# install, docs) are not registered there.
ASAN_ARGS   = -DCMAKE_BUILD_TYPE=Debug -DCR_SANITIZE="address;undefined" -DCR_BUILD_BENCH=OFF $(COMMON_ARGS)
TSAN_ARGS   = -DCMAKE_BUILD_TYPE=Debug -DCR_SANITIZE=thread -DCR_BUILD_BENCH=OFF $(COMMON_ARGS)
VG_ARGS     = -DCMAKE_BUILD_TYPE=Debug -DCR_VALGRIND=ON -DCR_BUILD_BENCH=OFF -DCR_BUILD_EXAMPLES=OFF $(COMMON_ARGS)
# Coverage tree: Debug at -O0 with gcov's instrumentation; the install check (a consumer
# built without it against the instrumented library) is left out.
COV_ARGS    = -DCMAKE_BUILD_TYPE=Debug -DCR_BUILD_BENCH=OFF -DCR_BUILD_EXAMPLES=OFF \
              -DCMAKE_C_FLAGS="--coverage -O0" -DCMAKE_EXE_LINKER_FLAGS=--coverage \
              -DCMAKE_SHARED_LINKER_FLAGS=--coverage $(COMMON_ARGS)
# Fuzzing tree (docs/fuzzing.md): clang with libFuzzer, ASan + UBSan on everything, only the
# library and the harnesses. -Werror applies to the harnesses (CR_FUZZ_WERROR); the library's
# own warnings gate is the gcc build.
FUZZ_ARGS   = -DCMAKE_C_COMPILER=$(FUZZ_CC) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCR_ENABLE_ASSERTS=ON \
              -DCR_FUZZ=ON -DCR_BUILD_TESTS=OFF -DCR_BUILD_EXAMPLES=OFF -DCR_BUILD_TOOLS=OFF \
              -DCR_BUILD_BENCH=OFF -DCR_INSTALL=OFF $(COMMON_ARGS) -DCR_WERROR=OFF \
              -DCR_FUZZ_WERROR=$(WERROR)
SAN_ENV     = ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1 \
              UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
              TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
FORMAT_DIRS = src include tests examples tools bench fuzz

# $(call configure_tree,<dir>,<cmake args>): configure quietly; show the whole log when it
# fails or warns, else the one-line summary.
define configure_tree
	@mkdir -p $(1)
	@$(CMAKE) -S . -B $(1) $(2) >$(1)/configure.log 2>&1 || { cat $(1)/configure.log; exit 1; }
	@if grep -q '^CMake Warning' $(1)/configure.log; then cat $(1)/configure.log; \
	  else grep '^-- chainrules' $(1)/configure.log || true; fi
endef

# No "Entering directory" noise from the make that cmake --build starts.
MAKEFLAGS += --no-print-directory

# The steps run in order even under make -j.
.NOTPARALLEL:
.PHONY: all deps configure build demo test sanitize tsan valgrind coverage fuzz docs format \
        format-check install clean help

all: build

help:
	@sed -n '2,23p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@$(DEPS)

configure: deps
	$(call configure_tree,$(BUILD),$(MAIN_ARGS))

build: configure
	$(CMAKE) --build $(BUILD) -j $(JOBS)

demo: configure
	@$(CMAKE) --build $(BUILD) -j $(JOBS) --target cr_examples
	@list=$(BUILD)/examples/examples.list; \
	if [ ! -s $$list ]; then echo "no examples yet (examples/NN_*.c)"; exit 0; fi; \
	while IFS= read -r exe; do \
	  echo "==> $$(basename $$exe)"; \
	  "$$exe" || { echo "$$(basename $$exe) failed with status $$?"; exit 1; }; \
	  echo; \
	done < $$list

test: build
	cd $(BUILD) && $(CTEST) --output-on-failure -j $(JOBS) $(CTEST_ARGS)

sanitize: deps
	$(call configure_tree,build-asan,$(ASAN_ARGS))
	$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && $(SAN_ENV) $(CTEST) --output-on-failure -j $(JOBS) $(CTEST_ARGS)

tsan: deps
	$(call configure_tree,build-tsan,$(TSAN_ARGS))
	$(CMAKE) --build build-tsan -j $(JOBS)
	cd build-tsan && $(SAN_ENV) $(CTEST) --output-on-failure -j $(JOBS) $(CTEST_ARGS)

VALGRIND_LABELS ?= unit
valgrind:
	@$(DEPS) valgrind
	$(call configure_tree,build-valgrind,$(VG_ARGS))
	$(CMAKE) --build build-valgrind -j $(JOBS)
	cd build-valgrind && $(CTEST) --output-on-failure -j $(JOBS) -L '$(VALGRIND_LABELS)' $(CTEST_ARGS)

coverage: deps
	$(call configure_tree,build-cov,$(COV_ARGS))
	$(CMAKE) --build build-cov -j $(JOBS)
	find build-cov -name '*.gcda' -delete
	cd build-cov && $(CTEST) --output-on-failure -j $(JOBS) -E '^install$$' $(CTEST_ARGS)
	sh tools/coverage.sh build-cov

# The packages are passed to deps.sh here only: clang-19 and its libFuzzer/sanitizer runtimes.
fuzz:
	@$(DEPS) clang-19 libclang-rt-19-dev
	$(call configure_tree,build-fuzz,$(FUZZ_ARGS))
	$(CMAKE) --build build-fuzz -j $(JOBS) --target cr_fuzz
	sh fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

docs: configure
	$(CMAKE) --build $(BUILD) --target docs

FORMAT_FILES = $(shell find $(FORMAT_DIRS) -name '*.[ch]' 2>/dev/null | sort)
format-check:
	@$(DEPS) clang-format
	@if [ -n "$(FORMAT_FILES)" ]; then clang-format --dry-run -Werror $(FORMAT_FILES); fi
	@echo "format-check: $(words $(FORMAT_FILES)) files formatted"

format:
	@$(DEPS) clang-format
	@if [ -n "$(FORMAT_FILES)" ]; then clang-format -i $(FORMAT_FILES); fi

install: build
	$(CMAKE) --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-tsan build-valgrind build-cov build-fuzz $(BUILD)
