# lhengine: the two commands a fresh machine needs are `make demo` and `make test`.
GO      ?= go
EXAMPLE := plugins/examples/report
STEPS   := draft verify finalize

.PHONY: all build plugins demo notify-demo deps test bench fuzz clean

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

# The exactly-once side-effect example: a mail sink on loopback receives one
# email per recipient. Kill the run at any moment, resume it, and the sink
# still applies each email once.
notify-demo: build
	GOOS=wasip1 GOARCH=wasm $(GO) build -o plugins/examples/notify/send.wasm ./plugins/examples/notify/send
	$(GO) build -o bin/mailsink ./plugins/examples/notify/sink
	./bin/mailsink -addr 127.0.0.1:8025 & sink=$$!; \
	trap "kill $$sink" EXIT; \
	until curl -sf http://127.0.0.1:8025/stats >/dev/null; do sleep 0.1; done; \
	./bin/lhengine run plugins/examples/notify/task.hcl && curl -s http://127.0.0.1:8025/stats; echo

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
	$(GO) test -run '^$$' -bench . -benchtime 200x -count 3 ./engine/internal/hostcall/

clean:
	rm -rf bin $(EXAMPLE)/*.wasm plugins/examples/notify/*.wasm
