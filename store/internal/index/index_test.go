package index

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func ref(item int) Ref { return Ref{Task: "T", Step: 0, Item: item} }

func none(Ref) bool { return false }

// TestCandidatesOrder: a retry whose backoff has passed comes first,
// earliest first; then window units; then the rest in the order they
// became ready. A retry not due yet says when to look again.
func TestCandidatesOrder(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	x := New()
	x.AddActive("T")
	require.False(t, x.HasReady("T"))
	x.AddReady(ref(0), time.Time{}, false)
	x.AddReady(ref(1), time.Time{}, false)
	x.AddReady(ref(2), time.Time{}, true)
	x.AddReady(ref(3), now.Add(-time.Second), false)
	x.AddReady(ref(4), now.Add(-2*time.Second), false)
	x.AddReady(ref(5), now.Add(time.Minute), false)
	require.True(t, x.HasReady("T"))

	got, wake := x.Candidates("T", now, 10, none)
	require.Equal(t, []Ref{ref(4), ref(3), ref(2), ref(0), ref(1)}, got)
	require.Equal(t, now.Add(time.Minute), wake)

	got, _ = x.Candidates("T", now, 2, func(r Ref) bool { return r == ref(4) })
	require.Equal(t, []Ref{ref(3), ref(2)}, got, "max, and skipped units")

	got, wake = x.Candidates("T", now.Add(time.Hour), 10, none)
	require.Equal(t, []Ref{ref(4), ref(3), ref(5), ref(2), ref(0), ref(1)}, got)
	require.True(t, wake.IsZero())
}

// TestReadyAgain: a unit made ready again keeps one slot; one claimed
// (removed) is not offered; a unit made ready with another not-before
// moves to it.
func TestReadyAgain(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	x := New()
	for i := range 3 {
		x.AddReady(ref(i), time.Time{}, false)
	}
	x.AddReady(ref(0), time.Time{}, false)
	x.RemoveReady(ref(1))
	got, _ := x.Candidates("T", now, 10, none)
	require.Equal(t, []Ref{ref(0), ref(2)}, got)

	x.AddReady(ref(2), now.Add(time.Second), false)
	got, wake := x.Candidates("T", now, 10, none)
	require.Equal(t, []Ref{ref(0)}, got)
	require.Equal(t, now.Add(time.Second), wake)
	x.AddReady(ref(1), time.Time{}, false)
	got, _ = x.Candidates("T", now.Add(time.Second), 10, none)
	require.Equal(t, []Ref{ref(2), ref(0), ref(1)}, got)
}

// TestLongQueueIsCompacted: serving a long queue from its head keeps
// offering what is left, in order.
func TestLongQueueIsCompacted(t *testing.T) {
	t.Parallel()
	x := New()
	for i := range 5000 {
		x.AddReady(ref(i), time.Time{}, false)
	}
	now := time.Unix(0, 0)
	for i := range 4990 {
		x.RemoveReady(ref(i))
		if i%100 == 0 {
			got, _ := x.Candidates("T", now, 1, none)
			require.Equal(t, []Ref{ref(i + 1)}, got)
		}
	}
	got, _ := x.Candidates("T", now, 100, none)
	require.Len(t, got, 10)
	require.Equal(t, ref(4990), got[0])
}

