package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/retention"
)

// allKeys returns every key of the store.
func allKeys(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	require.NoError(t, s.view(func(tx *kv.Tx) error {
		for _, k := range tx.Keys(nil) {
			out = append(out, string(k))
		}
		return nil
	}))
	return out
}

func keysOf(t *testing.T, s *Store, id string) []string {
	t.Helper()
	var out []string
	for _, k := range allKeys(t, s) {
		if strings.Contains(k, id) {
			out = append(out, k)
		}
	}
	return out
}

// fullTask submits a task with an idempotency key and gives it a record in
// every table: units, attempts, events, notes, counts, key/value, effects
// and an artifact. Its first step is committed; the second is not.
func (b *testBundle) fullTask(t *testing.T, key string) *ledger.Task {
	t.Helper()
	task, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "full", Steps: plainSteps("a", "b"), IdempotencyKey: key})
	require.NoError(t, err)
	require.True(t, created)
	l, err := b.s.Claim(b.ctx, ledger.ClaimRequest{Owner: b.s.Owner("w"), Max: 1, Task: task.ID})
	require.NoError(t, err)
	require.Len(t, l.Leases, 1)
	lease := l.Leases[0]
	require.NoError(t, b.s.KVPut(b.ctx, lease, "cursor", json.RawMessage(`1`), 64<<20))
	require.NoError(t, b.s.RecordEffect(b.ctx, lease, &ledger.Effect{Task: task.ID, Step: 0, Key: "mail", State: ledger.EffectIntent}))
	_, err = b.s.PutArtifact(b.ctx, ledger.Provenance{Name: "out.txt", Task: task.ID, Step: "a"}, []byte("artifact of "+task.ID), 1<<30)
	require.NoError(t, err)
	_, err = b.s.Commit(b.ctx, ledger.Result{Lease: lease, Output: json.RawMessage(`{}`), Log: []byte("log"),
		Counts: map[string]int64{"files": 2}, Notes: []ledger.Note{{Kind: "finding", Text: "found"}}})
	require.NoError(t, err)
	return task
}

func TestRemoveDeletesEveryRecordOfAFinishedTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.fullTask(t, "key-1")
	other := b.fullTask(t, "key-2")
	otherKeys := keysOf(t, b.s, other.ID)

	err := b.s.Remove(b.ctx, task.ID)
	var nf *ledger.NotFinishedError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, ledger.Running, nf.Status)
	require.ErrorContains(t, err, "cancel it first")
	require.ErrorIs(t, b.s.Remove(b.ctx, "01NOSUCHTASK0000000000000A"), ledger.ErrNotFound)

	_, err = b.s.Cancel(b.ctx, task.ID, "")
	require.NoError(t, err)
	require.NoError(t, b.s.Remove(b.ctx, task.ID))
	require.Empty(t, keysOf(t, b.s, task.ID), "every record of the task is gone")
	require.NotContains(t, allKeys(t, b.s), "k/key-1")
	require.Equal(t, otherKeys, keysOf(t, b.s, other.ID), "another task is untouched")
	_, err = b.s.Task(b.ctx, task.ID)
	require.ErrorIs(t, err, ledger.ErrNotFound)

	// The idempotency key is free again.
	again, created, err := b.s.Submit(b.ctx, ledger.NewTask{Name: "again", Steps: plainSteps("a"), IdempotencyKey: "key-1"})
	require.NoError(t, err)
	require.True(t, created)
	require.NotEqual(t, task.ID, again.ID)
}

// TestRemoveCutShortIsFinishedByRemove removes a task with thousands of
// records in bounded batches, and finishes a removal that stopped half way
// (as a crash would leave it: the first transactions done, the task record
// still there).
func TestRemoveCutShortIsFinishedByRemove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.fullTask(t, "")
	require.NoError(t, b.s.update(b.ctx, func(tx *kv.Tx) error {
		for i := range 2*retention.RemoveBatch + 10 {
			if err := tx.Put(kv.NoteKey(task.ID, uint64(1000+i)), []byte(`{}`)); err != nil {
				return err
			}
		}
		return nil
	}))
	_, err := b.s.Cancel(b.ctx, task.ID, "")
	require.NoError(t, err)

	// Half a removal: one batch of one table.
	n, _, err := b.s.retention.DeleteAll(b.ctx, 1, []byte("n/"+task.ID+"/"))
	require.NoError(t, err)
	require.Equal(t, retention.RemoveBatch, n)
	got, err := b.s.Task(b.ctx, task.ID)
	require.NoError(t, err, "the task record goes last")
	require.Equal(t, ledger.Cancelled, got.Status)

	require.NoError(t, b.s.Remove(b.ctx, task.ID))
	require.Empty(t, keysOf(t, b.s, task.ID))
}

