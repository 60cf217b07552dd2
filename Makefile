# Convenience front end to Meson; see README.md.
BUILD ?= build
ASAN_BUILD ?= build-asan
PYTHON ?= /usr/bin/python3
MESON_OPTS ?=
DEMO_SRC ?= /usr/share/doc
DEMO_IMG ?= demo.erofs
# zstd: the default target becomes Linux 6.10, which mounts the demo image
DEMO_OPTS ?= -z zstd

# A directory put first on PATH for the tests (mkfs.erofs, fsck.erofs,
# dump.erofs of another version), e.g. EROFS_UTILS_BIN=$(scripts/erofs-utils.sh).
# make check-all sets it to the erofs-utils that script builds.
EROFS_UTILS_BIN ?=
# KILN_REQUIRE_ALL=1 makes every skipped test a failure (CI sets it).
KILN_REQUIRE_ALL ?=
export KILN_REQUIRE_ALL

# The end-to-end tests of the sanitizer pass: modules (or tests) marked
# `sanitize`, less those marked `nosanitize` (see tests/e2e/conftest.py).
SANITIZE_TESTS ?= sanitize and not nosanitize

TEST_PATH = $(if $(EROFS_UTILS_BIN),PATH="$(EROFS_UTILS_BIN):$$PATH")
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

.PHONY: all deps build demo check check-all check-unit check-e2e check-asan \
	check-asan-unit check-asan-e2e erofs-utils bench clean

all: build

deps:
	./scripts/install-deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

# Build an image of a real tree, check it and print a summary.
demo: deps build
	$(BUILD)/tools/kiln/kiln build $(DEMO_OPTS) $(DEMO_SRC) $(DEMO_IMG)
	$(BUILD)/tools/kiln/kiln fsck $(DEMO_IMG)
	$(BUILD)/tools/kiln/kiln info $(DEMO_IMG)
	$(BUILD)/tools/kiln/kiln ls $(DEMO_IMG) / | head -n 20

# Unit tests and the fuzz-corpus replay of the plain build.
check-unit: build
	$(TEST_PATH) meson test -C $(BUILD) --print-errorlogs

# Every end-to-end test.
check-e2e: build
	$(TEST_PATH) KILN=$(abspath $(BUILD))/tools/kiln/kiln \
		$(PYTHON) -m pytest -ra -q tests/e2e

$(ASAN_BUILD)/build.ninja:
	CC=clang meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined \
		-Db_lundef=false -Dfuzz=true $(MESON_OPTS)

# Under AddressSanitizer and UBSan: the unit tests and the replay of every
# fuzz corpus, then the end-to-end tests selected by SANITIZE_TESTS.
check-asan-unit: $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	$(TEST_PATH) $(SAN_ENV) meson test -C $(ASAN_BUILD) --print-errorlogs

check-asan-e2e: $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	$(TEST_PATH) $(SAN_ENV) \
	KILN=$(abspath $(ASAN_BUILD))/tools/kiln/kiln KILN_SANITIZED=1 \
		$(PYTHON) -m pytest -ra -q -m "$(SANITIZE_TESTS)" tests/e2e

check-asan: check-asan-unit check-asan-e2e

# Unit, fuzz-corpus replay and end-to-end, plain; then the sanitizer pass.
check: deps check-unit check-e2e check-asan

# What CI runs: check with erofs-utils 1.9 first on PATH and no skips.
check-all: deps erofs-utils
	$(MAKE) check EROFS_UTILS_BIN="$$(./scripts/erofs-utils.sh)" \
		KILN_REQUIRE_ALL=1

# Build (once; cached in ~/.cache/kiln-peers) and name erofs-utils 1.9.
erofs-utils:
	./scripts/erofs-utils.sh

# The benchmarks run bench/readbench and bench/leveltable too: build them.
bench: build
	ninja -C $(BUILD) bench/readbench bench/leveltable
	./bench/run-all.sh
	./bench/report.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(DEMO_IMG)
