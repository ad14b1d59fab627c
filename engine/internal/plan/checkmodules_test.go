package plan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCheckModulesInParallel: the distinct plugins of a task are checked
// (compiled) at once, as many as there are processors, each once; the
// diagnostics come in step order whatever order the checks end in.
func TestCheckModulesInParallel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, p := range []string{"a.wasm", "b.wasm", "c.wasm"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("\x00asm\x01\x00\x00\x00"), 0o644))
	}
	path := filepath.Join(dir, "task.hcl")
	require.NoError(t, os.WriteFile(path, []byte(`
task "t" {
  step "one" {
    plugin = "a.wasm"
  }
  step "two" {
    plugin = "b.wasm"
  }
  step "three" {
    plugin = "a.wasm"
  }
  step "four" {
    plugin = "c.wasm"
  }
}
`), 0o644))
	want := min(3, runtime.GOMAXPROCS(0))
	var mu sync.Mutex
	calls := map[string]int{}
	all := make(chan struct{})
	check := func(_ context.Context, p string) error {
		mu.Lock()
		calls[filepath.Base(p)]++
		if len(calls) == want {
			close(all)
		}
		mu.Unlock()
		// Every check waits for the others to start: checked one at a
		// time, none of them would.
		select {
		case <-all:
		case <-time.After(time.Minute):
			return errors.New("the other checks did not start meanwhile")
		}
		return errors.New("refused: " + filepath.Base(p))
	}
	_, _, diags := Validate(context.Background(), path, check)
	require.Equal(t, map[string]int{"a.wasm": 1, "b.wasm": 1, "c.wasm": 1}, calls)
	require.Len(t, diags, 4)
	for i, step := range []string{"one", "two", "three", "four"} {
		require.Contains(t, diags[i].Detail, `Step "`+step+`"`)
		require.Contains(t, diags[i].Detail, "refused:", diags[i].Detail)
	}
}
