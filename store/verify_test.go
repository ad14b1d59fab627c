package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/filecheck"
	"github.com/lhengine/lhengine/store/internal/kv"
)

func checksOf(r *Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Check)
	}
	return out
}

func TestVerifyWholeStore(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	f.build(t, 3)
	rep, err := Verify(f.dir, nil)
	require.NoError(t, err)
	require.False(t, rep.Damaged(), "%v", rep.Findings)
	require.Equal(t, 3, rep.Tasks)
	require.Positive(t, rep.Keys)
	require.Positive(t, rep.Tables)
	require.Positive(t, rep.Mark)
	require.Equal(t, rep.Mark, rep.Sync)

	// A store that was not closed (its log must be replayed) is verified too.
	s := f.mustOpen(t, Options{})
	f.commitTasks(t, s, 2)
	img := crashImage(t, f)
	require.NoError(t, s.Close())
	rep, err = Verify(img.dir, nil)
	require.NoError(t, err)
	require.False(t, rep.Damaged(), "%v", rep.Findings)
	require.Equal(t, 5, rep.Tasks)
}

func TestVerifyReportsDamage(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		damage func(t *testing.T, f *diskFixture)
		check  string
	}{
		"no manifest": {func(t *testing.T, f *diskFixture) {
			require.NoError(t, os.Remove(filepath.Join(f.dir, "MANIFEST")))
		}, "manifest"},
		"missing table": {func(t *testing.T, f *diskFixture) {
			require.NoError(t, os.Remove(filesWithSuffix(t, f.dir, ".sst")[0]))
		}, "tables"},
		"flipped table": {func(t *testing.T, f *diskFixture) {
			flipByte(t, filesWithSuffix(t, f.dir, ".sst")[0], 100)
		}, "checksum"},
		"rolled back": {func(t *testing.T, f *diskFixture) {
			require.NoError(t, filecheck.WriteMark(filecheck.MarkPath(f.dir), 1000))
		}, "high-water"},
		"undecodable record and orphan unit": {func(t *testing.T, f *diskFixture) {
			s := f.mustOpen(t, Options{})
			require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error {
				t.Durable = true
				if err := t.Put(kv.TaskKey("zz"), []byte("{not json")); err != nil {
					return err
				}
				return t.PutJSON(kv.UnitKey("gone", 0, 0), &ledger.Unit{})
			}))
			require.NoError(t, s.Close())
		}, "invariant"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newDiskFixture(t)
			f.build(t, 3)
			c.damage(t, f)
			rep, err := Verify(f.dir, nil)
			require.NoError(t, err)
			require.True(t, rep.Damaged())
			require.Contains(t, checksOf(rep), c.check, "%v", rep.Findings)
		})
	}
}

func TestVerifyFindsUndecodableRecord(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	f.build(t, 1)
	s := f.mustOpen(t, Options{})
	require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error {
		t.Durable = true
		return t.Put(kv.EffectKey("x", 0, 0, "k"), []byte("\x00\x01"))
	}))
	require.NoError(t, s.Close())
	rep, err := Verify(f.dir, nil)
	require.NoError(t, err)
	require.Contains(t, checksOf(rep), "record")
	require.Contains(t, checksOf(rep), "invariant")
}

func TestCorruptValueLogIsReportedNotRead(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T, vlog string){
		"flipped":   func(t *testing.T, vlog string) { flipByte(t, vlog, 100<<10) },
		"truncated": func(t *testing.T, vlog string) { require.NoError(t, os.Truncate(vlog, 100<<10)) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newDiskFixture(t)
			f.build(t, 1)
			s := f.mustOpen(t, Options{})
			big := make([]byte, 200<<10) // above the value threshold: kept in the value log
			for i := range big {
				big[i] = byte(i * 7)
			}
			key := []byte("b/0000/00000000")
			require.NoError(t, s.update(f.ctx, func(t *kv.Tx) error {
				t.Durable = true
				return t.Put(key, big)
			}))
			require.NoError(t, s.Close())
			var vlog string
			for _, p := range filesWithSuffix(t, f.dir, ".vlog") {
				if fi, err := os.Stat(p); err == nil && fi.Size() > 100<<10 {
					vlog = p
				}
			}
			require.NotEmpty(t, vlog)
			damage(t, vlog)

			s, err := f.open(t, Options{})
			if err == nil {
				var readErr error
				require.NoError(t, s.view(func(tx *kv.Tx) error {
					_, readErr = tx.GetRaw(key)
					return nil
				}))
				require.ErrorIs(t, readErr, ErrDamaged, "a damaged value is an error, never other bytes")
				require.ErrorContains(t, readErr, "value log")
				require.NoError(t, s.Close())
			} else {
				require.ErrorIs(t, err, ErrDamaged)
			}
			rep, err := Verify(f.dir, nil)
			require.NoError(t, err)
			require.Contains(t, checksOf(rep), "checksum", "%v", rep.Findings)
		})
	}
}

// TestVerifyFindsMissingBlobParts: a replay set a manifest pins that lost a
// recording, and a module that lost a chunk, are findings.
func TestVerifyFindsMissingBlobParts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	b := &testBundle{s: s, ctx: t.Context()}
	set, err := ledger.NewReplaySet("/recorded", recordings(3, "a"))
	require.NoError(t, err)
	task := b.submitReplay(t, set)
	require.NoError(t, s.Close())
	rep, err := Verify(dir, nil)
	require.NoError(t, err)
	require.False(t, rep.Damaged(), "%v", rep.Findings)

	s, err = Open(dir, Options{})
	require.NoError(t, err)
	idx, err := s.ReplayIndex(set.Pin().SHA256)
	require.NoError(t, err)
	m := new(ledger.Manifest)
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		m, err = r.Manifest(task.ID)
		return err
	}))
	require.NoError(t, s.update(t.Context(), func(t *kv.Tx) error {
		t.Durable = true
		for _, file := range idx {
			return t.Del(kv.BlobKey(file)) // one recording
		}
		return nil
	}))
	require.NoError(t, s.update(t.Context(), func(t *kv.Tx) error {
		t.Durable = true
		return t.Del(kv.ChunkKey(m.Plugins["a"].SHA256, 0))
	}))
	require.NoError(t, s.Close())
	rep, err = Verify(dir, nil)
	require.NoError(t, err)
	var details []string
	for _, f := range rep.Findings {
		details = append(details, f.Detail)
	}
	require.Len(t, details, 2, "%v", details)
	require.Contains(t, strings.Join(details, "\n"), "1 of the 3 recordings of replay set "+set.Pin().SHA256+" are not in the store")
	require.Contains(t, strings.Join(details, "\n"), "blob has 0 of its 1 chunks")
}
