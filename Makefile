# lhengine: the two commands a fresh machine needs are `make demo` and `make test`.
GO      ?= go
# staticcheck, pinned: make test installs it into bin/ from the Go module
# proxy (built for this machine), so a fresh machine needs nothing for it.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
EXAMPLE := plugins/examples/report
STEPS   := draft verify finalize

.PHONY: all build plugins demo notify-demo migration-demo audit-demo policy-demo eval-demo agent-demo polyglot-demo deps staticcheck test sdk-test cross bench bench-compare fuzz clean

all: build plugins

# -buildvcs=auto stamps the commit `lhengine version` prints (a GOFLAGS of
# -buildvcs=false would leave it out); outside a git checkout it stamps none.
build:
	$(GO) build -buildvcs=auto -o bin/lhengine ./cmd/lhengine

# The example's step plugins, Go programs built for WASI preview 1.
plugins:
	for s in $(STEPS); do GOOS=wasip1 GOARCH=wasm $(GO) build -o $(EXAMPLE)/$$s.wasm ./$(EXAMPLE)/$$s || exit 1; done

# Build everything from source and run the example task on the embedded store
# (home: ./.lhengine).
demo: build plugins
	./bin/lhengine --home .lhengine run $(EXAMPLE)/task.hcl

# The exactly-once side-effect example: a mail sink on loopback receives one
# email per recipient. Kill the run at any moment, resume it, and the sink
# still applies each email once.
notify-demo: build
	GOOS=wasip1 GOARCH=wasm $(GO) build -o plugins/examples/notify/send.wasm ./plugins/examples/notify/send
	$(GO) build -o bin/mailsink ./plugins/examples/notify/sink
	@tmp=$$(mktemp -d) && addr_file=$$tmp/addr; \
	./bin/mailsink -addr 127.0.0.1:0 -addr-file $$addr_file & sink=$$!; \
	trap 'kill $$sink 2>/dev/null; rm -rf $$tmp' EXIT; \
	for i in $$(seq 100); do [ -s $$addr_file ] && break; kill -0 $$sink 2>/dev/null || break; sleep 0.1; done; \
	[ -s $$addr_file ] || { echo "notify-demo: the mail sink did not start (it failed, see above, or took over 10s)" >&2; exit 1; }; \
	addr=$$(cat $$addr_file); \
	./bin/lhengine --home .lhengine run plugins/examples/notify/task.hcl --var sink=http://$$addr/mail && curl -sf http://$$addr/stats; \
	status=$$?; echo; exit $$status

# The migration example: a task over a git repository it creates waits for a
# person's approval, a commit lands on HEAD meanwhile, and the resume notices
# the drift and runs the stale steps again (plugins/examples/migration/demo.sh
# says each step; it stops with a non-zero status on any other outcome).
migration-demo: build
	for p in plan rename check deploy evidence; do GOOS=wasip1 GOARCH=wasm $(GO) build -o plugins/examples/migration/$$p.wasm ./plugins/examples/migration/$$p || exit 1; done
	./plugins/examples/migration/demo.sh ./bin/lhengine

# The site-audit example: a generated site of PAGES pages with planted
# problems on loopback, audited by a fan-out of one unit per page; the run
# waits for a person's approval of the title rewrites, another command
# approves, the resume writes the report, and its numbers must equal the
# planted ones (plugins/examples/site-audit/demo.sh; non-zero on a mismatch).
# make audit-demo PAGES=3000 audits the whole site.
PAGES ?= 300
audit-demo: build
	for p in sitemap check suggest report; do GOOS=wasip1 GOARCH=wasm $(GO) build -o plugins/examples/site-audit/$$p.wasm ./plugins/examples/site-audit/$$p || exit 1; done
	$(GO) build -o bin/auditsite ./plugins/examples/site-audit/site
	PAGES=$(PAGES) ./plugins/examples/site-audit/demo.sh ./bin/lhengine ./bin/auditsite

