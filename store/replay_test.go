package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// recordings returns n fake recordings by fake request sha256s.
func recordings(n int, tag string) map[string][]byte {
	out := map[string][]byte{}
	for i := range n {
		sum := sha256.Sum256(fmt.Appendf(nil, "request %d", i))
		out[hex.EncodeToString(sum[:])] = fmt.Appendf(nil, `{"response": %q}`, fmt.Sprint(tag, i))
	}
	return out
}

func (b *testBundle) submitReplay(t *testing.T, set *ledger.ReplaySet) *ledger.Task {
	t.Helper()
	wasm, sum := module(100, 1)
	pin := set.Pin()
	task, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a"), Manifest: ledger.Manifest{
		Plugins: map[string]ledger.PluginPin{"a": {Path: "/gone/a.wasm", SHA256: sum}}, ModelReplay: &pin,
	}, Modules: map[string][]byte{sum: wasm}, Replay: set})
	require.NoError(t, err)
	require.True(t, created)
	return task
}

// TestReplaySetIsStoredWithTheTask: a replay set submitted with a task is
// read back from the store by the pin of the task's manifest, stored once
// however many tasks replay it, and kept by gc until no task pins it.
func TestReplaySetIsStoredWithTheTask(t *testing.T) {
	t.Parallel()
	b := setupDisk(t)
	recs := recordings(3, "a")
	set, err := ledger.NewReplaySet("/recorded", recs)
	require.NoError(t, err)
	pin := set.Pin()
	require.Equal(t, 3, pin.Recordings)
	require.Equal(t, "/recorded", pin.Dir)
	again, err := ledger.NewReplaySet("/elsewhere", recs)
	require.NoError(t, err)
	require.Equal(t, pin.SHA256, again.Pin().SHA256, "the set's sha256 is its content's, wherever it came from")
	other, err := ledger.NewReplaySet("/recorded", recordings(3, "b"))
	require.NoError(t, err)
	require.NotEqual(t, pin.SHA256, other.Pin().SHA256)

	first := b.submitReplay(t, set)
	second := b.submitReplay(t, set)
	require.NoError(t, b.s.Read(func(r ledger.Reader) error {
		m, err := r.Manifest(first.ID)
		require.NoError(t, err)
		require.Equal(t, pin, *m.ModelReplay)
		return nil
	}))

	idx, err := b.s.ReplayIndex(pin.SHA256)
	require.NoError(t, err)
	require.Len(t, idx, 3)
	for req, rec := range recs {
		got, err := b.s.ReplayRecording(idx[req])
		require.NoError(t, err)
		require.Equal(t, string(rec), string(got))
	}
	var blobs int
	require.NoError(t, b.s.view(func(tx *kv.Tx) error { blobs = len(tx.Keys([]byte("B/"))); return nil }))
	require.Equal(t, 1+3+1, blobs, "the module, three recordings and the index, once for both tasks")

	for i, task := range []*ledger.Task{first, second} {
		_, err = b.s.Cancel(b.ctx, task.ID, "")
		require.NoError(t, err)
		require.NoError(t, b.s.Remove(b.ctx, task.ID))
		st, err := b.s.GC(b.ctx)
		require.NoError(t, err)
		if i == 0 {
			require.Zero(t, st.Blobs, "the other task still pins the set")
			_, err = b.s.ReplayIndex(pin.SHA256)
			require.NoError(t, err)
		} else {
			require.Equal(t, 5, st.Blobs, "no task pins the set or the module")
			_, err = b.s.ReplayIndex(pin.SHA256)
			require.ErrorIs(t, err, ledger.ErrNotFound)
		}
	}
}

func TestReplaySetRefusals(t *testing.T) {
	t.Parallel()
	_, err := ledger.NewReplaySet("/d", map[string][]byte{"not-a-sum": nil})
	require.ErrorContains(t, err, "not a request sha256")

	big := map[string][]byte{}
	for i, chunk := 0, make([]byte, ledger.MaxReplayBytes/4+1); i < 4; i++ {
		sum := sha256.Sum256([]byte{byte(i)})
		big[hex.EncodeToString(sum[:])] = chunk
	}
	_, err = ledger.NewReplaySet("/d", big)
	require.ErrorContains(t, err, fmt.Sprintf("more than %d bytes", ledger.MaxReplayBytes))

	b := setupDisk(t)
	set, err := ledger.NewReplaySet("/d", recordings(1, "x"))
	require.NoError(t, err)
	_, _, err = b.s.Submit(b.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a"), Manifest: ledger.Manifest{Plugins: map[string]ledger.PluginPin{}}, Replay: set})
	require.ErrorContains(t, err, "does not pin the replay set")

	_, err = blob.ParseReplayIndex("x", []byte(strings.Repeat("a", 64)+"\n"))
	require.ErrorContains(t, err, "the store is damaged")
}
