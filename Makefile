# Convenience front end to Meson; see README.md.
BUILD ?= build
ASAN_BUILD ?= build-asan
PYTHON ?= /usr/bin/python3
MESON_OPTS ?=
DEMO_SRC ?= /usr/share/doc
DEMO_IMG ?= demo.erofs
# zstd: the default target becomes Linux 6.10, which mounts the demo image
DEMO_OPTS ?= -z zstd

.PHONY: all deps build demo check check-unit check-e2e check-asan bench clean

all: build

deps:
	./scripts/install-deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

# Build an image of a real tree, check it and print a summary.
demo: build
	$(BUILD)/tools/kiln/kiln build $(DEMO_OPTS) $(DEMO_SRC) $(DEMO_IMG)
	$(BUILD)/tools/kiln/kiln fsck $(DEMO_IMG)
	$(BUILD)/tools/kiln/kiln info $(DEMO_IMG)
	$(BUILD)/tools/kiln/kiln ls $(DEMO_IMG) / | head -n 20

check-unit: build
	meson test -C $(BUILD) --print-errorlogs

check-e2e: build
	KILN=$(abspath $(BUILD))/tools/kiln/kiln $(PYTHON) -m pytest -ra -q tests/e2e

$(ASAN_BUILD)/build.ninja:
	CC=clang meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined \
		-Db_lundef=false -Dfuzz=true $(MESON_OPTS)

# The whole suite again under AddressSanitizer and UBSan.
check-asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C $(ASAN_BUILD) --print-errorlogs
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	KILN=$(abspath $(ASAN_BUILD))/tools/kiln/kiln KILN_SANITIZED=1 \
		$(PYTHON) -m pytest -ra -q tests/e2e

# Every test: unit, fuzz-corpus replay and end-to-end, plain and sanitized.
check: check-unit check-e2e check-asan

bench: build
	./bench/run-all.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(DEMO_IMG)
