package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/filecheck"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// diskFixture is a store directory on disk inside its own home, so that the
// high-water mark beside it belongs to the test.
type diskFixture struct {
	home string
	dir  string
	ctx  context.Context
}

func newDiskFixture(t *testing.T) *diskFixture {
	t.Helper()
	home := t.TempDir()
	return &diskFixture{home: home, dir: filepath.Join(home, "store"), ctx: context.Background()}
}

// open opens the fixture's store with small files and a high-water mark
// written after every sync.
func (f *diskFixture) open(t *testing.T, o Options) (*Store, error) {
	t.Helper()
	if o.markEvery == 0 {
		o.markEvery = time.Nanosecond
	}
	if o.memTable == 0 {
		o.memTable = 1 << 20
	}
	return Open(f.dir, o)
}

func (f *diskFixture) mustOpen(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := f.open(t, o)
	require.NoError(t, err)
	return s
}

// commitTasks submits n two-step tasks and commits the first step of each.
func (f *diskFixture) commitTasks(t *testing.T, s *Store, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		task, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b")})
		require.NoError(t, err)
		c, err := s.Claim(f.ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, Task: task.ID})
		require.NoError(t, err)
		require.Len(t, c.Leases, 1)
		_, err = s.Commit(f.ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`{"ok":true}`)})
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	return ids
}

// build makes a closed store holding n committed tasks.
func (f *diskFixture) build(t *testing.T, n int) []string {
	t.Helper()
	s := f.mustOpen(t, Options{})
	ids := f.commitTasks(t, s, n)
	require.NoError(t, s.Close())
	return ids
}

// builtWithTables is a closed store of 3 tasks, and its tables.
func builtWithTables(t *testing.T) (*diskFixture, []string) {
	t.Helper()
	f := newDiskFixture(t)
	f.build(t, 3)
	ssts := filesWithSuffix(t, f.dir, ".sst")
	require.NotEmpty(t, ssts)
	return f, ssts
}

func countTasks(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		tasks, err := r.Tasks()
		n = len(tasks)
		return err
	}))
	return n
}

