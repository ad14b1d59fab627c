package guest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// TestMounts: a guest reads and writes its read-write mount, reads but
// cannot write its read-only mount, and cannot reach anything outside the
// mounts: not with "..", not with an absolute path, not through a symbolic
// link. Relative links inside the mount work; absolute links are refused.
func TestMounts(t *testing.T) {
	t.Parallel()
	p := loadAs(t, sharedRuntime(t), "files", testwasm.CGuest(t, "files"))
	base := t.TempDir()
	rw, ro, outside := filepath.Join(base, "rw"), filepath.Join(base, "ro"), filepath.Join(base, "outside")
	for _, d := range []string{rw, ro, outside, filepath.Join(rw, "sub")} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	secret := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("secret"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ro, "readme.txt"), []byte("read me"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(rw, "sub", "a.txt"), []byte("inner"), 0o644))
	// Links made on the host side, leading out of the mount in every way.
	for link, target := range map[string]string{
		"escape":   "../outside",                      // a directory, relative
		"abs":      outside,                           // a directory, absolute
		"filelink": secret,                            // a file
		"dangling": filepath.Join(outside, "new.txt"), // a file not there yet
		"deep":     "sub/../../outside/secret.txt",    // out by way of a real directory
		"chain":    "escape",                          // a link to a link out
		"inner":    "sub",                             // inside: allowed
		"innerabs": filepath.Join(rw, "sub", "a.txt"), // inside, but absolute: refused
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(rw, link)))
	}
	lim := Limits{Mounts: []Mount{{HostDir: rw, GuestDir: "/work"}, {HostDir: ro, GuestDir: "/ro", ReadOnly: true}}}

	type out struct {
		OK    bool   `json:"ok"`
		Data  string `json:"data"`
		Errno int    `json:"errno"`
		Error string `json:"error"`
	}
	run := func(t *testing.T, mode, path, content string) out {
		t.Helper()
		in, _ := json.Marshal(map[string]string{"mode": mode, "path": path, "content": content})
		res, err := p.Run(context.Background(), Request{Input: in}, lim, nil)
		require.NoError(t, err)
		var o out
		require.NoError(t, json.Unmarshal(res.Output, &o), "%s", res.Output)
		return o
	}

	t.Run("rw", func(t *testing.T) {
		require.True(t, run(t, "write", "/work/hello.txt", "hi").OK)
		require.True(t, run(t, "append", "/work/hello.txt", " there").OK)
		require.Equal(t, out{OK: true, Data: "hi there"}, run(t, "read", "/work/hello.txt", ""))
		b, err := os.ReadFile(filepath.Join(rw, "hello.txt"))
		require.NoError(t, err)
		require.Equal(t, "hi there", string(b))
		require.Equal(t, out{OK: true, Data: "inner"}, run(t, "read", "/work/inner/a.txt", ""), "a link inside the mount")
		o := run(t, "read", "/work/innerabs", "")
		require.Equal(t, out{Errno: 63, Error: "Operation not permitted"}, o, "an absolute link, even one naming a file inside the mount, is refused (EPERM)")
		require.True(t, run(t, "write", "/work/inner/b.txt", "b").OK)
	})
	t.Run("ro", func(t *testing.T) {
		require.Equal(t, out{OK: true, Data: "read me"}, run(t, "read", "/ro/readme.txt", ""))
		for _, path := range []string{"/ro/new.txt", "/ro/readme.txt"} {
			require.False(t, run(t, "write", path, "x").OK, path)
			require.False(t, run(t, "append", path, "x").OK, path)
		}
		_, err := os.Stat(filepath.Join(ro, "new.txt"))
		require.ErrorIs(t, err, os.ErrNotExist)
		b, _ := os.ReadFile(filepath.Join(ro, "readme.txt"))
		require.Equal(t, "read me", string(b))
	})
	t.Run("escape", func(t *testing.T) {
		for _, path := range []string{
			"/work/../outside/secret.txt",
			"/work/sub/../../outside/secret.txt",
			"/ro/../outside/secret.txt",
			secret,
			"/outside/secret.txt",
			"/secret.txt",
			"../outside/secret.txt",
			"/work/escape/secret.txt",
			"/work/abs/secret.txt",
			"/work/filelink",
			"/work/dangling",
			"/work/deep",
			"/work/chain/secret.txt",
			"/work/escape/new.txt",
		} {
			for _, mode := range []string{"write", "append", "read"} {
				o := run(t, mode, path, "pwned")
				require.False(t, o.OK, "%s %s: %+v", mode, path, o)
				require.NotZero(t, o.Errno, "%s %s", mode, path)
			}
		}
		b, err := os.ReadFile(secret)
		require.NoError(t, err)
		require.Equal(t, "secret", string(b), "the file outside is untouched")
		entries, err := os.ReadDir(outside)
		require.NoError(t, err)
		require.Len(t, entries, 1, "nothing created outside")
	})
}

// TestMountsInvalid: an unusable mount fails the attempt before it starts.
func TestMountsInvalid(t *testing.T) {
	t.Parallel()
	p := loadAs(t, sharedRuntime(t), "files", testwasm.CGuest(t, "files"))
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, m := range [][]Mount{
		{{HostDir: filepath.Join(dir, "missing"), GuestDir: "/w"}},
		{{HostDir: file, GuestDir: "/w"}},
		{{HostDir: dir, GuestDir: "w"}},
		{{HostDir: dir, GuestDir: "/w"}, {HostDir: dir, GuestDir: "/w/"}},
	} {
		_, err := p.Run(context.Background(), Request{Input: json.RawMessage(`{"mode":"read","path":"/w/f"}`)}, Limits{Mounts: m}, nil)
		var se *fault.StepError
		require.ErrorAs(t, err, &se)
		require.Equal(t, fault.Input, se.Kind, "%v", err)
	}
}

// TestMountConfigHostDir: a host directory that is missing or a file is
// refused, and the error says which.
func TestMountConfigHostDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err := mountConfig([]Mount{{HostDir: filepath.Join(dir, "missing"), GuestDir: "/w"}}, nil)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = mountConfig([]Mount{{HostDir: file, GuestDir: "/w"}}, nil)
	require.ErrorContains(t, err, "not a directory")
	_, err = mountConfig([]Mount{{HostDir: dir, GuestDir: "/w"}}, nil)
	require.NoError(t, err)
}
