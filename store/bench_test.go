package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// BenchmarkClaimCommit measures one serial claim + commit of a plain step on
// disk: the ledger's share of a durable step.
func BenchmarkClaimCommit(b *testing.B) {
	for _, sync := range []bool{true, false} {
		name := "fsync"
		if !sync {
			name = "nosync"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(b.TempDir(), Options{NoSync: !sync})
			require.NoError(b, err)
			defer s.Close()
			steps := make([]ledger.StepState, 5)
			for i := range steps {
				steps[i] = ledger.StepState{Name: "s"}
			}
			b.ResetTimer()
			for i := range b.N {
				if i%5 == 0 {
					_, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: steps})
					require.NoError(b, err)
				}
				c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
				require.NoError(b, err)
				require.Len(b, c.Leases, 1)
				_, err = s.Commit(ctx, ledger.Result{Lease: c.Leases[0], Output: json.RawMessage(`{"ok":true}`)})
				require.NoError(b, err)
			}
		})
	}
}

// BenchmarkSync measures one durable write on its own: a transaction and
// the disk sync every commit waits for. It is the floor of a serial step.
func BenchmarkSync(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	val := make([]byte, 512)
	b.ResetTimer()
	for i := range b.N {
		err := s.update(ctx, func(t *kv.Tx) error {
			t.Durable = true
			return t.Put(fmt.Appendf(nil, "x/%d", i), val)
		})
		require.NoError(b, err)
	}
}

// BenchmarkSerialCommitLength: the ledger's share of a serial step as the
// pipeline grows: commit-and-claim of one plain step after another, as the
// worker does it, without syncs. The figure is the same at any length.
func BenchmarkSerialCommitLength(b *testing.B) { serialCommitLength(b, true) }

// BenchmarkSerialCommitLengthWithTask: the same for a caller that reads the
// committed task (a progress display): the commit also reads every step.
func BenchmarkSerialCommitLengthWithTask(b *testing.B) { serialCommitLength(b, false) }

func serialCommitLength(b *testing.B, headerOnly bool) {
	for _, n := range []int{50, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(b.TempDir(), Options{NoSync: true})
			require.NoError(b, err)
			defer s.Close()
			steps := make([]ledger.StepState, n)
			for i := range steps {
				steps[i] = ledger.StepState{Name: fmt.Sprint("s", i)}
			}
			next := ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1}
			var l *ledger.Lease
			b.ResetTimer()
			for range b.N {
				if l == nil {
					b.StopTimer()
					_, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: steps})
					require.NoError(b, err)
					c, err := s.Claim(ctx, next)
					require.NoError(b, err)
					l = &c.Leases[0]
					b.StartTimer()
				}
				_, c, err := s.commitAndClaimSynced(ctx, ledger.Result{Lease: *l, Output: json.RawMessage(`{"ok":true}`), HeaderOnly: headerOnly}, next)
				require.NoError(b, err)
				l = nil
				if len(c.Leases) > 0 {
					l = &c.Leases[0]
				}
			}
		})
	}
}

// BenchmarkStepOutputFanOut reads the output of a completed 20,000-item
// fan-out step, as a step reading step.NAME.output does: every unit's
// committed output, in item order, as one JSON array.
func BenchmarkStepOutputFanOut(b *testing.B) {
	const items = 20_000
	ctx := context.Background()
	s, err := Open(b.TempDir(), Options{NoSync: true, Planner: fanOutPlanner(items)})
	require.NoError(b, err)
	defer s.Close()
	task, _, err := s.Submit(ctx, ledger.NewTask{Name: "fan", Steps: []ledger.StepState{{Name: "each", FanOut: true, Limit: 256}}})
	require.NoError(b, err)
	for {
		c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 256})
		require.NoError(b, err)
		if len(c.Leases) == 0 {
			break
		}
		for _, l := range c.Leases {
			_, err := s.Commit(ctx, ledger.Result{Lease: l, Output: json.RawMessage(fmt.Sprintf(`{"item":%d,"mode":"item"}`, l.Item))})
			require.NoError(b, err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, s.Read(func(r ledger.Reader) error {
			out, err := r.StepOutput(task.ID, 0)
			if err == nil && !bytes.HasPrefix(out, []byte(`[{"item":0,`)) {
				err = fmt.Errorf("output starts %.40s", out)
			}
			return err
		}))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*items), "ns/unit")
}
