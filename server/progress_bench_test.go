package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/server"
	"github.com/lhengine/lhengine/store"
)

// BenchmarkStatusAt100kUnits: reading what a task's status reads (its
// record, server.ReadProgress, and the report's newest 200 notes) once
// 1,000 and once 100,000 units of its fan-out committed, each with a
// finding, on a Badger store on disk (no fsync while the units are
// written). The read is the same few reads at both sizes
// (specs/ledger.md, "Progress").
func BenchmarkStatusAt100kUnits(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("units=%d", n), func(b *testing.B) {
			s, id := committedTask(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				require.NoError(b, s.Read(func(r ledger.Reader) error {
					t, err := r.Task(id)
					if err != nil {
						return err
					}
					p, err := server.ReadProgress(r, t, string(t.Status), time.Now())
					if err == nil && p.Done != n {
						err = fmt.Errorf("done %d, want %d", p.Done, n)
					}
					if err != nil {
						return err
					}
					notes, err := r.RecentNotes(t, 200, nil)
					if err == nil && len(notes) != 200 {
						err = fmt.Errorf("%d notes, want 200", len(notes))
					}
					return err
				}))
			}
		})
	}
}

// committedTask opens a store on disk and commits n units of a fan-out
// task, each with a finding, one unit every 10ms of its clock.
func committedTask(b *testing.B, n int) (*store.Store, string) {
	b.Helper()
	ctx := context.Background()
	var clock atomic.Int64
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	items := make([]ledger.Item, n)
	for i := range items {
		items[i] = ledger.Item{Key: json.RawMessage(fmt.Sprint(i)), Value: json.RawMessage(`1`)}
	}
	s, err := store.Open(b.TempDir(), store.Options{NoSync: true,
		Now:     func() time.Time { return start.Add(time.Duration(clock.Load()) * 10 * time.Millisecond) },
		Planner: func(context.Context, ledger.Reader, *ledger.Task, int) ([]ledger.Item, error) { return items, nil }})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, s.Close()) })
	t, _, err := s.Submit(ctx, ledger.NewTask{Name: "audit", Steps: []ledger.StepState{{Name: "pages", FanOut: true, Limit: 64}},
		Progress: &ledger.ProgressSpec{Unit: "pages", Step: "pages", StepIndex: 0}})
	require.NoError(b, err)
	req := ledger.ClaimRequest{Owner: s.Owner("bench"), Max: 64, LeaseFor: time.Hour}
	done := 0
	for done < n {
		c, err := s.Claim(ctx, req)
		require.NoError(b, err)
		require.NotEmpty(b, c.Leases)
		for _, l := range c.Leases {
			r := ledger.Result{Lease: l, Output: json.RawMessage(`1`), HeaderOnly: true}
			r.Notes = []ledger.Note{{Kind: ledger.NoteFinding, Text: fmt.Sprintf("page %d has no title", l.Item)}}
			clock.Add(1)
			_, err := s.Commit(ctx, r)
			require.NoError(b, err)
			done++
		}
	}
	return s, t.ID
}
