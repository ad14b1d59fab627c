package guest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// TestGoSDKHostCalls runs the Go SDK's Heartbeat and Log against this host
// (testdata/guests/go/sdkhost): the statuses the host returns must reach the
// plugin as the SDK's errors, and what the SDK sends must be what the host
// accepts. The SDK's own tests check the same mapping against a fake host;
// this is the check that both sides agree.
func TestGoSDKHostCalls(t *testing.T) {
	t.Parallel()
	p := loadAs(t, sharedRuntime(t), "sdkhost", testwasm.GoGuest(t, "sdkhost"))
	run := func(t *testing.T, input string, lim Limits, host *testHost) (*Result, error) {
		t.Helper()
		return p.Run(context.Background(), Request{Step: "s", Attempt: 2, Input: json.RawMessage(input)}, lim, host)
	}

	t.Run("lease held", func(t *testing.T) {
		t.Parallel()
		host := &testHost{}
		res, err := run(t, `{"mode":"heartbeat","n":2}`, Limits{}, host)
		require.NoError(t, err)
		require.JSONEq(t, `{"heartbeats":[0,0]}`, string(res.Output))
		require.Equal(t, 2, host.beats)
	})
	t.Run("budget spent", func(t *testing.T) {
		t.Parallel()
		host := &testHost{}
		res, err := run(t, `{"mode":"heartbeat","n":2}`, Limits{MaxHostCalls: 1}, host)
		require.NoError(t, err)
		require.JSONEq(t, `{"heartbeats":[0,-7]}`, string(res.Output), "the second heartbeat is over budget: sdk.ErrBudget")
		require.Equal(t, 1, host.beats)
	})
	t.Run("lease lost", func(t *testing.T) {
		t.Parallel()
		lost := errors.New("lease taken over by worker-2")
		host := &testHost{leaseErr: lost}
		_, err := run(t, `{"mode":"heartbeat","n":1}`, Limits{}, host)
		requireKind(t, err, fault.Internal, "lease lost", "worker-2")
		require.ErrorIs(t, err, lost)
		require.Equal(t, 1, host.beats)
	})
	t.Run("log", func(t *testing.T) {
		t.Parallel()
		host := &testHost{}
		res, err := run(t, `{"mode":"log"}`, Limits{}, host)
		require.NoError(t, err)
		require.JSONEq(t, `{"logged":true}`, string(res.Output))
		require.Equal(t, []string{"warn: " + strings.Repeat("é", LogMax/2), "info: step s attempt 2"}, host.logs)
	})
}

// TestGoSDKConstants: the SDK's copies of the host's status codes and size
// limits are the host's (the C header is checked against the SDK in
// plugins/sdk/c), and both speak the one ABI version.
func TestGoSDKConstants(t *testing.T) {
	t.Parallel()
	require.Equal(t, ABIVersion, sdk.ABI)
	statuses := map[int32]sdk.Errno{
		StatusRange: sdk.ErrRange, StatusTooLarge: sdk.ErrTooLarge, StatusInvalid: sdk.ErrInvalid,
		StatusDenied: sdk.ErrDenied, StatusNotFound: sdk.ErrNotFound, StatusLeaseLost: sdk.ErrLeaseLost,
		StatusBudget: sdk.ErrBudget, StatusUnavailable: sdk.ErrUnavailable, StatusInternal: sdk.ErrInternal,
		StatusPaused: sdk.ErrPaused,
	}
	for host, s := range statuses {
		require.Equal(t, host, int32(s), "status %v", s)
	}
	require.Equal(t, LogMax, sdk.LogMax)
	require.Equal(t, CallRequestMax, sdk.CallRequestMax)
	require.Equal(t, ArtifactMetaMax, sdk.ArtifactMetaMax)
	require.Equal(t, ArtifactDataMax, sdk.ArtifactDataMax)
}
