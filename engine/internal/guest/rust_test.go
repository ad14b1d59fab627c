package guest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// buildRust builds testdata/guests/rust/NAME/main.rs with Debian's rustc.
func buildRust(t testing.TB, name string) string {
	t.Helper()
	return testwasm.BuildRust(t, guestPath(t, filepath.Join("rust", name, "main.rs")))
}

// TestRustGuest runs a Rust plugin (std only, no crates; host functions
// declared with #[link(wasm_import_module = "lhengine_v1")]) through the
// same envelope, host calls and failure classes as the C and Go guests.
func TestRustGuest(t *testing.T) {
	t.Parallel()
	path := buildRust(t, "conformance")
	wasm, err := os.ReadFile(path)
	require.NoError(t, err)
	info, err := Inspect(context.Background(), wasm)
	require.NoError(t, err)
	require.Equal(t, "1", info.ABI, "the Rust guest imports from %s", HostModule)
	p := loadAs(t, sharedRuntime(t), "rust", path)

	item := &Item{Index: 3, Key: json.RawMessage(`"page-3"`), Value: json.RawMessage(`{"url":"/a?b=<c>"}`)}
	t.Run("echo", func(t *testing.T) {
		t.Parallel()
		input := `{"mode":"echo","n":[1,2.5,-3e2,"ü\"x\u00e9\ud83d\ude00"],"nested":{"a":null,"b":[true,false,{}]}}`
		res, err := p.Run(context.Background(), Request{TaskID: "t1", TaskName: "report", Step: "verify", Attempt: 2, Item: item,
			Repair: &Repair{Count: 1, Reason: "missing section"}, Input: json.RawMessage(input)}, Limits{}, nil)
		require.NoError(t, err)
		require.JSONEq(t, `{"step":"verify","attempt":2,"item":{"index":3,"key":"page-3","value":{"url":"/a?b=<c>"}},"input":`+input+`}`,
			string(res.Output))
	})
	t.Run("log and heartbeat", func(t *testing.T) {
		t.Parallel()
		host := &testHost{}
		res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"version"}`)}, Limits{}, host)
		require.NoError(t, err)
		require.JSONEq(t, `{"log":0,"heartbeat":0,"version":1}`, string(res.Output))
		require.Equal(t, []string{"info: hello from rust"}, host.logs)
		require.Equal(t, 1, host.beats)
		require.Contains(t, string(res.Log), "[info] hello from rust\n")
		require.Equal(t, 3, res.HostCalls)
	})
	t.Run("host call budget", func(t *testing.T) {
		t.Parallel()
		res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"version"}`)},
			Limits{MaxHostCalls: 2}, &testHost{})
		require.NoError(t, err)
		require.JSONEq(t, `{"log":0,"heartbeat":0,"version":-7}`, string(res.Output))
	})
	t.Run("lease lost", func(t *testing.T) {
		t.Parallel()
		lost := errors.New("lease taken over by worker-2")
		host := &testHost{leaseErr: lost}
		_, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"version"}`)}, Limits{}, host)
		requireKind(t, err, fault.Internal, "lease lost", "worker-2")
		require.ErrorIs(t, err, lost)
		require.Equal(t, 1, host.beats)
	})
	t.Run("error", func(t *testing.T) {
		t.Parallel()
		_, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"error"}`)}, Limits{}, nil)
		requireKind(t, err, fault.PluginError, "plugin rust: requested error")
	})
	t.Run("repair", func(t *testing.T) {
		t.Parallel()
		res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"repair"}`)}, Limits{}, nil)
		require.NoError(t, err)
		require.True(t, res.NeedsRepair)
		require.Equal(t, "requested repair", res.RepairReason)
	})
	t.Run("clock", func(t *testing.T) {
		t.Parallel()
		// The guest sleeps 30 s; the attempt's 20 s limit would stop it if
		// the sleep were real.
		res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"clock"}`)},
			Limits{Timeout: 20 * time.Second}, nil)
		require.NoError(t, err)
		var out struct {
			WallSecs int64 `json:"wall_secs"`
			SleptMS  int64 `json:"slept_ms"`
		}
		require.NoError(t, json.Unmarshal(res.Output, &out))
		require.Equal(t, int64(1640995200), out.WallSecs, "the guest's wall clock starts at 2022-01-01T00:00:00Z")
		require.Less(t, out.SleptMS, int64(1000), "the guest's monotonic clock does not advance while it sleeps")
	})
	t.Run("panic traps", func(t *testing.T) {
		t.Parallel()
		res, err := p.Run(context.Background(), Request{Step: "s", Attempt: 1, Input: json.RawMessage(`{"mode":"panic"}`)}, Limits{}, nil)
		requireKind(t, err, fault.Trap)
		require.Contains(t, string(res.Log), "requested panic")
	})
}
