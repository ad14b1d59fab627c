// Package fault is the one vocabulary for why a step attempt failed.
//
// Every failure of a step attempt, whatever its cause (the guest trapped, ran out
// of time, wrote garbage, or the task file named a plugin that is not there), is a
// *StepError with a Kind. The Kind is persisted in the ledger, so kinds are only
// ever appended to this list, never renamed or removed.
package fault

import (
	"errors"
	"fmt"
)

// Kind classifies a step failure. The string value is persisted.
type Kind string

// Kinds of step failure. Append only: these strings are stored in the ledger.
const (
	// Trap: the guest hit a Wasm trap (unreachable, out-of-bounds access,
	// division by zero, stack overflow, ...).
	Trap Kind = "trap"
	// Timeout: the attempt ran past the step's timeout.
	Timeout Kind = "timeout"
	// Memory: the guest tried to grow its memory past the step's memory cap.
	Memory Kind = "memory"
	// OutputTooLarge: the guest wrote more to stdout or stderr than allowed.
	OutputTooLarge Kind = "output_too_large"
	// BadResult: stdout was not one JSON result object as the ABI requires.
	BadResult Kind = "bad_result"
	// ABIMismatch: the module imports a host module of another ABI major
	// version, or imports host functions this engine does not provide.
	ABIMismatch Kind = "abi_mismatch"
	// PluginError: the plugin reported {"error": ...} or exited non-zero.
	PluginError Kind = "plugin_error"
	// PluginMissing: the plugin file could not be read.
	PluginMissing Kind = "plugin_missing"
	// HashMismatch: the plugin file's sha256 differs from the one pinned in
	// the task file or in the task's run manifest.
	HashMismatch Kind = "hash_mismatch"
	// BadModule: the file is not a valid Wasm module, or not a WASI command.
	BadModule Kind = "bad_module"
	// Input: the step input (or for_each) expression could not be evaluated.
	Input Kind = "input"
	// Internal: the engine itself failed while running the step (store I/O).
	Internal Kind = "internal"
	// Budget: a budget of the task ran out (for example the repair budget).
	Budget Kind = "budget"
	// TooLarge: something the step needs or produced is larger than the
	// store or the engine accepts: its assembled input, a for_each item, or
	// everything its commit would write in one transaction. The same
	// attempt would fail the same way again.
	TooLarge Kind = "too_large"
	// Rejected: a person rejected the unit's approval, or it expired with
	// on_expiry = "reject". Another attempt would be rejected the same way.
	Rejected Kind = "rejected"
	// EffectTransport: an effect's request got no whole answer (the
	// connection was refused, reset or closed before the response ended,
	// or timed out), and the plugin failed the attempt on it. The effect's
	// intent stays and the next attempt reconciles it as its mode says.
	EffectTransport Kind = "effect_transport"
)

// Kinds returns every kind, in the order they were added.
func Kinds() []Kind {
	return []Kind{Trap, Timeout, Memory, OutputTooLarge, BadResult, ABIMismatch, PluginError, PluginMissing,
		HashMismatch, BadModule, Input, Internal, Budget, TooLarge, Rejected, EffectTransport}
}

// Retryable reports whether a failure of this kind may succeed on another
// attempt. Configuration faults (a missing plugin, a hash or ABI mismatch, a
// module that is not Wasm) fail the same way every time, so retrying them only
// burns budget.
func (k Kind) Retryable() bool {
	switch k {
	case ABIMismatch, PluginMissing, HashMismatch, BadModule, Input, Budget, TooLarge, Rejected:
		return false
	}
	return true
}

// StepError is a classified failure of one step attempt.
type StepError struct {
	Kind    Kind
	Message string // for humans; one line
	Err     error  // underlying cause, may be nil
}

// New returns a StepError of the given kind with a formatted message.
func New(kind Kind, format string, args ...any) *StepError {
	return &StepError{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns a StepError of the given kind whose message is msg and whose
// cause is err.
func Wrap(kind Kind, err error, msg string) *StepError {
	return &StepError{Kind: kind, Message: msg, Err: err}
}

func (e *StepError) Error() string {
	if e.Err != nil && e.Message == "" {
		return fmt.Sprintf("%s: %v", e.Kind, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

func (e *StepError) Unwrap() error { return e.Err }

// KindOf returns the Kind of err if it is (or wraps) a *StepError, and
// Internal otherwise.
func KindOf(err error) Kind {
	var se *StepError
	if errors.As(err, &se) && se != nil {
		return se.Kind
	}
	return Internal
}