func filesWithSuffix(t *testing.T, dir, suffix string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// copyDir copies the regular files of src into dst (the image of a store at
// one moment: what a crash, a backup or a restore leaves).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		copyFile(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// requireDamaged checks that err is a *DamagedError with a finding of check.
func requireDamaged(t *testing.T, err error, check string) *DamagedError {
	t.Helper()
	require.ErrorIs(t, err, ErrDamaged)
	var de *DamagedError
	require.ErrorAs(t, err, &de)
	var checks []string
	for _, f := range de.Findings {
		checks = append(checks, f.Check)
	}
	require.Contains(t, checks, check, "%v", err)
	return de
}

func TestOpenRefusesDataFilesWithoutManifest(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	f.build(t, 3)
	require.NoError(t, os.Remove(filepath.Join(f.dir, "MANIFEST")))

	_, err := f.open(t, Options{})
	requireDamaged(t, err, "manifest")
	require.Contains(t, err.Error(), "MANIFEST")
	require.Contains(t, err.Error(), "--allow-damaged")
	require.NotEmpty(t, filesWithSuffix(t, f.dir, ".sst"), "a refused open deletes nothing")

	// Allowed, it opens (the tables set aside, not deleted), and says so.
	var logs bytes.Buffer
	s, err := f.open(t, Options{AllowDamaged: true, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
	require.NoError(t, err)
	require.Equal(t, 0, countTasks(t, s))
	require.NoError(t, s.Close())
	require.Contains(t, logs.String(), "damaged")
	aside, err := filepath.Glob(filepath.Join(f.dir, "damaged-*", "*.sst"))
	require.NoError(t, err)
	require.NotEmpty(t, aside)
}

func TestOpenRefusesManifestNamingMissingTable(t *testing.T) {
	t.Parallel()
	f, ssts := builtWithTables(t)
	require.NoError(t, os.Remove(ssts[0]))

	_, err := f.open(t, Options{})
	requireDamaged(t, err, "tables")
	require.Contains(t, err.Error(), filepath.Base(ssts[0]))
}

func TestOpenRefusesCorruptTable(t *testing.T) {
	t.Parallel()
	f, ssts := builtWithTables(t)
	fi, err := os.Stat(ssts[0])
	require.NoError(t, err)
	for _, off := range []int64{10, fi.Size() / 2} {
		flipByte(t, ssts[0], off)
		_, err = f.open(t, Options{})
		requireDamaged(t, err, "checksum")
		require.Contains(t, err.Error(), ssts[0])
		flipByte(t, ssts[0], off)
	}
	s := f.mustOpen(t, Options{})
	require.Equal(t, 3, countTasks(t, s))
	require.NoError(t, s.Close())
}

// TestOpenVerifiesOnlyTablesNewSinceTheLastOpen: an open verifies the
// checksums of the tables written since the last open, not of every table
// again (filecheck.VerifiedName lists those verified, by name, size and
// modification time). A table changed in place with its time put back
// (a disk's bit rot) is not verified again by an open's file check, but
// `store verify` finds it; one whose time moved is verified again, and
// the open refused.
func TestOpenVerifiesOnlyTablesNewSinceTheLastOpen(t *testing.T) {
	t.Parallel()
	f, ssts := builtWithTables(t)
	s := f.mustOpen(t, Options{})
	require.NoError(t, s.Close())
	list, err := os.ReadFile(filepath.Join(f.dir, filecheck.VerifiedName))
	require.NoError(t, err)
	for _, sst := range ssts {
		require.Contains(t, string(list), filepath.Base(sst)+" ", "verified and listed")
	}

	fi, err := os.Stat(ssts[0])
	require.NoError(t, err)
	flipByte(t, ssts[0], fi.Size()/2)
	require.NoError(t, os.Chtimes(ssts[0], fi.ModTime(), fi.ModTime()))
	found, err := filecheck.Opening{Dir: f.dir, Log: hclog.NewNullLogger()}.Files()
	require.NoError(t, err)
	require.Empty(t, found, "listed as it is: not read again")
	rep, err := Verify(f.dir, hclog.NewNullLogger())
	require.NoError(t, err)
	require.Contains(t, checksOf(rep), "checksum", "store verify reads every table")

	require.NoError(t, os.Chtimes(ssts[0], fi.ModTime().Add(time.Second), fi.ModTime().Add(time.Second)))
	_, err = f.open(t, Options{})
	requireDamaged(t, err, "checksum")
	flipByte(t, ssts[0], fi.Size()/2)
	s = f.mustOpen(t, Options{})
	require.Equal(t, 3, countTasks(t, s))
	require.NoError(t, s.Close())
}

func TestOpenRefusesTruncatedTable(t *testing.T) {
	t.Parallel()
	f, ssts := builtWithTables(t)
	fi, err := os.Stat(ssts[0])
	require.NoError(t, err)
	require.NoError(t, os.Truncate(ssts[0], fi.Size()/2))
	_, err = f.open(t, Options{})
	requireDamaged(t, err, "checksum")
	require.Contains(t, err.Error(), ssts[0])
	require.NotContains(t, err.Error(), "\n")
}

// crashImage copies the files of an open store (and its high-water mark)
// into a new home: what the disk holds if the machine stops now, provided
// the kernel wrote its cache.
func crashImage(t *testing.T, f *diskFixture) *diskFixture {
	t.Helper()
	g := newDiskFixture(t)
	copyDir(t, f.dir, g.dir)
	copyFile(t, filecheck.MarkPath(f.dir), filecheck.MarkPath(g.dir))
	return g
}

func TestDamagedWriteAheadLogIsDetected(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T, mem string){
		"truncated": func(t *testing.T, mem string) { require.NoError(t, os.Truncate(mem, 600)) },
		"emptied":   func(t *testing.T, mem string) { require.NoError(t, os.Truncate(mem, 0)) },
		"flipped":   func(t *testing.T, mem string) { flipByte(t, mem, 600) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newDiskFixture(t)
			s := f.mustOpen(t, Options{})
			f.commitTasks(t, s, 5)
			img := crashImage(t, f)
			require.NoError(t, s.Close())
			mems := filesWithSuffix(t, img.dir, ".mem")
			require.Len(t, mems, 1, "the commits are in the write-ahead log")

			intact := crashImage(t, img)
			s2 := intact.mustOpen(t, Options{})
			require.Equal(t, 5, countTasks(t, s2), "an undamaged crash image loses nothing")
			require.NoError(t, s2.Close())

			damage(t, mems[0])
			s3, err := img.open(t, Options{})
			if err == nil {
				n := countTasks(t, s3)
				require.NoError(t, s3.Close())
				require.FailNow(t, "a damaged log opened silently", "%d of 5 tasks", n)
			}
			require.ErrorIs(t, err, ErrDamaged)
			require.Regexp(t, "syncs behind|truncated", err.Error())

			// Allowed, it opens with what is left, and says what it lost.
			var logs bytes.Buffer
			s4, err := img.open(t, Options{AllowDamaged: true, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
			require.NoError(t, err)
			require.Less(t, countTasks(t, s4), 5)
			require.NoError(t, s4.Close())
			require.Contains(t, logs.String(), "damaged")
		})
	}
}

func TestRollbackIsRefused(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	f.build(t, 1)
	old := filepath.Join(t.TempDir(), "old")
	copyDir(t, f.dir, old)

	s := f.mustOpen(t, Options{})
	f.commitTasks(t, s, 2)
	require.NoError(t, s.Close())

	require.NoError(t, os.RemoveAll(f.dir))
	copyDir(t, old, f.dir)
	_, err := f.open(t, Options{})
	de := requireDamaged(t, err, "high-water")
	require.Regexp(t, `store is \d+ syncs behind its high-water mark`, de.Error())
	require.Contains(t, de.Error(), filecheck.MarkPath(f.dir))

	var logs bytes.Buffer
	s, err = f.open(t, Options{AllowDamaged: true, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
	require.NoError(t, err)
	require.Contains(t, logs.String(), "syncs behind")
	require.Equal(t, 1, countTasks(t, s))
	f.commitTasks(t, s, 1)
	require.NoError(t, s.Close())

	// Writing to it accepted the damage: the mark moved on from there.
	s = f.mustOpen(t, Options{})
	require.Equal(t, 2, countTasks(t, s))
	require.NoError(t, s.Close())
}

func TestCleanReopenKeepsMarkAndData(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	ids := f.build(t, 2)
	mark, err := filecheck.ReadMark(filecheck.MarkPath(f.dir))
	require.NoError(t, err)
	require.Positive(t, mark)
	s := f.mustOpen(t, Options{})
	require.Equal(t, len(ids), countTasks(t, s))
	require.NoError(t, s.Close())
}

// ---- failed syncs ----

func TestSyncFailureFailsTheStore(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	var failing sync.Mutex // held: syncs fail
	fail := false
	s := f.mustOpen(t, Options{syncFn: func(sync func() error) error {
		failing.Lock()
		defer failing.Unlock()
		if fail {
			return errors.New("input/output error")
		}
		return sync()
	}})
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = s.Close()
		}
	})
	task, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b")})
	require.NoError(t, err)
	_, _, err = s.Submit(f.ctx, ledger.NewTask{Name: "u", Steps: plainSteps("a")})
	require.NoError(t, err)
	c, err := s.Claim(f.ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, Task: task.ID})
	require.NoError(t, err)

	// The commit also claims the next unit, in the same transaction.
	failing.Lock()
	fail = true
	failing.Unlock()
	_, _, err = s.commitAndClaimSynced(f.ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`1`)},
		ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: time.Hour})
	require.ErrorIs(t, err, ledger.ErrStoreFailed)
	require.Contains(t, err.Error(), "input/output error")
	require.Contains(t, err.Error(), "unknown")
	require.Contains(t, err.Error(), "reopen")
	require.NotContains(t, err.Error(), "not committed")

	// A later sync would succeed: the store must refuse anyway.
	failing.Lock()
	fail = false
	failing.Unlock()
	_, _, err = s.Submit(f.ctx, ledger.NewTask{Name: "t2", Steps: plainSteps("a")})
	require.ErrorIs(t, err, ledger.ErrStoreFailed)
	_, err = s.Claim(f.ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.ErrorIs(t, err, ledger.ErrStoreFailed)

	// Reads still work.
	got, err := s.Task(f.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, task.ID, got.ID)
	require.NoError(t, s.Close())
	closed = true

	// Reopened, the store is usable, and the unit the failed transaction
	// leased (for an hour) is not orphaned: it is claimable at once, with
	// the other task's unit.
	s2 := f.mustOpen(t, Options{})
	defer s2.Close()
	c, err = s2.Claim(f.ctx, ledger.ClaimRequest{Owner: s2.Owner("w"), Max: 10})
	require.NoError(t, err)
	require.Len(t, c.Leases, 2)
}

