package hostcall

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/testmodel"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

// FuzzModelGenerate: any request a guest sends is answered with a response
// of the documented shape or refused with a host status; nothing panics.
func FuzzModelGenerate(f *testing.F) {
	for _, seed := range []string{toolRequest, toolAnswer,
		`{"model":"m","key":"k","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":1,"stop":["x"]}`,
		`{"model":"m","key":"k","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"1","name":"t","arguments":"not json"}]}]}`,
		`{"model":"m","key":"","messages":null}`, `{}`, `[]`, `{"model":"m","key":"k","messages":[{"role":"tool","tool_call_id":"x","content":"r"}],"tools":[{"name":"t","parameters":{}}]}`,
	} {
		f.Add(seed)
	}
	srv := testmodel.New(f)
	srv.Key = testKey
	a := setupFuzz(f, modelStep(srv, taskfile.ProviderAnthropic))
	f.Fuzz(func(t *testing.T, req string) {
		out, err := a.Call(context.Background(), "model.generate", []byte(req))
		var he *guest.HostError
		switch {
		case err == nil:
			var resp ModelResponse
			if err := json.Unmarshal(out, &resp); err != nil || resp.ToolCalls == nil {
				t.Fatalf("response %s: %v", out, err)
			}
		case !errors.As(err, &he):
			t.Fatalf("not a host status: %v", err)
		}
	})
}

// FuzzProviderAnswer: a provider's answer, whatever it holds, is read or
// refused; nothing panics.
func FuzzProviderAnswer(f *testing.F) {
	f.Add(`{"choices":[{"message":{"content":"hi","tool_calls":[{"id":"1","type":"function","function":{"name":"t","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`)
	f.Add(`{"content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"1","name":"t","input":{"a":1}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2}}`)
	f.Add(`{"choices":[]}`)
	f.Add(`null`)
	models := []*taskfile.Model{{Name: "o", Provider: taskfile.ProviderOpenAI}, {Name: "a", Provider: taskfile.ProviderAnthropic}}
	f.Fuzz(func(t *testing.T, answer string) {
		for _, m := range models {
			resp, err := parseProviderAnswer(m, []byte(answer))
			if err == nil && resp.ToolCalls == nil {
				t.Fatal("tool_calls must be an array")
			}
		}
	})
}

// setupFuzz is setup for a fuzz target: an in-memory store with one
// claimed unit of step, under a lease long enough for the whole run.
func setupFuzz(f *testing.F, step *taskfile.Step) *Attempt {
	f.Helper()
	s, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if _, _, err := s.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: step.Name}}}); err != nil {
		f.Fatal(err)
	}
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1, LeaseFor: 24 * time.Hour})
	if err != nil || len(c.Leases) != 1 {
		f.Fatal(err)
	}
	a := &Attempt{Store: s, Lease: c.Leases[0], Step: step}
	withKey(a)
	return a
}
