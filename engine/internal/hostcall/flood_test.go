package hostcall

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

// engineLog is a Host for a real guest: the Attempt's capabilities, and a
// logger standing in for the engine's that counts what reaches it.
type engineLog struct {
	*Attempt
	mu    sync.Mutex
	bytes int
	lines []string
}

func (h *engineLog) Log(_ hclog.Level, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bytes += len(msg)
	h.lines = append(h.lines, msg)
}

func (h *engineLog) Heartbeat(context.Context) error { return nil }

// TestFloodingGuestIsRefused runs testdata/guests/c/quota.c, which floods
// one capability per mode, against the real capabilities and store: each
// flood ends at the limit with the documented status, recorded in the
// attempt's log, and what the host keeps stays within the limit.
func TestFloodingGuestIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wasm := testwasm.BuildC(t, filepath.Join(testwasm.ModuleRoot(t), "testdata", "guests", "c", "quota.c"))
	rt, err := guest.NewRuntime(ctx, guest.Config{})
	require.NoError(t, err)
	defer rt.Close(ctx)
	p, err := rt.Load(ctx, wasm, "")
	require.NoError(t, err)

	type flood struct {
		Ok     int    `json:"ok"`
		Status int32  `json:"status"`
		Error  string `json:"error"`
	}
	run := func(mode string, edit func(*taskfile.Limits)) (flood, *engineLog, *guest.Result) {
		// On disk: artifacts are written in chunks larger than what an
		// in-memory Badger keeps.
		a := setupIn(t, limited("flood", edit), store.Options{NoSync: true})
		h := &engineLog{Attempt: a}
		res, err := p.Run(ctx, guest.Request{TaskID: a.Lease.Task, Step: "flood", Attempt: 1, Input: json.RawMessage(`{"mode":"` + mode + `"}`)}, guest.Limits{}, h)
		require.NoError(t, err, "%s", res.Log)
		var out flood
		require.NoError(t, json.Unmarshal(res.Output, &out))
		return out, h, res
	}
	usage := func(a *Attempt) ledger.Usage {
		var u ledger.Usage
		require.NoError(t, a.Store.Read(func(r ledger.Reader) (err error) { u, err = r.Usage(a.Lease.Task); return err }))
		return u
	}

	// Default limits: 1,000 notes, 1,000 counter names.
	out, h, res := run("note", func(*taskfile.Limits) {})
	require.Equal(t, flood{Ok: 1000, Status: guest.StatusBudget, Error: out.Error}, out)
	require.Contains(t, out.Error, "limits.notes")
	_, notes := h.Progress()
	require.Len(t, notes, 1000)
	require.Contains(t, string(res.Log), "host refused call progress.note")

	out, h, _ = run("count", func(*taskfile.Limits) {})
	require.Equal(t, 1000, out.Ok)
	require.Equal(t, guest.StatusBudget, out.Status)
	counts, _ := h.Progress()
	require.Len(t, counts, 1000)

	out, h, _ = run("kv", func(l *taskfile.Limits) { l.KVBytes = 64 << 10 })
	require.Equal(t, guest.StatusBudget, out.Status, out.Error)
	require.Equal(t, 15, out.Ok, "15 entries of ~4 KiB fit 64 KiB")
	require.LessOrEqual(t, usage(h.Attempt).KV, int64(64<<10))
	require.Greater(t, usage(h.Attempt).KV, int64(60<<10))

	out, h, _ = run("artifact", func(l *taskfile.Limits) { l.ArtifactBytes = 1 << 20 })
	require.Equal(t, guest.StatusBudget, out.Status, out.Error)
	require.Equal(t, 16, out.Ok)
	require.Equal(t, int64(1<<20), usage(h.Attempt).Artifacts)

	out, h, res = run("log", func(l *taskfile.Limits) { l.LogPassthrough = 64 << 10 })
	require.Equal(t, flood{Ok: 2000}, out, "log is never refused")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.lines, 17, "16 messages of 4 KiB, then the notice, then nothing")
	require.Equal(t, "log passthrough suppressed after 65536 bytes", h.lines[16])
	require.Equal(t, 1, strings.Count(string(res.Log), "log passthrough suppressed"), "the attempt's own log says so once")
}
