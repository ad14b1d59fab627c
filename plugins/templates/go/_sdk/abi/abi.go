// Package abi holds the identity of the lhengine plugin ABI: its major
// version and the name of the host import module that carries it. It is the
// one place they are defined. The engine (which serves the ABI) and the Go
// SDK (which speaks it) both import this package, which imports nothing, so
// a plugin that uses the SDK does not pull in the engine. The C header
// plugins/sdk/c/lhengine.h and the Rust guests cannot import Go; tests check
// their copies against these constants.
//
// Within a major version functions are only added and status codes only
// appended (specs/abi.md); a change that breaks a plugin built against v1 is
// a new Version and a new HostModule.
package abi

// Version is the major version of the plugin ABI. The request envelope
// carries it as "abi".
const Version = 1

// HostModule is the name of the import module of the ABI's host functions:
// "lhengine_v" followed by Version. A module built for another major version
// imports another name, so the engine refuses it at load instead of running
// it half-working.
//
// The Go SDK's //go:wasmimport directives, which cannot name a constant,
// spell it out; a test keeps them equal.
const HostModule = "lhengine_v1"
