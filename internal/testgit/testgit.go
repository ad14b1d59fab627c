// Package testgit runs git for tests that need a repository: as a user of
// its own, with no system or user configuration.
package testgit

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Run runs git with args in dir, as "Test <test@example.com>" with main as
// the default branch and dir as HOME, and returns its output trimmed. A
// failure fails the test.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
