package engine_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestStepSeesTheAttemptsTime: a step's request carries "now", the time
// the ledger recorded when it leased the attempt, and the guest's wall
// clock starts there: the real time, not a fixed date.
func TestStepSeesTheAttemptsTime(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "clock" {
  step "stamp" {
    plugin = "step.wasm"
    input  = { mode = "now" }
  }
}`)
	before := time.Now().Truncate(time.Second)
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	after := time.Now()
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	var out struct {
		Now  string `json:"now"`
		Wall int64  `json:"wall"`
	}
	require.NoError(t, json.Unmarshal(got.Output, &out), string(got.Output))
	stamp, err := time.Parse(time.RFC3339Nano, out.Now)
	require.NoError(t, err, "the request carries now: %s", got.Output)
	require.False(t, stamp.Before(before) || stamp.After(after), "now %s is the real time (between %s and %s)", stamp, before, after)
	require.Equal(t, stamp.Unix(), out.Wall, "the guest's wall clock starts at now")

	var units []*ledger.Unit
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		units, err = r.Units(task.ID, 0)
		return err
	}))
	require.Len(t, units, 1)
	require.True(t, units[0].Claimed.Equal(stamp), "now is the attempt's recorded time: %s, recorded %s", stamp, units[0].Claimed)
}
