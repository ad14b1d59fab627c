// Package engine runs lhengine tasks: HCL task files describing pipelines of
// WebAssembly step plugins, executed as durable, leased, checkpointed work
// units on an embedded Badger ledger.
//
// The data flow, one folder per stage:
//
//  1. internal/taskfile  parse and validate task.hcl (diagnostics keep file:line:col),
//     within the limits of internal/bounds (size and nesting checked on the
//     tokens before parsing; every evaluation's functions and for
//     expressions charged to one budget)
//  2. internal/plan      apply the run's harness policies (../policies, specs/
//     policies.md: inserted steps, parameters, overrides; the policy
//     language is internal/policylang) and pin a run
//     manifest (source, variables, plugin sha256s, each policy's text);
//     later, re-read it to plan fan-out items (evaluated outside any write,
//     written in bounded batches by the store) and evaluate each unit's input
//     (inputs written, and stored outputs read back, as JSON by
//     internal/jsonval)
//  3. ../ledger          the store contract: the ledger's records and the
//     interfaces the engine holds (ledger.Store: submit with the module
//     bytes, claim a unit with a lease and fencing epoch, runnable tasks
//     taking turns, heartbeat, commit output + checkpoint + advance + event
//     in one transaction), with its conformance suite (ledger/ledgertest);
//     ../store is its embedded implementation on Badger
//  4. internal/worker    claim, run, renew, commit, repeat; what it commits is
//     counted by internal/metrics (Prometheus, served by MetricsHandler) and
//     each unit traced when Config.TracerProvider is set
//  5. internal/guest     one attempt in a fresh wazero instance under budgets
//     (wall time, memory, stdout, host calls), with a deterministic clock
//     (a guest's sleep returns at once) and random source; the host module
//     lhengine_v1: version, log, heartbeat, call, result, artifact_put,
//     artifact_read, last_error (specs/abi.md)
//  6. internal/hostcall  the capabilities behind call and the artifact
//     functions: the effect journal (effect.do), http.fetch, progress.count
//     and progress.note, kv.get and kv.put (a work unit's own entries),
//     artifacts with provenance; each one granted per step by the task file
//     (mounts and file effects reach files only through internal/confine,
//     which resolves every path through directory descriptors)
//  7. ../fault           the one vocabulary of step failures, a value the
//     ledger persists (so it is below the contract, the store and the engine)
//  8. ../server, ../api  the control plane around an Engine: the owner of a
//     home serves the API (specs/api.md) on the home's socket, streams
//     events as commits land (Changed), shows liveness (Working), and with
//     lhengine serve, the web dashboard; the CLI is an api.Client
//
// The layers point down only. At the bottom, leaves that import nothing of
// lhengine: ../fault, ../api (the wire contract: its own records, no
// engine type), the SDK's abi and ../internal (bytesize, crashpoint,
// diskfree, hcldiag, holdpoint; and the test helpers testbadger, testgate,
// testgit, testhcl, testmodel, testpg, testpolicy, testwait, testwasm). Above them ../ledger (it imports only ../fault) and
// ../internal/homefiles (a home's socket, owner record and tokens; it
// imports only ../api); then ../store, which implements the ledger; then
// this package and its internal stages, which hold a ledger.Store and name
// no store type; then ../server, which converts ledger records into api
// ones (server/wire.go); and on top ../cmd/lhengine, with what only its
// commands use: cmd/lhengine/internal/home, the one place that decides who
// owns a home (open the store and serve, or be the owner's client), and
// the drivers evalrun and benchrun. farm-studio look draws the same floors.
//
// The ABI's version and host module name are defined once, in the Go SDK's
// leaf package github.com/lhengine/lhengine/plugins/sdk/go/abi, which both
// the engine and the SDK import.
//
// An Engine ties them to a home directory: the store under home/store and a
// compiled-module cache, which homes may share (Config.CacheDir; by default
// home/cache). Its public surface is small: Open,
// Submit, Work, the reads and controls in control.go, Remove and GC,
// Validate and InspectPlugin (specs/RATIONALE.md, "What is public").
package engine
