package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestManualHintSettlesAFanOutItem kills a real process after the second
// item's email was sent, resumes the task (it pauses on the manual effect),
// and runs the command the pause's hint prints, word for word: it must settle
// the effect of item 1, after which resume finishes the task without sending
// that email again.
func TestManualHintSettlesAFanOutItem(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	sink, base := startSink(t)
	b := setupNotify(t, notifyTask("manual", base))

	out, killed := runCrashing(t, bin, b.home, "effect.after_perform@2", nil, "run", filepath.Join(b.dir, "task.hcl"))
	require.True(t, killed, "the process must die; output:\n%s", out)
	id := taskID(out)
	require.Len(t, id, 26)

	code, rout, rerr := b.lh(t, "resume", id)
	require.Equal(t, 3, code, "a pause is exit status 3: "+rout+rerr)
	task := b.task(t, id)
	require.Equal(t, ledger.Paused, task.Status, task.Reason)
	m := regexp.MustCompile("confirm with `lhengine ([^`]*)`").FindStringSubmatch(task.Reason)
	require.NotNil(t, m, "the hint names a confirm command: %s", task.Reason)
	require.Contains(t, rout+rerr, m[1], "resume prints the hint")

	// The printed command, run as printed by a shell.
	sh := exec.Command("sh", "-c", bin+" --home "+b.home+" "+m[1])
	shOut, err := sh.CombinedOutput()
	require.NoError(t, err, "the printed command %q: %s", m[1], shOut)

	code, rout, rerr = b.lh(t, "resume", id)
	require.Equal(t, 0, code, rout+rerr)
	require.Equal(t, ledger.Succeeded, b.task(t, id).Status)
	st := sink.Stats()
	require.Len(t, st.Applied, 3)
	for k, n := range st.Received {
		require.Equal(t, 1, n, "key %s sent more than once", k)
	}
}
