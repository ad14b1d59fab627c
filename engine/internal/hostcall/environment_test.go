package hostcall

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
)

// TestArtifactProvenanceRecordsTheEnvironment: an artifact's provenance
// holds the environment facts its attempt ran under.
func TestArtifactProvenanceRecordsTheEnvironment(t *testing.T) {
	t.Parallel()
	a := setup(t, &taskfile.Step{Name: "art"})
	a.Environment = map[string]string{"head": "0123456789abcdef0123456789abcdef01234567", "config": "c0ffee"}
	out, err := a.PutArtifact(context.Background(), []byte(`{"name":"evidence.json"}`), []byte(`{}`))
	require.NoError(t, err)
	var ref struct{ Ref string }
	require.NoError(t, json.Unmarshal(out, &ref))
	var ps []ledger.Provenance
	require.NoError(t, a.Store.Read(func(r ledger.Reader) (err error) {
		ps, err = r.Artifacts(a.Lease.Task)
		return err
	}))
	require.Len(t, ps, 1)
	require.Equal(t, ref.Ref, ps[0].Ref)
	require.Equal(t, a.Environment, ps[0].Environment)
}
