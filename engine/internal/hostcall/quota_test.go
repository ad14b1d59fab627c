package hostcall

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

func limited(name string, edit func(*taskfile.Limits)) *taskfile.Step {
	l := taskfile.DefaultLimits()
	edit(&l)
	return &taskfile.Step{Name: name, Limits: &l}
}

func TestNotesAreBoundedPerAttempt(t *testing.T) {
	t.Parallel()
	a := setup(t, limited("n", func(l *taskfile.Limits) { l.Notes, l.NoteBytes = 5, 100 }))
	ctx := context.Background()
	note := func(text string) error {
		_, err := a.Call(ctx, "progress.note", []byte(`{"kind":"finding","text":"`+text+`"}`))
		return err
	}
	require.Equal(t, guest.StatusTooLarge, status(t, note(strings.Repeat("x", 101))), "one note over the whole allowance")
	for range 3 {
		require.NoError(t, note(strings.Repeat("x", 30)))
	}
	require.Equal(t, guest.StatusBudget, status(t, note(strings.Repeat("x", 11))), "bytes: 90 of 100 used")
	require.NoError(t, note("0123456789"))
	require.NoError(t, note(""))
	for range 1000 {
		require.Equal(t, guest.StatusBudget, status(t, note("")), "count: 5 of 5 used")
	}
	_, notes := a.Progress()
	require.Len(t, notes, 5, "nothing past the limits is kept")
}

func TestCounterNamesAreBoundedPerAttemptAndTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := store.Open("", store.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	_, _, err = s.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "c"}, {Name: "d"}}})
	require.NoError(t, err)
	claim := func() ledger.Lease {
		c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
		require.NoError(t, err)
		require.Len(t, c.Leases, 1)
		return c.Leases[0]
	}
	step := limited("c", func(l *taskfile.Limits) { l.CounterNamesPerAttempt, l.CounterNames = 3, 4 })
	a := &Attempt{Store: s, Lease: claim(), Step: step}
	count := func(a *Attempt, name string) error {
		_, err := a.Call(ctx, "progress.count", []byte(`{"name":"`+name+`","delta":1}`))
		return err
	}
	for i := range 3 {
		require.NoError(t, count(a, fmt.Sprint("c", i)))
	}
	require.NoError(t, count(a, "c0"), "a known name is always counted")
	for i := range 1000 {
		require.Equal(t, guest.StatusBudget, status(t, count(a, fmt.Sprint("new", i))))
	}
	counts, _ := a.Progress()
	require.Len(t, counts, 3)

	// Once this attempt is committed, the next step's attempt may add only
	// one more name: the task holds 3 of 4.
	_, err = s.Commit(ctx, ledger.Result{Lease: a.Lease, Output: json.RawMessage(`{}`), Counts: counts})
	require.NoError(t, err)
	b := &Attempt{Store: s, Lease: claim(), Step: step}
	require.Equal(t, 1, b.Lease.Step)
	require.NoError(t, count(b, "c1"))
	require.NoError(t, count(b, "d0"))
	require.Equal(t, guest.StatusBudget, status(t, count(b, "d1")), "the task's fourth name was the last")
}

// submitAndClaim adds a task of one step (named step) with units fan-out
// items to s and leases its first unit.
func submitAndClaim(t *testing.T, s ledger.Store, step string, units int) ledger.Lease {
	t.Helper()
	ctx := context.Background()
	task, _, err := s.Submit(ctx, ledger.NewTask{Name: "other", Steps: []ledger.StepState{{Name: step}}})
	require.NoError(t, err)
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w2"), Max: 1, Task: task.ID})
	require.NoError(t, err)
	require.Len(t, c.Leases, 1)
	return c.Leases[0]
}

