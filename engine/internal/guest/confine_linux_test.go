package guest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// raceTree is a mount with a directory d that a goroutine swaps, again and
// again, with a relative symbolic link to a directory outside the mount:
// what another item sharing the workspace can do to a guest.
type raceTree struct {
	mount, outside string
	secretMtime    time.Time
	stop           chan struct{}
	done           chan struct{}
	flipErr        error
}

func newRaceTree(t *testing.T) *raceTree {
	t.Helper()
	base := t.TempDir()
	rt := &raceTree{mount: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside"), stop: make(chan struct{}), done: make(chan struct{})}
	for _, d := range []string{rt.mount, rt.outside, filepath.Join(rt.mount, "d")} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(rt.outside, "secret.txt"), []byte("secret"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(rt.mount, "d", "secret.txt"), []byte("inside"), 0o644))
	fi, err := os.Stat(filepath.Join(rt.outside, "secret.txt"))
	require.NoError(t, err)
	rt.secretMtime = fi.ModTime()
	require.NoError(t, os.Symlink("../outside", filepath.Join(rt.mount, "swap")))
	return rt
}

// flip swaps d and swap atomically (renameat2 RENAME_EXCHANGE) until stop
// is closed, so d is always there: a directory one moment, a link out the
// next. It owns no test state: an error ends it and is read after done.
func (rt *raceTree) flip() {
	defer close(rt.done)
	d, swap := filepath.Join(rt.mount, "d"), filepath.Join(rt.mount, "swap")
	for {
		select {
		case <-rt.stop:
			return
		default:
		}
		if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE); err != nil {
			rt.flipErr = err
			return
		}
	}
}

// finish stops the flipper and checks that nothing outside was read,
// created, changed or removed.
func (rt *raceTree) finish(t *testing.T) {
	t.Helper()
	close(rt.stop)
	<-rt.done
	require.NoError(t, rt.flipErr)
	entries, err := os.ReadDir(rt.outside)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"secret.txt"}, names, "nothing created or removed outside the mount")
	fi, err := os.Stat(filepath.Join(rt.outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "mode of the file outside unchanged")
	require.True(t, rt.secretMtime.Equal(fi.ModTime()), "times of the file outside unchanged")
	b, err := os.ReadFile(filepath.Join(rt.outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(b))
}

// TestMountFSRaceStaysInside: path operations on a mount, each repeated
// 2,000 times while another goroutine swaps a directory in the path with a
// link out of the mount, never read, create or change anything outside.
// (Checking each path and then letting wazero use it by path failed this
// within a few hundred iterations.)
func TestMountFSRaceStaysInside(t *testing.T) {
	t.Parallel()
	rt := newRaceTree(t)
	fsys, err := mountFS(rt.mount, Mount{}, nil)
	require.NoError(t, err)
	outsideSt, errno := statHost(filepath.Join(rt.outside, "secret.txt"))
	require.Zero(t, errno)
	go rt.flip()

	leaks := 0
	buf := make([]byte, 16)
	for i := 0; i < 2000; i++ {
		if f, errno := fsys.OpenFile("d/secret.txt", experimentalsys.O_RDONLY, 0); errno == 0 {
			n, _ := f.Read(buf)
			if string(buf[:n]) == "secret" {
				leaks++
			}
			f.Close()
		}
		if f, errno := fsys.OpenFile("d/new.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT|experimentalsys.O_TRUNC, 0o644); errno == 0 {
			f.Write([]byte("x"))
			f.Close()
		}
		if st, errno := fsys.Stat("d/secret.txt"); errno == 0 && st.Ino == outsideSt.Ino && st.Dev == outsideSt.Dev {
			leaks++
		}
		if st, errno := fsys.Lstat("d/secret.txt"); errno == 0 && st.Ino == outsideSt.Ino && st.Dev == outsideSt.Dev {
			leaks++
		}
		fsys.Mkdir("d/newdir", 0o755)
		fsys.Symlink("x", "d/newlink")
		fsys.Link("d/secret.txt", "hard")
		fsys.Unlink("hard")
		fsys.Chmod("d/secret.txt", 0o600)
		fsys.Utimens("d/secret.txt", 0, 0)
		if f, errno := fsys.OpenFile("d", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0); errno == 0 {
			if ents, errno := f.Readdir(-1); errno == 0 {
				for _, e := range ents {
					if e.Ino == outsideSt.Ino {
						leaks++
					}
				}
			}
			f.Close()
		}
	}
	rt.finish(t)
	require.Zero(t, leaks, "reads of the file outside the mount")
}

// TestMountsGuestRaceStaysInside: two real guests run concurrently against
// one read-write mount, one reading /work/d/secret.txt and one writing
// /work/d/new.txt, 150 runs each, while a goroutine swaps d with a link out
// of the mount: no guest reads the file outside, nothing is written there.
func TestMountsGuestRaceStaysInside(t *testing.T) {
	t.Parallel()
	p := loadAs(t, sharedRuntime(t), "files", testwasm.CGuest(t, "files"))
	rt := newRaceTree(t)
	lim := Limits{Mounts: []Mount{{HostDir: rt.mount, GuestDir: "/work"}}}
	go rt.flip()

	const runs = 150
	type result struct {
		data string
		err  error
	}
	results := make([][]result, 2)
	var wg sync.WaitGroup
	for g, mode := range []string{"read", "write"} {
		path := map[string]string{"read": "/work/d/secret.txt", "write": "/work/d/new.txt"}[mode]
		wg.Add(1)
		go func() {
			defer wg.Done()
			in, _ := json.Marshal(map[string]string{"mode": mode, "path": path, "content": "pwned"})
			for i := 0; i < runs; i++ {
				res, err := p.Run(context.Background(), Request{Input: in}, lim, nil)
				r := result{err: err}
				if err == nil {
					var o struct {
						Data string `json:"data"`
					}
					r.err = json.Unmarshal(res.Output, &o)
					r.data = o.Data
				}
				results[g] = append(results[g], r)
			}
		}()
	}
	wg.Wait()
	rt.finish(t)
	for _, rs := range results {
		require.Len(t, rs, runs)
		for _, r := range rs {
			require.NoError(t, r.err)
			require.NotEqual(t, "secret", r.data, "a guest read the file outside the mount")
		}
	}
}

func statHost(p string) (st struct{ Dev, Ino uint64 }, errno experimentalsys.Errno) {
	var s unix.Stat_t
	if err := unix.Stat(p, &s); err != nil {
		return st, experimentalsys.UnwrapOSError(err)
	}
	st.Dev, st.Ino = uint64(s.Dev), s.Ino
	return st, 0
}