// ---- group commit on disk ----

// runWorkers has n goroutines claim and commit units until none is left or
// one fails; it returns the first error.
func runWorkers(ctx context.Context, s *Store, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := s.Owner(fmt.Sprint("w", w))
			for {
				c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: owner, Max: 1, LeaseFor: time.Hour})
				if err != nil {
					errs <- err
					return
				}
				if len(c.Leases) == 0 {
					return
				}
				l := c.Leases[0]
				if _, err := s.Commit(ctx, ledger.Result{Lease: l, Output: json.RawMessage(fmt.Sprint(l.Item))}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func TestGroupCommitOnDisk(t *testing.T) {
	t.Parallel()
	const items = 300
	f := newDiskFixture(t)
	s := f.mustOpen(t, Options{Planner: fanOutPlanner(items), markEvery: time.Hour})
	defer s.Close()
	task, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "fan", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 16}}})
	require.NoError(t, err)

	require.NoError(t, runWorkers(f.ctx, s, 16))

	got, err := s.Task(f.ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.Equal(t, items, got.Steps[0].Done)
	require.Equal(t, items, got.Attempts)
	syncs, ops := s.SyncStats()
	t.Logf("%d durable operations, %d syncs", ops, syncs)
	require.Greater(t, ops, syncs, "commits shared syncs (%d ops, %d syncs)", ops, syncs)
	require.NoError(t, s.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		require.NoError(t, err)
		var vals []int
		require.NoError(t, json.Unmarshal(out, &vals))
		require.Len(t, vals, items)
		return nil
	}))
}

