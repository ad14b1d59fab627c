package hostcall

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/testmodel"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

// onDisk is setup with a durable on-disk store, as the engine runs.
func onDisk(b *testing.B, step *taskfile.Step) *Attempt {
	b.Helper()
	s, err := store.Open(b.TempDir(), store.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	_, _, err = s.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: step.Name}}})
	require.NoError(b, err)
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: time.Hour})
	require.NoError(b, err)
	step.Workspace = "rw"
	return &Attempt{Store: s, Lease: c.Leases[0], Step: step, Workspace: b.TempDir()}
}

// BenchmarkArtifactPut stores a fresh (never deduplicated) artifact per op,
// durably: chunks, blob record, provenance record and its sync.
func BenchmarkArtifactPut(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			a := onDisk(b, &taskfile.Step{Name: "art"})
			data := make([]byte, size)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := range b.N {
				rand.Read(data[:16])
				if _, err := a.PutArtifact(ctx, []byte(fmt.Sprintf(`{"name":"a%d"}`, i)), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEffect performs one journaled http effect per op against a
// loopback receiver: intent (synced), POST, outcome (synced).
func BenchmarkEffect(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) }))
	defer srv.Close()
	a := onDisk(b, &taskfile.Step{Name: "send", Effects: map[string]*taskfile.EffectGrant{"http": {Kind: "http", Hosts: []string{"127.0.0.1:*"}, Mode: "resend"}}})
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		req := fmt.Sprintf(`{"key":"k%d","kind":"http","request":{"method":"POST","url":"%s/x","body":"hi"}}`, i, srv.URL)
		if _, err := a.Call(ctx, "effect.do", []byte(req)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkModelGenerate makes one model.generate call per op against the
// loopback model server, on a durable store: live (a new key each op: the
// intent recorded with a sync, the POST, the answer parsed, the response,
// tokens and cost recorded with another) and replayed (the same call again: answered from the journal, an
// event recorded). host-µs/op is the time outside the server's handler.
func BenchmarkModelGenerate(b *testing.B) {
	for _, mode := range []string{"live", "replayed"} {
		b.Run(mode, func(b *testing.B) {
			srv := testmodel.New(b)
			srv.Key = testKey
			a := onDisk(b, modelStep(srv, taskfile.ProviderOpenAI))
			withKey(a)
			ctx := context.Background()
			req := func(i int) []byte {
				if mode == "replayed" {
					i = 0
				}
				return fmt.Appendf(nil, `{"model":"m","key":"k%d","messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":"what is the weather like in Paris today?"}]}`, i)
			}
			if _, err := a.Call(ctx, "model.generate", req(0)); err != nil {
				b.Fatal(err)
			}
			busy := srv.Busy()
			b.ResetTimer()
			for i := range b.N {
				if _, err := a.Call(ctx, "model.generate", req(i+1)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			host := b.Elapsed() - (srv.Busy() - busy)
			b.ReportMetric(float64(host.Microseconds())/float64(b.N), "host-µs/op")
		})
	}
}
