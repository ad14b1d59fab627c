// Package guest runs step plugins: WebAssembly modules speaking the lhengine
// plugin ABI v1 (specs/abi.md), under wazero.
//
// The life of a plugin in the engine:
//
//	file ──Load──▶ read, sha256, compile once (cached on disk), check ABI ──▶ *Plugin
//	*Plugin ──Run(request, limits, host)──▶ fresh instance ──▶ _start ──▶ *Result | *fault.StepError
//	                                   └──▶ (stateless) idle instance of the task, reset to its image ──▶ serve_next
//
// A Runtime owns one wazero runtime, its compilation cache and the two host
// modules every plugin may import: wasi_snapshot_preview1 and lhengine_v1.
// Load compiles a module once per Runtime (keyed by its sha256) and refuses,
// before anything runs, modules that are not Wasm (fault.BadModule), that are
// not WASI commands (fault.BadModule), or that import what this engine does
// not provide (fault.ABIMismatch).
//
// Run gives every attempt a fresh module instance, so no state leaks from one
// step to the next; a plugin that declares itself stateless (it imports
// lhengine_v1.serve_next, as sdk.Stateless makes a Go plugin do) is served
// instead from an instance of its task reset to its post-start image before
// every attempt (reuse.go). The request envelope is the instance's stdin; its stdout
// is the result; its stderr and its log calls are the step's log. An attempt
// is bounded in time (Limits.Timeout, enforced by closing the instance when
// its context is done), in memory (Limits.MemoryBytes, enforced by a
// per-instance memory allocator), in output (Limits.MaxStdout) and in host
// calls (Limits.MaxHostCalls). Whatever the guest does, Run returns a
// classified *fault.StepError, never a panic.
//
// The host functions of lhengine_v1 (abi.go, capability.go) check every
// pointer and length against the guest's memory and return statuses, never
// trap. The capabilities (call, artifact_put, artifact_read) are served by
// the Host the engine passes to Run; a failed call leaves a message for
// last_error, and a result larger than the guest's buffer waits as the
// pending result for result. Limits.Mounts gives the guest host directories
// as WASI preopens, confined so that neither "..", a symbolic link nor a
// concurrent change of the tree leads out of them: every path is resolved
// and used through directory descriptors (mounts.go, package confine).
//
// Instances are cheap to make (tens of microseconds for a small C plugin)
// because the per-attempt work is kept small: linear memories come from a
// process-wide pool of regions that are cleared before reuse (package linmem),
// the module configuration is built once per Plugin, the guest's seeded
// random source shares a precomputed prefix (rand.go), and Load packs the
// many small data segments some toolchains emit into a few equivalent ones
// (datapack.go).
package guest