func TestGroupCommitSyncFailureFailsEveryWaiter(t *testing.T) {
	t.Parallel()
	const items = 200
	f := newDiskFixture(t)
	var mu sync.Mutex
	syncs := 0
	s := f.mustOpen(t, Options{Planner: fanOutPlanner(items), markEvery: time.Hour, syncFn: func(sync func() error) error {
		mu.Lock()
		defer mu.Unlock()
		syncs++
		if syncs > 20 {
			return errors.New("input/output error")
		}
		return sync()
	}})
	defer s.Close()
	task, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "fan", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 16}}})
	require.NoError(t, err)

	err = runWorkers(f.ctx, s, 16)
	require.ErrorIs(t, err, ledger.ErrStoreFailed)
	_, err = s.Commit(f.ctx, ledger.Result{Lease: ledger.Lease{Task: task.ID}})
	require.ErrorIs(t, err, ledger.ErrStoreFailed, "every later write fails at once")
	mu.Lock()
	require.Equal(t, 21, syncs, "no sync runs after the failed one")
	mu.Unlock()
	got, err := s.Task(f.ctx, task.ID)
	require.NoError(t, err)
	require.Less(t, got.Steps[0].Done, items)
}

// ---- free space ----

func TestWritesStopAtTheFreeSpaceFloor(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	var mu sync.Mutex
	free := int64(1 << 30)
	freeFn := func(string) (int64, error) { mu.Lock(); defer mu.Unlock(); return free, nil }
	setFree := func(n int64) { mu.Lock(); free = n; mu.Unlock() }
	s := f.mustOpen(t, Options{MinFreeBytes: 64 << 20, freeFn: freeFn})
	ids := f.commitTasks(t, s, 2)

	setFree(10 << 20)
	_, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a")})
	require.ErrorIs(t, err, ledger.ErrNoSpace)
	require.Contains(t, err.Error(), "10 MiB free in "+f.dir+", floor 64 MiB")
	require.Equal(t, 2, countTasks(t, s), "reads still work")
	setFree(1 << 30)
	f.commitTasks(t, s, 1)
	require.NoError(t, s.Close())

	// Below the floor at open: read-only, readable.
	setFree(10 << 20)
	s = f.mustOpen(t, Options{MinFreeBytes: 64 << 20, freeFn: freeFn})
	require.Equal(t, 3, countTasks(t, s))
	_, err = s.Task(f.ctx, ids[0])
	require.NoError(t, err)
	_, _, err = s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a")})
	require.ErrorIs(t, err, ledger.ErrNoSpace)
	require.NoError(t, s.Close())
}

