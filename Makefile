# chainwatch: the two commands are `make run` and `make test`. Both install what they need.
SHELL := /bin/bash
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BUILD_DEPS := libevent-dev libssl-dev pkg-config ca-certificates zlib1g-dev libbrotli-dev libzstd-dev
TEST_DEPS := curl openssl nftables iproute2 nginx-light gcc python3 python3-pytest python3-cryptography python3-prometheus-client python3-yaml procps tinyproxy systemd man-db librsvg2-bin gnutls-bin chromium prometheus linux-perf
ARGS ?=
# The commit `--version` shows (Package.swift reads it at build time); none outside a git checkout.
export CHAINWATCH_COMMIT ?= $(shell git -C $(CURDIR) rev-parse --short=12 HEAD 2>/dev/null)
# make fuzz: seconds per fuzz target (or FUZZ_RUNS executions each, when set); make fuzz-smoke: seconds per target.
FUZZ_TIME ?= 180
FUZZ_RUNS ?=
FUZZ_SMOKE_TIME ?= 5
# make test: pytest-xdist workers for the end-to-end suite.
E2E_WORKERS ?= 2
# make image: the image's name, what builds and runs it, and podman's options (see deploy/README.md).
IMAGE_DEPS := mmdebstrap podman
IMAGE ?= localhost/chainwatch:$(shell .build/release/chainwatch --version 2>/dev/null | cut -d' ' -f1 || echo dev)
PODMAN_FLAGS ?=
PODMAN_RUN_FLAGS ?=

.PHONY: all build run test unit e2e fuzz fuzz-smoke deps test-deps clean man install sanitize sanitize-address sanitize-thread image

# Where `make install` puts things (DESTDIR for staging, as packagers use it).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man/man1
DOCDIR ?= $(PREFIX)/share/doc/chainwatch
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system

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
	@python3 -c 'import xdist' 2>/dev/null || python3 -m pip install -q pytest-xdist
	@python3 -c 'import cryptography' 2>/dev/null || python3 -m pip install -q cryptography
	@python3 -c 'import prometheus_client' 2>/dev/null || python3 -m pip install -q prometheus-client
	@python3 -c 'import yaml' 2>/dev/null || python3 -m pip install -q pyyaml
	@python3 -c 'import kubernetes_validate' 2>/dev/null || python3 -m pip install -q kubernetes-validate
	@python3 -c 'import curl_cffi' 2>/dev/null || python3 -m pip install -q curl_cffi
	@python3 -c 'import tlslite' 2>/dev/null || python3 -m pip install -q tlslite-ng
	@python3 -c 'import brotli' 2>/dev/null || python3 -m pip install -q brotli
	@python3 -c 'import zstandard' 2>/dev/null || python3 -m pip install -q zstandard

build: deps
	swift build -c release --product chainwatch
	swift build -c release --product chainwatch-bench

# Runs the proxy on 127.0.0.1:3128 with the built-in default policy (system trust, alert).
run: build
	.build/release/chainwatch run $(ARGS)

# The unit tests run against the release build (Package.swift compiles the modules they import with -enable-testing),
# so this adds only the test targets to `make build`'s objects.
UNIT_TESTS := swift build -c release --build-tests && swift test -c release --skip-build

# Unit tests (Swift Testing), end-to-end tests (pytest: real curl, openssl, nginx on loopback) and a short run of
# each fuzz target. The end-to-end files run on E2E_WORKERS pytest-xdist workers, a file's tests on one worker (each
# test has its own ports and proxies; a proxy gets no admin listener unless its test names one): on 2 cores the suite
# takes about 7.5 minutes on two workers (it took 10 to 14 on one when it was smaller).
test: test-deps build
	$(UNIT_TESTS)
	CHAINWATCH_BIN=$(CURDIR)/.build/release/chainwatch CHAINWATCH_BENCH_BIN=$(CURDIR)/.build/release/chainwatch-bench \
	  python3 -m pytest -q -n $(E2E_WORKERS) --dist loadfile --durations=15 Tests/e2e
	$(MAKE) --no-print-directory fuzz-smoke

unit: build
	$(UNIT_TESTS)

e2e: test-deps build
	CHAINWATCH_BIN=$(CURDIR)/.build/release/chainwatch CHAINWATCH_BENCH_BIN=$(CURDIR)/.build/release/chainwatch-bench \
	  python3 -m pytest -q Tests/e2e $(ARGS)

# Manual pages from the commands' own help (every option with its default) and the sections written by hand in
# deploy/man (FILES, SIGNALS, EXIT STATUS, EXAMPLES, SEE ALSO).
man: build
	python3 deploy/man/make-man.py .build/release .build/man

# The binaries, manual pages, the policy reference and README (share/doc), systemd unit (paths filled in), default policy (kept if one is there) and logrotate.
install: man
	install -Dm755 .build/release/chainwatch $(DESTDIR)$(BINDIR)/chainwatch
	install -Dm755 .build/release/chainwatch-bench $(DESTDIR)$(BINDIR)/chainwatch-bench
	install -Dm644 .build/man/chainwatch.1 $(DESTDIR)$(MANDIR)/chainwatch.1
	install -Dm644 .build/man/chainwatch-bench.1 $(DESTDIR)$(MANDIR)/chainwatch-bench.1
	install -Dm644 policies/REFERENCE.md $(DESTDIR)$(DOCDIR)/policy-reference.md
	install -Dm644 README.md $(DESTDIR)$(DOCDIR)/README.md
	mkdir -p $(DESTDIR)$(UNITDIR)
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' deploy/chainwatch.service.in > $(DESTDIR)$(UNITDIR)/chainwatch.service
	chmod 644 $(DESTDIR)$(UNITDIR)/chainwatch.service
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/chainwatch/policy.yaml ]; then echo "kept $(DESTDIR)$(SYSCONFDIR)/chainwatch/policy.yaml"; \
	  else install -Dm644 policies/default.yaml $(DESTDIR)$(SYSCONFDIR)/chainwatch/policy.yaml; fi
	install -Dm644 deploy/logrotate.conf $(DESTDIR)$(SYSCONFDIR)/logrotate.d/chainwatch

# libFuzzer targets (Tests/Fuzz, AddressSanitizer), one at a time: FUZZ_TIME seconds each, or FUZZ_RUNS executions.
# Results and the commands behind FUZZING.md's numbers: FUZZING.md.
fuzz: deps
	Tests/Fuzz/run.sh $(if $(FUZZ_RUNS),--runs $(FUZZ_RUNS),--time $(FUZZ_TIME))

# Build the fuzz targets and run each for FUZZ_SMOKE_TIME seconds (part of make test).
fuzz-smoke: deps
	FUZZ_SMOKE=1 Tests/Fuzz/run.sh --time $(FUZZ_SMOKE_TIME)

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

# A container image without a registry or a base image (deploy/container/build-image.sh: a Debian bookworm root
# filesystem from Debian packages, the release binary and its Swift runtime libraries, imported into podman), then
# `chainwatch selftest` run inside it once. Not part of `make test`: it needs a Debian mirror and a podman that can run
# containers on the machine (see deploy/README.md for the options one machine needed).
image: build
	$(call apt_install,$(IMAGE_DEPS))
	IMAGE=$(IMAGE) deploy/container/build-image.sh
	podman $(PODMAN_FLAGS) run --rm --network=host $(PODMAN_RUN_FLAGS) $(IMAGE) selftest

clean:
	rm -rf .build .build-asan .build-tsan Tests/Fuzz/.build
