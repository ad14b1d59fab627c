package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testbadger"
	"github.com/lhengine/lhengine/internal/testmodel"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// lockedBuffer is a log sink written from the engine's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestModelCallsFromAGoGuest runs a Go-SDK guest's tool-using loop
// against the loopback server through both protocols. Its first attempt
// fails after its calls; the retry makes the same calls and gets the
// recorded responses (replayed), so the server saw one request per call
// key and the task was billed once. A step without the grant is DENIED.
// The API key, read from the worker's environment, reaches the server and
// nowhere else: not the store, the events, the attempt logs or the
// engine's log.
func TestModelCallsFromAGoGuest(t *testing.T) {
	t.Parallel()
	wasm := testwasm.GoGuest(t, "model")
	for _, proto := range []string{"openai", "anthropic"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			srv := testmodel.New(t)
			secret := "sk-engine-test-" + proto + "-4b1d9e"
			srv.Key = secret
			envVar := "LHENGINE_TEST_MODEL_KEY_" + strings.ToUpper(proto)
			require.NoError(t, os.Setenv(envVar, secret))
			t.Cleanup(func() { os.Unsetenv(envVar) })
			base := srv.URL
			if proto == "openai" {
				base += "/v1"
			}

			dir := t.TempDir()
			testwasm.Copy(t, wasm, filepath.Join(dir, "model.wasm"))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), fmt.Appendf(nil, `
task "ask" {
  model "m" {
    provider     = %q
    base_url     = %q
    model        = "test-model"
    api_key_env  = %q
    input_price  = 2
    output_price = 10
  }
  step "ask" {
    plugin = "model.wasm"
    models = ["m"]
    input  = { model = "m", key = "q", prompt = "weather in Paris", tools = true, fail_attempts = 1 }
    retry {
      attempts = 2
      backoff  = "0s"
    }
  }
  step "plain" {
    plugin = "model.wasm"
    input  = { model = "m", key = "x", prompt = "hi", tools = false, fail_attempts = 0 }
  }
}
`, proto, base, envVar), 0o644))

			logs := &lockedBuffer{}
			home := filepath.Join(dir, "home")
			ctx := context.Background()
			e, err := engine.Open(ctx, engine.Config{Home: home, Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})})
			require.NoError(t, err)
			task, _, err := e.Submit(ctx, filepath.Join(dir, "task.hcl"), engine.SubmitOptions{})
			require.NoError(t, err)
			require.NoError(t, e.Work(ctx, engine.WorkOptions{Task: task.ID, Concurrency: 1, ExitWhenIdle: true}))
			task, err = e.Task(ctx, task.ID)
			require.NoError(t, err)
			require.Equal(t, ledger.Succeeded, task.Status, task.Reason)

			var ask, plain struct {
				Text         string
				Turns        int
				Replayed     []bool
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
				Cost         float64
				Status       int32
				Message      string
			}
			var events []ledger.Event
			var attempts []*ledger.Attempt
			require.NoError(t, e.Read(func(r ledger.Reader) error {
				out, err := r.StepOutput(task.ID, 0)
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(out, &ask))
				out, err = r.StepOutput(task.ID, 1)
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(out, &plain))
				events, err = r.Events(task.ID, 0, 0)
				require.NoError(t, err)
				attempts, err = r.Attempts(task.ID, 0)
				return err
			}))
			require.Equal(t, "tool said: result for weather in Paris", ask.Text)
			require.Equal(t, 2, ask.Turns, "a tool call, then the answer")
			require.Equal(t, []bool{true, true}, ask.Replayed, "the retry got both responses from the journal")
			require.Len(t, attempts, 2)
			require.Contains(t, string(attempts[0].Failure.Message), "failing attempt 1 on purpose")

			require.Len(t, srv.Requests(), 2, "one request per call key")
			require.Equal(t, 2, srv.Answered())
			u := task.ModelUsage
			require.EqualValues(t, 2, u.Calls, "billed once per call")
			require.Equal(t, ask.InputTokens, u.InputTokens)
			require.Equal(t, ask.OutputTokens, u.OutputTokens)
			require.InDelta(t, ask.Cost, u.Cost, 1e-12)
			require.InDelta(t, (float64(u.InputTokens)*2+float64(u.OutputTokens)*10)/1e6, u.Cost, 1e-12)

			var m *ledger.Manifest
			require.NoError(t, e.Read(func(r ledger.Reader) error {
				m, err = r.Manifest(task.ID)
				return err
			}))
			require.Equal(t, []ledger.ModelPin{{Name: "m", Provider: proto, BaseURL: base, ID: "test-model", APIKeyEnv: envVar,
				InputPrice: 2, OutputPrice: 10}}, m.Models, "the run manifest lists the models")

			require.EqualValues(t, -4, plain.Status, "DENIED without a grant")
			require.Contains(t, plain.Message, "may call no model")

			var billed, replayed int
			for _, ev := range events {
				if ev.Type != ledger.EvModelCall {
					continue
				}
				require.Equal(t, "m", ev.Model.Model)
				require.NotContains(t, ev.Message, "Paris", "no prompt text in events")
				if ev.Model.Replayed {
					replayed++
				} else {
					billed++
				}
			}
			require.Equal(t, 2, billed)
			require.Equal(t, 2, replayed)

			require.NoError(t, e.Close(ctx))
			require.NotContains(t, logs.String(), secret, "the engine's log")
			require.Contains(t, logs.String(), "failing attempt 1 on purpose", "the log was captured")
			require.Greater(t, testbadger.RequireAbsent(t, filepath.Join(home, "store"), secret), 10, "the store was read")
		})
	}
}

// TestModelCallFromACGuest: lhengine_generate of the C header reaches the
// model and returns the response; without the grant it is DENIED.
func TestModelCallFromACGuest(t *testing.T) {
	t.Parallel()
	wasm := testwasm.CGuest(t, "model")
	srv := testmodel.New(t)
	dir := t.TempDir()
	testwasm.Copy(t, wasm, filepath.Join(dir, "model.wasm"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), fmt.Appendf(nil, `
task "c" {
  model "m" {
    provider     = "openai"
    base_url     = "%s/v1"
    model        = "test-model"
    output_price = 1000000
  }
  step "ask" {
    plugin = "model.wasm"
    models = ["m"]
  }
  step "denied" { plugin = "model.wasm" }
}
`, srv.URL), 0o644))
	tb := &testBundle{dir: dir, ctx: context.Background()}
	tb.open(t)
	task := tb.submit(t, nil)
	task = tb.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, task.Status, task.Reason)
	require.JSONEq(t, `{"text":"echo: hello from C","tool_calls":[],"stop_reason":"end","usage":{"input_tokens":3,"output_tokens":4},"cost":4,"replayed":false}`,
		tb.output(t, task.ID, "ask"))
	require.JSONEq(t, `{"status":-4,"message_length":`+fmt.Sprint(len(`call model.generate: step "denied" may call no model (grant it some with models = [...])`))+`}`,
		tb.output(t, task.ID, "denied"))
	require.Len(t, srv.Requests(), 1)
	require.Empty(t, srv.Requests()[0].Header.Get("Authorization"), "no api_key_env: no key sent")
}