func TestKVAndArtifactQuotasArePerTask(t *testing.T) {
	t.Parallel()
	a := setup(t, limited("q", func(l *taskfile.Limits) { l.KVBytes, l.ArtifactBytes = 100, 1000 }))
	ctx := context.Background()
	put := func(key string, n int) error {
		_, err := a.Call(ctx, "kv.put", []byte(`{"key":"`+key+`","value":"`+strings.Repeat("v", n)+`"}`))
		return err
	}
	require.Equal(t, guest.StatusTooLarge, status(t, put("k", 200)), "one entry over the whole quota")
	require.NoError(t, put("k1", 40)) // 2 + 42 bytes
	require.NoError(t, put("k2", 40)) // 88
	require.Equal(t, guest.StatusBudget, status(t, put("k3", 40)))
	require.NoError(t, put("k1", 1), "an overwrite counts the difference")
	require.NoError(t, put("k3", 40))
	var usage ledger.Usage
	require.NoError(t, a.Store.Read(func(r ledger.Reader) (err error) { usage, err = r.Usage(a.Lease.Task); return err }))
	require.Equal(t, int64(2+3+2+42+2+42), usage.KV)

	art := func(a *Attempt, name string, data []byte) (string, error) {
		out, err := a.PutArtifact(ctx, []byte(`{"name":"`+name+`"}`), data)
		if err != nil {
			return "", err
		}
		var r struct{ Ref string }
		require.NoError(t, json.Unmarshal(out, &r))
		return r.Ref, nil
	}
	_, err := art(a, "huge", make([]byte, 1001))
	require.Equal(t, guest.StatusTooLarge, status(t, err))
	blob := []byte(strings.Repeat("a", 600))
	ref, err := art(a, "a", blob)
	require.NoError(t, err)
	_, err = art(a, "a-again", blob)
	require.NoError(t, err, "the same content counts once per task")
	_, err = art(a, "b", []byte(strings.Repeat("b", 600)))
	require.Equal(t, guest.StatusBudget, status(t, err))
	require.NoError(t, a.Store.Read(func(r ledger.Reader) (err error) { usage, err = r.Usage(a.Lease.Task); return err }))
	require.Equal(t, int64(600), usage.Artifacts)
	var task *ledger.Task
	require.NoError(t, a.Store.Read(func(r ledger.Reader) (err error) { task, err = r.Task(a.Lease.Task); return err }))
	raw, err := json.Marshal(task)
	require.NoError(t, err)
	require.NotContains(t, string(raw), `"artifacts"`, "usage is kept apart from the task record")

	// Another task storing the same content is charged for it too, and
	// only then may read it.
	l := submitAndClaim(t, a.Store, "q", 1)
	b := &Attempt{Store: a.Store, Lease: l, Step: a.Step, Client: &http.Client{Timeout: time.Second}}
	buf := make([]byte, 10)
	_, err = b.ReadArtifact(ctx, ref, 0, buf)
	require.Equal(t, guest.StatusNotFound, status(t, err), "task B cannot read task A's artifact by its ref")
	n, err := a.ReadArtifact(ctx, ref, 0, buf)
	require.NoError(t, err)
	require.Equal(t, "aaaaaaaaaa", string(buf[:n]))
	ref2, err := art(b, "mine", blob)
	require.NoError(t, err)
	require.Equal(t, ref, ref2)
	n, err = b.ReadArtifact(ctx, ref, 0, buf)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	require.NoError(t, a.Store.Read(func(r ledger.Reader) (err error) { usage, err = r.Usage(l.Task); return err }))
	require.Equal(t, int64(600), usage.Artifacts)
}

// A plugin cannot pass the per-attempt counter-name limit by reporting new
// names from several host calls at once on the same attempt: the check and
// the count are one step.
func TestCounterNamesHoldUnderConcurrentCalls(t *testing.T) {
	t.Parallel()
	const limit = 4
	ctx := context.Background()
	for round := range 20 {
		a := setup(t, limited("c", func(l *taskfile.Limits) { l.CounterNamesPerAttempt, l.CounterNames = limit, 1000 }))
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 4 {
					_, _ = a.Call(ctx, "progress.count", fmt.Appendf(nil, `{"name":"r%d-g%d-%d","delta":1}`, round, g, i))
				}
			}()
		}
		wg.Wait()
		counts, _ := a.Progress()
		require.LessOrEqual(t, len(counts), limit, "round %d", round)
	}
}

// artifact_read takes the ref exactly as artifact_put gave it: a variant
// spelling of another task's ref (case, prefix, padding) is not found, and
// neither is a variant of the task's own ref.
func TestArtifactReadRefVariantsAreNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := setup(t, limited("v", func(*taskfile.Limits) {}))
	out, err := a.PutArtifact(ctx, []byte(`{"name":"secret"}`), []byte("secret of task A"))
	require.NoError(t, err)
	var r struct{ Ref string }
	require.NoError(t, json.Unmarshal(out, &r))
	hexSum := strings.TrimPrefix(r.Ref, "sha256:")
	variants := []string{
		"SHA256:" + hexSum, "sha256:" + strings.ToUpper(hexSum), "Sha256:" + hexSum, hexSum,
		"sha256: " + hexSum, " " + r.Ref, r.Ref + " ", r.Ref + "\x00", r.Ref + "/", "sha256:sha256:" + hexSum,
		"sha256:" + hexSum[:63], "sha256:../" + hexSum[3:],
	}
	b := &Attempt{Store: a.Store, Lease: submitAndClaim(t, a.Store, "v", 1), Step: a.Step}
	buf := make([]byte, 64)
	for _, att := range []*Attempt{b, a} {
		for _, v := range variants {
			n, err := att.ReadArtifact(ctx, v, 0, buf)
			require.Equal(t, guest.StatusNotFound, status(t, err), "ref %q", v)
			require.Zero(t, n)
		}
	}
	_, err = b.ReadArtifact(ctx, r.Ref, 0, buf)
	require.Equal(t, guest.StatusNotFound, status(t, err), "task B cannot read task A's ref as given either")
	n, err := a.ReadArtifact(ctx, r.Ref, 0, buf)
	require.NoError(t, err)
	require.Equal(t, "secret of task A", string(buf[:n]))
}
