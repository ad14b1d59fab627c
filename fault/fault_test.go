package fault_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
)

// TestKindRetryable pins which kinds are worth another attempt: the
// configuration faults fail the same way every time.
func TestKindRetryable(t *testing.T) {
	t.Parallel()
	for kind, want := range map[fault.Kind]bool{
		fault.Trap: true, fault.Timeout: true, fault.Memory: true, fault.OutputTooLarge: true,
		fault.BadResult: true, fault.PluginError: true, fault.Internal: true,
		fault.ABIMismatch: false, fault.PluginMissing: false, fault.HashMismatch: false,
		fault.BadModule: false, fault.Input: false, fault.Budget: false,
		fault.Kind("a_kind_from_a_newer_engine"): true,
	} {
		require.Equal(t, want, kind.Retryable(), kind)
	}
}

// TestKindStrings pins the persisted names: they are in ledgers already
// written and must never change.
func TestKindStrings(t *testing.T) {
	t.Parallel()
	for kind, s := range map[fault.Kind]string{
		fault.Trap: "trap", fault.Timeout: "timeout", fault.Memory: "memory",
		fault.OutputTooLarge: "output_too_large", fault.BadResult: "bad_result",
		fault.ABIMismatch: "abi_mismatch", fault.PluginError: "plugin_error",
		fault.PluginMissing: "plugin_missing", fault.HashMismatch: "hash_mismatch",
		fault.BadModule: "bad_module", fault.Input: "input", fault.Internal: "internal",
		fault.Budget: "budget",
	} {
		require.Equal(t, s, string(kind))
	}
}

// TestKindOf maps any error to a kind: the kind of the outermost
// *StepError in its chain, Internal for everything else.
func TestKindOf(t *testing.T) {
	t.Parallel()
	inner := fault.New(fault.Trap, "unreachable")
	for name, tc := range map[string]struct {
		err  error
		want fault.Kind
	}{
		"step error":      {inner, fault.Trap},
		"wrapped by fmt":  {fmt.Errorf("attempt 3: %w", inner), fault.Trap},
		"joined":          {errors.Join(io.EOF, inner), fault.Trap},
		"outer kind wins": {fault.Wrap(fault.Timeout, inner, "stopped"), fault.Timeout},
		"plain error":     {io.ErrUnexpectedEOF, fault.Internal},
		"context error":   {context.DeadlineExceeded, fault.Internal},
	} {
		require.Equal(t, tc.want, fault.KindOf(tc.err), name)
	}
}

// TestStepErrorChain: a StepError unwraps to its cause, so errors.Is and
// errors.As see through it, and its message says the kind.
func TestStepErrorChain(t *testing.T) {
	t.Parallel()
	cause := fmt.Errorf("reading /plugins/x.wasm: %w", io.ErrUnexpectedEOF)
	err := fault.Wrap(fault.PluginMissing, cause, "plugin x.wasm cannot be read")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, "plugin_missing: plugin x.wasm cannot be read", err.Error())

	wrapped := fmt.Errorf("step %q: %w", "fetch", err)
	var se *fault.StepError
	require.ErrorAs(t, wrapped, &se)
	require.Same(t, err, se)
	require.Equal(t, fault.PluginMissing, se.Kind)
	require.ErrorIs(t, wrapped, io.ErrUnexpectedEOF)

	// Without a message the cause speaks.
	require.Equal(t, "internal: unexpected EOF", fault.Wrap(fault.Internal, io.ErrUnexpectedEOF, "").Error())
	// New formats and has no cause.
	n := fault.New(fault.Budget, "repair budget of %d exhausted", 3)
	require.Equal(t, "budget: repair budget of 3 exhausted", n.Error())
	require.Nil(t, errors.Unwrap(n))
	require.False(t, errors.Is(n, io.EOF))
}

func TestKindOfTypedNilIsInternal(t *testing.T) {
	var se *fault.StepError
	var err error = se
	require.Equal(t, fault.Internal, fault.KindOf(err))
}
