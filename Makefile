# chainwatch: the two commands are `make run` and `make test`. Both install what they need.
SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BUILD_DEPS := libevent-dev libssl-dev pkg-config ca-certificates
TEST_DEPS := curl openssl nginx-light python3 python3-pytest python3-cryptography procps tinyproxy
ARGS ?=

.PHONY: all build run test unit e2e deps test-deps clean sanitize sanitize-address sanitize-thread

all: build

# Installs the Debian packages that are missing (and only those).
define apt_install
	@missing=""; for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; fi
endef

deps:
	$(call apt_install,$(BUILD_DEPS))

test-deps: deps
	$(call apt_install,$(TEST_DEPS))
	@python3 -c 'import pytest' 2>/dev/null || python3 -m pip install -q pytest
	@python3 -c 'import cryptography' 2>/dev/null || python3 -m pip install -q cryptography

build: deps
	swift build -c release --product chainwatch
	swift build -c release --product chainwatch-bench

# Runs the proxy on 127.0.0.1:3128 with the built-in default policy (system trust, alert).
run: build
	.build/release/chainwatch run $(ARGS)

# Unit tests (Swift Testing) and end-to-end tests (pytest: real curl, openssl, nginx on loopback).
test: test-deps build
	swift test
	CHAINWATCH_BIN=$(CURDIR)/.build/release/chainwatch CHAINWATCH_BENCH_BIN=$(CURDIR)/.build/release/chainwatch-bench \
	  python3 -m pytest -q Tests/e2e

unit: deps
	swift test

e2e: test-deps build
	CHAINWATCH_BIN=$(CURDIR)/.build/release/chainwatch CHAINWATCH_BENCH_BIN=$(CURDIR)/.build/release/chainwatch-bench \
	  python3 -m pytest -q Tests/e2e $(ARGS)

# Sanitizers (issue 12): AddressSanitizer (with LeakSanitizer), then ThreadSanitizer, one after the other. Each builds
# chainwatch and chainwatch-bench into its own folder (.build-asan, .build-tsan), runs `swift test` with the same
# flags and the e2e suite against those binaries, and fails on a failed test or on any sanitizer report (every
# sanitized process writes its reports into <folder>/reports; they are printed at the end). Tests/sanitizers/run.sh
# does the work; Tests/sanitizers/lsan.supp lists the leak reports suppressed, each third-party, with why.
# Release configuration: it is what ships (the optimizer changes what code runs; SwiftPM's release builds keep -g, so
# reports still name file:line), and the e2e suite's time bounds (64 MiB transfers, 200 concurrent tunnels, deadlines
# of a few seconds) held here under TSan with optimized code, unscaled. A debug build was not tried.
# The ThreadSanitizer build compiles with -DSANITIZE_THREAD: `Lock` (Sources/ChainwatchLock) is then a pthread mutex,
# which TSan sees, instead of Synchronization.Mutex, whose futex waits it does not.
# Deselected: none under either sanitizer.
SANITIZE_ADDRESS_DESELECT :=
SANITIZE_THREAD_DESELECT :=

# One after the other (never both at once on two cores); the second runs even when the first failed.
sanitize: test-deps
	@$(MAKE) --no-print-directory sanitize-address; a=$$?; $(MAKE) --no-print-directory sanitize-thread; t=$$?; \
	  echo "make sanitize: address exit $$a, thread exit $$t"; [ $$a = 0 ] && [ $$t = 0 ]

sanitize-address: test-deps
	Tests/sanitizers/run.sh address $(SANITIZE_ADDRESS_DESELECT) $(ARGS)

sanitize-thread: test-deps
	Tests/sanitizers/run.sh thread $(SANITIZE_THREAD_DESELECT) $(ARGS)

clean:
	rm -rf .build .build-asan .build-tsan
