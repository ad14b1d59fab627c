//go:build unix

package crashpoint_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/crashpoint"
)

// childEnv names the points a re-executed test binary reaches, in order.
const childEnv = "CRASHPOINT_TEST_REACH"

// TestChild is the child process of TestCrashAt: it reaches the points
// listed in CRASHPOINT_TEST_REACH in order, saying so on stdout before and
// after each, and says "survived" if it got to the end. Without the
// variable it does nothing.
func TestChild(t *testing.T) {
	list, ok := os.LookupEnv(childEnv)
	if !ok {
		t.Skip("runs only as the child of TestCrashAt")
	}
	for _, p := range strings.Split(list, ",") {
		fmt.Fprintf(os.Stdout, "reach %s\n", p)
		crashpoint.Reached(p)
		fmt.Fprintf(os.Stdout, "passed %s\n", p)
	}
	fmt.Fprintln(os.Stdout, "survived")
}

// TestCrashAt runs the test binary again with LHENGINE_CRASH_AT set and
// checks that it dies by SIGKILL at exactly the chosen hit of the chosen
// point, and not at all when the point is not reached often enough, is
// not a point, or nothing is armed.
func TestCrashAt(t *testing.T) {
	t.Parallel()
	a, b := crashpoint.UnitAfterCommit, crashpoint.EffectAfterIntent
	for _, tc := range []struct {
		name, env string
		reach     []string
		passed    int // points passed before dying; -1: survives
	}{
		{"first hit", a, []string{b, a, a}, 1},
		{"third hit", a + "@3", []string{a, b, a, b, a, a}, 4},
		{"counts only its own point", b + "@2", []string{a, b, a, a, b, a}, 4},
		{"zero count means first", a + "@0", []string{b, a, a}, 1},
		{"unparsable count means first", a + "@x", []string{a, a}, 0},
		{"negative count means first", a + "@-2", []string{a, a}, 0},
		{"not reached often enough", a + "@3", []string{a, a, b}, -1},
		{"unknown point", "unit.never", []string{a, b}, -1},
		{"nothing armed", "", []string{a, b}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "LHENGINE_CRASH_AT="+tc.env, childEnv+"="+strings.Join(tc.reach, ","))
			out, err := cmd.Output()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			passed := 0
			for _, l := range lines {
				if strings.HasPrefix(l, "passed ") {
					passed++
				}
			}
			if tc.passed < 0 {
				require.NoError(t, err, "%s", out)
				require.Contains(t, lines, "survived")
				require.Equal(t, len(tc.reach), passed)
				return
			}
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "the child must die at hit %d; it exited with %v:\n%s", tc.passed+1, err, out)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "want death by SIGKILL, got %v", err)
			require.Equal(t, tc.passed, passed, "%s", out)
			require.Equal(t, "reach "+tc.reach[tc.passed], lines[len(lines)-1], "it died inside Reached")
		})
	}
}