func TestGCCollectsUnreferencedBlobsAndOrphanChunks(t *testing.T) {
	t.Parallel()
	b := setupDisk(t)
	s := b.s

	wasm, sum := module(ledger.ArtifactChunk+10, 3)
	live := b.submitPinned(t, wasm, sum)
	done := b.submitPinned(t, wasm, sum)
	_, err := s.PutArtifact(b.ctx, ledger.Provenance{Name: "a.txt", Task: done.ID, Step: "a"}, []byte("only done's"), 1<<30)
	require.NoError(t, err)
	shared, err := s.PutArtifact(b.ctx, ledger.Provenance{Name: "s.txt", Task: done.ID, Step: "a"}, []byte("shared"), 1<<30)
	require.NoError(t, err)
	_, err = s.PutArtifact(b.ctx, ledger.Provenance{Name: "s.txt", Task: live.ID, Step: "a"}, []byte("shared"), 1<<30)
	require.NoError(t, err)
	// A put that crashed after two chunks: chunks and no blob record.
	_, orphan := module(10, 9)
	require.NoError(t, s.update(b.ctx, func(tx *kv.Tx) error {
		return errors.Join(tx.Put(kv.ChunkKey(orphan, 0), make([]byte, 100)), tx.Put(kv.ChunkKey(orphan, 1), make([]byte, 50)))
	}))

	_, err = s.Cancel(b.ctx, done.ID, "")
	require.NoError(t, err)
	require.NoError(t, s.Remove(b.ctx, done.ID))
	st, err := s.GC(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Blobs, "the artifact only the removed task referred to")
	require.Equal(t, int64(len("only done's")), st.BlobBytes)
	require.Equal(t, 1, st.Orphans)
	require.Equal(t, int64(150), st.OrphanBytes)

	got, err := s.Module(sum)
	require.NoError(t, err, "the module the live task pins is kept")
	require.True(t, bytes.Equal(wasm, got))
	buf := make([]byte, 10)
	n, _, err := s.ReadArtifact(shared, 0, buf)
	require.NoError(t, err, "an artifact a live task refers to is kept")
	require.Equal(t, "shared", string(buf[:n]))
	for _, k := range allKeys(t, s) {
		require.NotContains(t, k, orphan)
	}

	// Once no task pins the module, it goes too.
	_, err = s.Cancel(b.ctx, live.ID, "")
	require.NoError(t, err)
	require.NoError(t, s.Remove(b.ctx, live.ID))
	st, err = s.GC(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Blobs)
	var left []string
	for _, k := range allKeys(t, s) {
		if k[0] == 'B' || k[0] == 'b' {
			left = append(left, k)
		}
	}
	require.Empty(t, left)
}

