# agentmesh: make build | run | test | bench | fuzz | lint | check

GO       ?= go
FUZZTIME ?= 60s
BENCHFLAGS ?=

# Fuzz targets as package:Target, one for each `func Fuzz...` in a _test.go
# file (testdata and the .cache of make e2e-cli left out), so a new fuzz
# function is fuzzed without being listed here.
FUZZ_TARGETS := $(shell grep -r --include='*_test.go' --exclude-dir=testdata --exclude-dir=.cache --exclude-dir=.agentmesh \
	-o '^func Fuzz[A-Za-z0-9_]*' . | sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz.*)$$|\1:\2|' | LC_ALL=C sort)

.PHONY: build run test vet lint bench fuzz check fmt-check chaos

## build: bin/agentmesh, the sandbox's init (bin/agentmesh-sandbox-init) and one binary per service (bin/router, bin/subprocess-runner, ...)
build:
	$(GO) build -o bin/ ./cmd/agentmesh ./cmd/agentmesh-sandbox-init ./services/...

## run: the whole mesh on an embedded NATS server in ./.agentmesh, with one demo run
run: build
	bin/agentmesh up --demo

## vet: go vet
vet:
	$(GO) vet ./...

## lint: staticcheck, the version pinned in go.mod's tool block, with the checks of staticcheck.conf
lint:
	$(GO) tool staticcheck ./...

## test: vet, then every test with the race detector
test: vet
	$(GO) test -race -count=1 -timeout 25m ./...

## chaos: the fault and cluster chaos tests (TestFault*, TestChaos*), CHAOS_TRIALS runs of each (default 100), printing each test's counts; the full log is .cache/chaos.log
CHAOS_TRIALS ?= 100
chaos:
	@mkdir -p .cache
	@echo "AGENTMESH_CHAOS_TRIALS=$(CHAOS_TRIALS) $(GO) test -race -count=1 -timeout 180m -v -run 'TestFault|TestChaos' ./..."
	@AGENTMESH_CHAOS_TRIALS=$(CHAOS_TRIALS) $(GO) test -race -count=1 -timeout 180m -v -run 'TestFault|TestChaos' ./... >.cache/chaos.log 2>&1; rc=$$?; \
	grep -E 'trials=|^(--- FAIL|FAIL|ok |panic)' .cache/chaos.log | grep -v 'no tests to run'; \
	echo "chaos: exit $$rc; full log in .cache/chaos.log"; exit $$rc

## bench: every benchmark; the sync-policy ones with their stores on the disk under BENCH_DISK (default .cache/bench-disk: a tmpfs /tmp makes an fsync free)
BENCH_DISK ?= $(CURDIR)/.cache/bench-disk
bench:
	$(GO) test -run '^$$' -bench . -skip 'BenchmarkSyncPolicy' $(BENCHFLAGS) ./...
	@mkdir -p $(BENCH_DISK)
	TMPDIR=$(BENCH_DISK) $(GO) test -run '^$$' -bench 'BenchmarkSyncPolicy' $(BENCHFLAGS) ./bench

## scale: 1,000 fixture runs at once on one runner, each followed, with no MaxWaiting or consumer-limit warning (also part of make test)
.PHONY: scale
scale:
	$(GO) test -race -count=1 -timeout 10m -v -run '^TestScale' ./bench

## fuzz: each fuzz target for FUZZTIME (default 60s)
fuzz:
	@set -e; for pt in $(FUZZ_TARGETS); do \
		p=$${pt%%:*}; t=$${pt##*:}; \
		echo "$(GO) test -run '^\$$' -fuzz '^$$t\$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$p"; \
		$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$p; \
	done

## fmt-check: fail if a file is not gofmt-formatted
fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

## check: fmt-check, vet, lint, then test (what .ci/run calls, before e2e-cli)
check: fmt-check vet lint test

## smoke: credentialed smoke tests against the real OpenAI and Anthropic APIs; each skips without its key; never in CI
.PHONY: smoke
smoke:
	$(GO) test -tags smoke -run TestSmoke -count=1 -v ./e2e

## e2e-cli: install the pinned agent CLIs and the Node OpenAI SDK from npm into .cache/cli, then run each CLI through the mesh against pkg/adapter/cli/fakemodel and the SDK against the gateway
.PHONY: e2e-cli
e2e-cli:
	GO=$(GO) bash scripts/e2e-cli.sh
