//go:build !go1.26 || go1.27

package sdk

// reuseTested says the toolchain building this plugin is one the
// instance reuse of Stateless was tested with (Go 1.26; see Stateless).
// This one is not: Stateless is ignored.
const reuseTested = false