// TestRemoveTaskAndDropStep: a task no longer runnable leaves every part
// of the index; a step entered again loses its ready units and leases.
func TestRemoveTaskAndDropStep(t *testing.T) {
	t.Parallel()
	x := New()
	for _, id := range []string{"C", "A", "B", "A"} {
		x.AddActive(id)
	}
	require.Equal(t, []string{"A", "B", "C"}, x.Active)
	a0, a1 := Ref{Task: "A", Step: 0, Item: 0}, Ref{Task: "A", Step: 1, Item: 0}
	x.AddReady(a0, time.Time{}, false)
	x.AddReady(a1, time.Time{}, false)
	x.Leases[Ref{Task: "A", Step: 1, Item: 1}] = Lease{Owner: "w", Until: time.Unix(9, 0)}
	x.Leases[Ref{Task: "B", Step: 0, Item: 0}] = Lease{Owner: "w"}

	x.DropStep("A", 1)
	got, _ := x.Candidates("A", time.Unix(0, 0), 10, none)
	require.Equal(t, []Ref{a0}, got)
	require.Len(t, x.Leases, 1)

	x.NeedPlan("A")
	x.RemoveTask("A")
	require.Equal(t, []string{"B", "C"}, x.Active)
	require.False(t, x.HasReady("A"))
	require.False(t, x.Planning("A"))
	require.Len(t, x.Leases, 1)
}

// TestPlans: plan jobs go out oldest task first, one runner at a time; a
// step entered again while it is planned is planned once more.
func TestPlans(t *testing.T) {
	t.Parallel()
	x := New()
	require.False(t, x.Planning(""))
	x.NeedPlan("B")
	x.NeedPlan("A")
	require.True(t, x.Planning(""))
	id, ok := x.TakePlan("")
	require.True(t, ok)
	require.Equal(t, "A", id)
	_, ok = x.TakePlan("A")
	require.False(t, ok, "A runs already")
	x.NeedPlan("A") // entered again meanwhile
	x.ReleasePlan("A", false)
	require.True(t, x.Planning("A"))
	id, ok = x.TakePlan("A")
	require.True(t, ok)
	require.Equal(t, "A", id)
	x.ReleasePlan("A", false)
	require.False(t, x.Planning("A"))

	id, _ = x.TakePlan("")
	require.Equal(t, "B", id)
	x.ReleasePlan("B", true) // cut short: pending again
	require.True(t, x.Planning("B"))
	x.RemoveTask("B")
	require.False(t, x.Planning("B"))
}

func ExampleIndex_Candidates() {
	x := New()
	x.AddReady(Ref{Task: "T", Item: 0}, time.Time{}, false)
	x.AddReady(Ref{Task: "T", Item: 1}, time.Time{}, true) // a window unit: first
	got, _ := x.Candidates("T", time.Now(), 10, func(Ref) bool { return false })
	fmt.Println(got)
	// Output: [{T 0 1} {T 0 0}]
}

func TestReplaceTaskTakesTheRecordsView(t *testing.T) {
	t.Parallel()
	x := New()
	x.AddActive("A")
	x.AddActive("B")
	x.AddReady(Ref{Task: "A", Item: 1}, time.Time{}, false)
	x.AddReady(Ref{Task: "B", Item: 1}, time.Time{}, false)
	x.Leases[Ref{Task: "A", Item: 2}] = Lease{Owner: "s/w"}
	x.NeedPlan("A")
	id, ok := x.TakePlan("A")
	require.True(t, ok)
	require.Equal(t, "A", id)

	from := New()
	from.AddActive("A")
	from.AddReady(Ref{Task: "A", Item: 3}, time.Time{}, false)
	from.Leases[Ref{Task: "A", Item: 1}] = Lease{Owner: "other/w"}
	from.NeedPlan("A")
	x.ReplaceTask("A", from)

	got, _ := x.Candidates("A", time.Now(), 10, none)
	require.Equal(t, []Ref{{Task: "A", Item: 3}}, got, "the ready units are the records'")
	require.Equal(t, map[Ref]Lease{{Task: "A", Item: 1}: {Owner: "other/w"}}, x.Leases)
	require.True(t, x.Planning("A"), "the plan job being run stays")
	require.Equal(t, []string{"A", "B"}, x.Active)
	got, _ = x.Candidates("B", time.Now(), 10, none)
	require.Len(t, got, 1, "other tasks are untouched")

	x.ReplaceTask("B", New()) // finished, or removed
	require.Equal(t, []string{"A"}, x.Active)
	require.False(t, x.HasReady("B"))
}