// TestAWriteThatWouldPassTheFloorIsRefused: the floor is checked with the
// bytes a transaction writes, just before it commits; a store just above
// the floor does not take one large write (a big output, key/value entry or
// a batch of them) that would leave the disk below it.
func TestAWriteThatWouldPassTheFloorIsRefused(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	free := int64(64<<20 + 1<<20)
	s := f.mustOpen(t, Options{MinFreeBytes: 64 << 20, freeFn: func(string) (int64, error) { return free, nil }})
	defer s.Close()
	put := func(key string, n int) error {
		return s.update(f.ctx, func(t *kv.Tx) error { return t.Put([]byte(key), make([]byte, n)) })
	}
	err := put("x/big", 2<<20)
	require.ErrorIs(t, err, ledger.ErrNoSpace)
	require.Contains(t, err.Error(), "65 MiB free in "+f.dir+", floor 64 MiB: a write of 3 MiB would go below it")
	require.ErrorIs(t, s.view(func(t *kv.Tx) error { _, err := t.GetRaw([]byte("x/big")); return err }), ledger.ErrNotFound)

	// Writes that fit one by one all commit, batched together or not.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = put(fmt.Sprintf("x/%d", i), 300<<10) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// ---- durability ----

// TestCommitIsInTheLastSyncedImage checks durability, not persistence: a
// reopen after Close proves only that Badger flushed at close, and a
// SIGKILL keeps the kernel's page cache, so neither notices a missing sync.
// Here every sync copies the store's files right after it: the latest copy
// is what a power loss would leave. A commit must be in the copy made
// before it returned; a claim, which is not synced on its own, need not be.
func TestCommitIsInTheLastSyncedImage(t *testing.T) {
	t.Parallel()
	f := newDiskFixture(t)
	var mu sync.Mutex
	images := 0
	image := func(n int) string { return filepath.Join(f.home, fmt.Sprintf("image-%d", n)) }
	s := f.mustOpen(t, Options{syncFn: func(sync func() error) error {
		if err := sync(); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		images++
		copyDir(t, f.dir, filepath.Join(image(images), "store"))
		return nil
	}})
	defer s.Close()
	latest := func() *Store {
		mu.Lock()
		n := images
		mu.Unlock()
		img, err := Open(filepath.Join(image(n), "store"), Options{NoSync: true})
		require.NoError(t, err)
		return img
	}

	task, _, err := s.Submit(f.ctx, ledger.NewTask{Name: "t", Steps: plainSteps("a", "b")})
	require.NoError(t, err)
	c, err := s.Claim(f.ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.NoError(t, err)
	img := latest()
	require.NoError(t, img.Read(func(r ledger.Reader) error {
		units, err := r.Units(task.ID, 0)
		require.NoError(t, err)
		require.Len(t, units, 1)
		require.Equal(t, ledger.UnitReady, units[0].State, "the image holds only what was synced: the claim was not")
		return nil
	}))
	require.NoError(t, img.Close())

	_, err = s.Commit(f.ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`{"draft":"hello"}`)})
	require.NoError(t, err)
	img = latest()
	defer img.Close()
	require.NoError(t, img.Read(func(r ledger.Reader) error {
		out, err := r.StepOutput(task.ID, 0)
		if err != nil {
			return err
		}
		require.JSONEq(t, `{"draft":"hello"}`, string(out))
		return nil
	}))
}