# The tool-using agent example, on the model responses recorded in the
# repository: no network, no key, the same conversation every time. Its
# README says how to run it against a real endpoint.
agent-demo: build
	GOOS=wasip1 GOARCH=wasm $(GO) build -o plugins/examples/agent/agent.wasm ./plugins/examples/agent
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT; \
	out=$$(./bin/lhengine --home $$tmp run --model-replay plugins/examples/agent/recorded plugins/examples/agent/task.hcl); \
	status=$$?; echo "$$out"; [ $$status = 0 ] || exit $$status; \
	./bin/lhengine --home $$tmp status $$(echo "$$out" | sed -n '1s/^task //p')

# A harness policy switched per run, no rebuild: the critic example run as it
# is (its draft's TODO ships) and with the critic-after-draft policy (a critic
# step inserted after the draft catches it and sends the task back), each in
# a fresh home; then the second run's pinned manifest.
policy-demo: build plugins
	for p in critic draft; do GOOS=wasip1 GOARCH=wasm $(GO) build -o plugins/examples/critic/$$p.wasm ./plugins/examples/critic/$$p || exit 1; done
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT; \
	echo "== without the policy"; \
	./bin/lhengine --home $$tmp/a run plugins/examples/critic/task.hcl | grep -c TODO | sed 's/^/TODO lines in the output: /'; \
	echo "== with critic-after-draft@2"; \
	./bin/lhengine --home $$tmp/b run plugins/examples/critic/task.hcl --policies policies --policy critic-after-draft@2 > $$tmp/out || exit 1; \
	grep -c TODO $$tmp/out | sed 's/^/TODO lines in the output: /'; \
	id=$$(head -1 $$tmp/out | cut -d' ' -f2); ./bin/lhengine --home $$tmp/b manifest $$id

# The ablation evals: critic-after-draft (testdata/evals/critic.hcl), each
# case of the critic example with and without the policy, each run on a
# fresh home, one case killed with SIGKILL and resumed; then
# single-tool-at-a-time and context-reset-every-n (testdata/evals/agent.hcl)
# on the agent example, its model calls replayed from recordings of a
# scripted loopback model. Prints the tables and writes the result files to a
# temporary folder; EVAL_RESULTS=testdata/evals/results rewrites the ones in
# the repository that the policies' evidence names.
eval-demo: build plugins
	for p in critic draft; do GOOS=wasip1 GOARCH=wasm $(GO) build -o plugins/examples/critic/$$p.wasm ./plugins/examples/critic/$$p || exit 1; done
	GOOS=wasip1 GOARCH=wasm $(GO) build -o plugins/examples/agent/agent.wasm ./plugins/examples/agent
	for v in report agent; do GOOS=wasip1 GOARCH=wasm $(GO) build -o testdata/evals/verifiers/$$v.wasm ./testdata/evals/verifiers/$$v || exit 1; done
	@results=$(if $(EVAL_RESULTS),$(EVAL_RESULTS),$$(mktemp -d)); \
	./bin/lhengine eval --results $$results testdata/evals/critic.hcl && \
	./bin/lhengine eval --results $$results testdata/evals/agent.hcl

# One task whose four steps are plugins in Go, Rust, AssemblyScript and C,
# each built with its SDK and reading the output of the step before
# (plugins/examples/polyglot/task.hcl), run in a temporary home.
POLY := plugins/examples/polyglot
RUSTFLAGS_WASM := --target wasm32-wasi -O --edition 2021
polyglot-demo: deps build
	GOOS=wasip1 GOARCH=wasm $(GO) build -o $(POLY)/words.wasm ./$(POLY)/words
	/usr/bin/rustc $(RUSTFLAGS_WASM) --crate-type rlib --crate-name lhengine plugins/sdk/rust/lib.rs -o $(POLY)/liblhengine.rlib
	/usr/bin/rustc $(RUSTFLAGS_WASM) -C strip=debuginfo --extern lhengine=$(POLY)/liblhengine.rlib $(POLY)/lengths/main.rs -o $(POLY)/lengths.wasm
	cd bin/npm && node_modules/.bin/asc ../../$(POLY)/stats/index.ts --config node_modules/@assemblyscript/wasi-shim/asconfig.json -O3 -o ../../$(POLY)/stats.wasm
	clang-14 --target=wasm32-wasi -O2 -Wall -Werror -I plugins/sdk/c -o $(POLY)/report.wasm $(POLY)/report/report.c
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT; ./bin/lhengine --home $$tmp run $(POLY)/task.hcl

