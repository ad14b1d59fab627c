//go:build linux

package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// otherUser creates a local user for the test (removed at its end) and
// returns its credential. It needs root and useradd: without them the
// test is skipped, except in CI (CI=true), where it fails.
func otherUser(t *testing.T) *syscall.Credential {
	t.Helper()
	need := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this test needs a second local user: %s", why)
		}
		t.Skipf("needs a second local user: %s", why)
	}
	if os.Geteuid() != 0 {
		need("only root can create one")
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		need("no useradd: " + err.Error())
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "lhe" + hex.EncodeToString(b[:])
	out, err := exec.Command(useradd, "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
	require.NoError(t, err, "useradd: %s", out)
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	require.NoError(t, err)
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	require.NoError(t, err)
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	require.NoError(t, err)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// TestAHomeIsPrivateToItsUser: a home made under the most permissive
// umask is owner-only, and another local user can neither read its store,
// copy it, nor run lhengine outputs on it; a home left open to others by
// hand is closed again at the next command, with a warning.
func TestAHomeIsPrivateToItsUser(t *testing.T) {
	t.Parallel()
	cred := otherUser(t)
	// A folder every user can enter, holding the binary and the home.
	shared, err := os.MkdirTemp("", "lhengine-private-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(shared) })
	require.NoError(t, os.Chmod(shared, 0o755))
	bin := filepath.Join(shared, "lhengine")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run(), "go build")
	theirs := filepath.Join(shared, "theirs")
	require.NoError(t, os.Mkdir(theirs, 0o700))
	require.NoError(t, os.Chown(theirs, int(cred.Uid), int(cred.Gid)))

	b := setupCLI(t, chainTask)
	home := filepath.Join(shared, "home")
	// The owner runs a task with umask 000: nothing may come out readable.
	run := exec.Command("sh", "-c", `umask 000 && exec "$@"`, "sh", bin, "--home", home, "run", filepath.Join(b.dir, "task.hcl"))
	out, err := run.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "HELLO WORLD")
	id := strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "task ")

	mode := func(path string) os.FileMode {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		return fi.Mode().Perm()
	}
	require.Equal(t, os.FileMode(0o700), mode(home), "the home")
	require.Equal(t, os.FileMode(0o700), mode(filepath.Join(home, "store")), "the store")

	// As the other user.
	as := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = theirs
		cmd.Env = []string{"HOME=" + theirs, "PATH=/usr/bin:/bin", "XDG_CACHE_HOME=" + filepath.Join(theirs, ".cache")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out2, err := as("cat", filepath.Join(home, "store", "MANIFEST"))
	require.Error(t, err, "another user read the store: %s", out2)
	require.Contains(t, out2, "Permission denied")
	out2, err = as("cp", "-r", filepath.Join(home, "store"), filepath.Join(theirs, "copy", "store"))
	require.Error(t, err, "another user copied the store")
	for _, h := range []string{home, filepath.Join(theirs, "copy")} {
		out2, err = as(bin, "--home", h, "outputs", id)
		require.Error(t, err, "another user ran outputs on %s:\n%s", h, out2)
		require.NotContains(t, out2, "HELLO WORLD")
	}
	require.Contains(t, out2, "no lhengine home")
	out2, _ = as(bin, "--home", home, "outputs", id)
	require.Contains(t, out2, "permission denied: a home is private to the user who created it")

	// A home opened up by hand is closed at the next command.
	for _, p := range []string{home, filepath.Join(home, "store")} {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	out, err = exec.Command(bin, "--home", home, "ls").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "the home was open to other users; it is owner-only now")
	require.Contains(t, string(out), "the store was readable by other users")
	require.Equal(t, os.FileMode(0o700), mode(home))
	require.Equal(t, os.FileMode(0o700), mode(filepath.Join(home, "store")))
	_, err = as("ls", filepath.Join(home, "store"))
	require.Error(t, err)
}
