package guest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lhengine/lhengine/internal/testwasm"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedRT != nil {
		sharedRT.Close(context.Background())
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

var (
	sharedOnce sync.Once
	sharedRT   *Runtime
	sharedErr  error
)

// sharedRuntime is one Runtime for the package's tests, as the engine has
// one per process; tests that need their own (cache dir, options) make it.
func sharedRuntime(t testing.TB) *Runtime {
	t.Helper()
	sharedOnce.Do(func() {
		// The compilation cache makes repeat runs fast (Go guests take
		// about a second each to compile) and exercises the disk cache.
		sharedRT, sharedErr = NewRuntime(context.Background(), Config{CacheDir: sharedCacheDir(t)})
	})
	require.NoError(t, sharedErr)
	return sharedRT
}

// ownRuntime is a Runtime of the test's own, closed when it ends.
func ownRuntime(t testing.TB, cfg Config) *Runtime {
	t.Helper()
	r, err := NewRuntime(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// sharedCacheDir is the wazero compilation cache of the package's tests.
func sharedCacheDir(t testing.TB) string {
	return filepath.Join(testwasm.CacheDir(t), "wazero")
}

// guestPath is the path of a guest source under testdata/guests.
func guestPath(t testing.TB, rel string) string {
	t.Helper()
	return filepath.Join(testwasm.ModuleRoot(t), "testdata", "guests", rel)
}

// loadAs loads the module at path under the given plugin name.
func loadAs(t testing.TB, r *Runtime, name, path string) *Plugin {
	t.Helper()
	wasm, err := os.ReadFile(path)
	require.NoError(t, err)
	p, err := r.LoadBytes(context.Background(), name, wasm)
	require.NoError(t, err)
	return p
}

// testHost records what the guest asked of the host.
type testHost struct {
	mu       sync.Mutex
	logs     []string
	beats    int
	leaseErr error // returned by Heartbeat

	// The capabilities (caps_test.go).
	calls     []string // "name request" of Call and PutArtifact, requests normalised
	reads     int      // ReadArtifact calls
	kv        map[string]json.RawMessage
	effects   map[string]bool
	artifacts map[string][]byte
}

func (h *testHost) Log(level hclog.Level, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, level.String()+": "+msg)
}

func (h *testHost) Heartbeat(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beats++
	return h.leaseErr
}