# Toolchains for the C, Rust and AssemblyScript test guests, and Chromium for
# the dashboard's test (Debian packages; needs root or sudo), then the pinned
# AssemblyScript compiler and WASI shim from npm into bin/npm (once per
# version).
deps:
	./scripts/deps.sh

# The full test suite: formatting, vet, staticcheck, and every test with the
# race detector, of the engine's module and of the Go SDK's own module
# (plugins/sdk/go, which ./... does not reach), then the cross-builds.
test: deps staticcheck sdk-test cross
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	./bin/staticcheck ./...
	$(GO) test -race -count=1 -timeout 20m ./...

# The Go SDK is its own module with no dependencies: vet and staticcheck it
# (natively and for wasip1), test it, and check that it imports nothing
# outside the standard library and itself.
sdk-test: staticcheck
	cd plugins/sdk/go && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
	cd plugins/sdk/go && ../../../bin/staticcheck ./... && GOOS=wasip1 GOARCH=wasm ../../../bin/staticcheck ./...
	cd plugins/sdk/go && $(GO) test -race -count=1 ./...
	@cd plugins/sdk/go && for goos in linux wasip1; do \
		deps=$$(GOOS=$$goos GOARCH=$$([ $$goos = wasip1 ] && echo wasm || $(GO) env GOARCH) \
			$(GO) list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./... \
			| grep -v '^github.com/lhengine/lhengine/plugins/sdk/go' || true); \
		test -z "$$deps" || { echo "the SDK imports non-standard packages ($$goos): $$deps"; exit 1; }; \
	done

# staticcheck at the pinned version, built for this machine into bin/.
staticcheck:
	GOOS= GOARCH= GOBIN=$(CURDIR)/bin $(GO) install $(STATICCHECK)

# The CLI builds wherever Badger and wazero do, and the tests build for
# Windows too (vet type-checks them).
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build ./...
	GOOS=windows GOARCH=amd64 $(GO) build ./...
	GOOS=windows GOARCH=amd64 $(GO) vet ./...
	GOOS=linux GOARCH=arm64 $(GO) build ./...

# Benchmarks recorded in docs/BENCHMARKS.md.
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 3x -count 3 ./engine/ ./store/
	$(GO) test -run '^$$' -bench . -count 3 ./engine/internal/guest/
	$(GO) test -run '^$$' -bench . -benchtime 200x -count 3 ./engine/internal/hostcall/
	$(GO) test -run '^$$' -bench . -benchtime 3x -count 3 ./server/
	$(GO) test -run '^$$' -bench StatusThroughSocket -benchtime 500x -count 3 ./cmd/lhengine/

# Every fuzz target, FUZZTIME each (the corpus they found is kept under
# testdata/fuzz of their package), the Go SDK's module's too.
FUZZTIME ?= 30s
fuzz:
	@for mod in . plugins/sdk/go; do \
		for pkg in $$(cd $$mod && $(GO) list ./...); do \
			for f in $$(cd $$mod && $(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
				echo "== $$pkg $$f"; \
				(cd $$mod && $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg) || exit 1; \
			done; \
		done; \
	done

# lhengine bench on this machine's disk: the engine's figures beside fsync,
# Badger group commit and wazero, interleaved over rounds (docs/BENCHMARKS.md,
# "Side by side"). Extra flags: make bench-compare BENCH_ARGS='--rounds 5'.
bench-compare: deps build
	clang-14 --target=wasm32-wasi -O2 -Wall -Werror -I plugins/sdk/c -o bin/pipeline.wasm testdata/guests/c/pipeline.c
	GOOS=wasip1 GOARCH=wasm $(GO) build -o bin/conformance.wasm ./testdata/guests/go/conformance
	GOOS=wasip1 GOARCH=wasm $(GO) build -o bin/stateless.wasm ./testdata/guests/go/stateless
	./bin/lhengine bench --plugin bin/pipeline.wasm --go-plugin bin/conformance.wasm --go-reuse-plugin bin/stateless.wasm $(BENCH_ARGS)

clean:
	rm -rf bin $(EXAMPLE)/*.wasm plugins/examples/notify/*.wasm plugins/examples/site-audit/*.wasm plugins/examples/critic/*.wasm plugins/examples/agent/*.wasm testdata/evals/verifiers/*.wasm
