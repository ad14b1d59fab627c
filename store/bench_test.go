package store

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
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
			steps := make([]StepState, 5)
			for i := range steps {
				steps[i] = StepState{Name: "s"}
			}
			b.ResetTimer()
			for i := range b.N {
				if i%5 == 0 {
					_, _, err := s.Submit(ctx, NewTask{Name: "t", Steps: steps})
					require.NoError(b, err)
				}
				c, err := s.Claim(ctx, ClaimRequest{Owner: s.Owner("w"), Max: 1})
				require.NoError(b, err)
				require.Len(b, c.Leases, 1)
				_, err = s.Commit(ctx, Result{Lease: c.Leases[0], Output: json.RawMessage(`{"ok":true}`)})
				require.NoError(b, err)
			}
		})
	}
}