// TestGCWhilePutsRun runs GC again and again while artifacts and modules
// are being stored: every blob whose put returned is complete afterwards.
func TestGCWhilePutsRun(t *testing.T) {
	t.Parallel()
	b := setupDisk(t)
	task := b.submit(t, plainSteps("a"))
	stop := make(chan struct{})
	gcDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				gcDone <- nil
				return
			default:
			}
			if _, err := b.s.GC(b.ctx); err != nil {
				gcDone <- err
				return
			}
		}
	}()
	var puts sync.WaitGroup
	refs := make([]string, 6)
	artErrs := make([]error, len(refs))
	for i := range refs {
		puts.Add(1)
		go func() {
			defer puts.Done()
			data, _ := module(2*ledger.ArtifactChunk+i, byte(i))
			refs[i], artErrs[i] = b.s.PutArtifact(b.ctx, ledger.Provenance{Name: fmt.Sprint(i), Task: task.ID, Step: "a"}, data, 1<<30)
		}()
	}
	modErrs := make([]error, 4)
	for i := range modErrs {
		puts.Add(1)
		go func() {
			defer puts.Done()
			wasm, sum := module(ledger.ArtifactChunk+i, byte(100+i))
			_, _, modErrs[i] = b.s.Submit(b.ctx, ledger.NewTask{Name: "m", Steps: plainSteps("a"), Manifest: ledger.Manifest{
				Plugins: map[string]ledger.PluginPin{"a": {Path: "a.wasm", SHA256: sum}}}, Modules: map[string][]byte{sum: wasm}})
		}()
	}
	puts.Wait()
	close(stop)
	require.NoError(t, <-gcDone)
	for i, ref := range refs {
		require.NoError(t, artErrs[i])
		data, _ := module(2*ledger.ArtifactChunk+i, byte(i))
		buf := make([]byte, len(data)+1)
		n, _, err := b.s.ReadArtifact(ref, 0, buf)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, buf[:n]))
	}
	for i, err := range modErrs {
		require.NoError(t, err)
		wasm, sum := module(ledger.ArtifactChunk+i, byte(100+i))
		got, err := b.s.Module(sum)
		require.NoError(t, err)
		require.True(t, bytes.Equal(wasm, got))
	}
	// One more GC with nothing running keeps them all.
	st, err := b.s.GC(b.ctx)
	require.NoError(t, err)
	require.Zero(t, st.Blobs+st.Orphans)
}

// TestValueLogGCSyncsBeforeItDeletes: value-log GC moves the live values of
// a mostly deleted value-log file to the newest one; the store syncs what
// it moved while the old file still exists, so a power loss at any moment
// keeps one synced copy of every value.
func TestValueLogGCSyncsBeforeItDeletes(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	vlogs := func() map[string]bool {
		out := map[string]bool{}
		entries, err := os.ReadDir(f.dir)
		require.NoError(t, err)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".vlog") {
				out[e.Name()] = true
			}
		}
		return out
	}
	opts := Options{memTable: 1 << 20, vlogFile: 1 << 20}
	s := f.mustOpen(t, opts)
	big := bytes.Repeat([]byte("v"), kv.ValueThreshold+1)
	for i := range 40 {
		require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error {
			t.Durable = true
			return t.Put(fmt.Appendf(nil, "x/%03d", i), big)
		}))
	}
	for i := range 40 {
		if i%8 == 0 {
			continue // one value in eight stays: GC must move it
		}
		require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error {
			t.Durable = true
			return t.Del(fmt.Appendf(nil, "x/%03d", i))
		}))
	}
	// Badger counts a deleted value when a compaction drops its record,
	// and compacts only past one level: small records written after them
	// make the tables that carry them down.
	filler := bytes.Repeat([]byte("f"), 200)
	for b := range 400 {
		require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error {
			for i := range 100 {
				if err := t.Put(fmt.Appendf(nil, "y/%03d/%04d", b, i), filler); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	require.NoError(t, s.Close())

	var seen []map[string]bool // the value logs there at each sync
	opts.syncFn = func(sync func() error) error {
		seen = append(seen, vlogs())
		return sync()
	}
	s = f.mustOpen(t, opts)
	before := vlogs()
	seen = nil
	files, err := s.ReclaimSpace(f.ctx)
	require.NoError(t, err)
	require.Positive(t, files, "a value-log file was rewritten")
	after := vlogs()
	deleted := 0
	for name := range before {
		if after[name] {
			continue
		}
		deleted++
		synced := false
		for _, present := range seen {
			synced = synced || present[name]
		}
		require.True(t, synced, "%s was deleted with no sync while it still existed: what GC moved out of it was not on disk yet", name)
	}
	require.Positive(t, deleted)
	for i := 0; i < 40; i += 8 {
		require.NoError(t, s.view(func(tx *kv.Tx) error {
			v, err := tx.GetRaw(fmt.Appendf(nil, "x/%03d", i))
			require.NoError(t, err)
			require.Equal(t, big, v)
			return nil
		}))
	}
	require.NoError(t, s.Close())
}
