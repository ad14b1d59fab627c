# lhengine: the two commands a fresh machine needs are `make demo` and `make test`.
GO      ?= go
EXAMPLE := plugins/examples/report
STEPS   := draft verify finalize

.PHONY: all build plugins demo deps test bench fuzz clean

all: build plugins

build:
	$(GO) build -o bin/lhengine ./cmd/lhengine

# The example's step plugins, Go programs built for WASI preview 1.
plugins:
	for s in $(STEPS); do GOOS=wasip1 GOARCH=wasm $(GO) build -o $(EXAMPLE)/$$s.wasm ./$(EXAMPLE)/$$s || exit 1; done

# Build everything from source and run the example task on the embedded store
# (home: ./.lhengine).
demo: build plugins
	./bin/lhengine run $(EXAMPLE)/task.hcl

# Toolchains for the C test guests (Debian packages; needs root or sudo).
deps:
	./scripts/deps.sh

# The full test suite: formatting, vet, and every test with the race detector.
test: deps
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

# Benchmarks recorded in docs/BENCHMARKS.md.
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 3x -count 3 ./engine/ ./store/
	$(GO) test -run '^$$' -bench . -count 3 ./engine/internal/guest/

clean:
	rm -rf bin $(EXAMPLE)/*.wasm
