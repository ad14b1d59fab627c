package hostcall

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/testbadger"
	"github.com/lhengine/lhengine/internal/testmodel"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store"
)

const testKey = "sk-test-7f3a9c1e55d2b0aa"

// modelStep is a step granted the model "m" of provider proto served by
// srv, whose key is in the environment variable TEST_MODEL_KEY.
func modelStep(srv *testmodel.Server, proto string) *taskfile.Step {
	base := srv.URL
	if proto == taskfile.ProviderOpenAI {
		base += "/v1"
	}
	m := &taskfile.Model{Name: "m", Provider: proto, BaseURL: base, ID: "test-model", APIKeyEnv: "TEST_MODEL_KEY",
		InputPrice: 3, OutputPrice: 15, Timeout: 5 * time.Second, MaxTokens: 256}
	return &taskfile.Step{Name: "think", Models: map[string]*taskfile.Model{"m": m}}
}

func modelAttempt(t *testing.T, srv *testmodel.Server, proto string, opts store.Options) *Attempt {
	t.Helper()
	srv.Key = testKey
	a := setupIn(t, modelStep(srv, proto), opts)
	withKey(a)
	return a
}

func withKey(a *Attempt) {
	a.Getenv = func(name string) string {
		if name == "TEST_MODEL_KEY" {
			return testKey
		}
		return ""
	}
	a.ModelBackoff = time.Millisecond
}

func generate(t *testing.T, a *Attempt, req string) (ModelResponse, error) {
	t.Helper()
	b, err := a.Call(context.Background(), "model.generate", []byte(req))
	if err != nil {
		return ModelResponse{}, err
	}
	var out ModelResponse
	require.NoError(t, json.Unmarshal(b, &out))
	return out, nil
}

func usage(t *testing.T, a *Attempt) ledger.ModelUsage {
	t.Helper()
	task, err := a.Store.Task(context.Background(), a.Lease.Task)
	require.NoError(t, err)
	return task.ModelUsage
}

const toolRequest = `{"model":"m","key":"plan-1","messages":[
	{"role":"system","content":"You are terse."},
	{"role":"user","content":"weather in Paris"}],
  "tools":[{"name":"lookup","description":"looks things up","parameters":{"type":"object","properties":{"input":{"type":"string"}}}}]}`

const toolAnswer = `{"model":"m","key":"plan-2","messages":[
	{"role":"system","content":"You are terse."},
	{"role":"user","content":"weather in Paris"},
	{"role":"assistant","content":"","tool_calls":[{"id":"call_1","name":"lookup","arguments":{"input":"weather in Paris"}}]},
	{"role":"tool","tool_call_id":"call_1","content":"sunny and mild"}],
  "tools":[{"name":"lookup","parameters":{"type":"object"}}]}`

// TestModelGenerateSpeaksBothProtocols: a tool-using exchange through each
// protocol: the tool call, then the answer to its result, with usage and
// cost charged to the task, and the key in the provider's header.
func TestModelGenerateSpeaksBothProtocols(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{taskfile.ProviderOpenAI, taskfile.ProviderAnthropic} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			srv := testmodel.New(t)
			a := modelAttempt(t, srv, proto, store.Options{InMemory: true})

			out, err := generate(t, a, toolRequest)
			require.NoError(t, err)
			require.Equal(t, StopToolCalls, out.StopReason)
			require.Len(t, out.ToolCalls, 1)
			require.Equal(t, "lookup", out.ToolCalls[0].Name)
			require.NotEmpty(t, out.ToolCalls[0].ID)
			require.JSONEq(t, `{"input":"weather in Paris"}`, string(out.ToolCalls[0].Arguments))
			require.Equal(t, ModelUsage{InputTokens: 6, OutputTokens: 5}, out.Usage, "words of the system and user messages; 5 per tool call")
			require.InDelta(t, (6*3+5*15)/1e6, out.Cost, 1e-12)
			require.False(t, out.Replayed)

			out2, err := generate(t, a, toolAnswer)
			require.NoError(t, err)
			require.Equal(t, StopEnd, out2.StopReason)
			require.Equal(t, "tool said: sunny and mild", out2.Text)
			require.Empty(t, out2.ToolCalls)
			require.NotNil(t, out2.ToolCalls, "always an array")

			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			for _, r := range reqs {
				require.Equal(t, proto, r.Protocol)
				if proto == taskfile.ProviderOpenAI {
					require.Equal(t, "Bearer "+testKey, r.Header.Get("Authorization"))
				} else {
					require.Equal(t, testKey, r.Header.Get("x-api-key"))
					require.Equal(t, "2023-06-01", r.Header.Get("anthropic-version"))
				}
			}
			var body map[string]any
			require.NoError(t, json.Unmarshal(reqs[0].Body, &body))
			require.Equal(t, "test-model", body["model"])
			require.EqualValues(t, 256, body["max_tokens"], "the model's cap when the request names none")

			u := usage(t, a)
			require.EqualValues(t, 2, u.Calls)
			require.Equal(t, out.Usage.InputTokens+out2.Usage.InputTokens, u.InputTokens)
			require.Equal(t, out.Usage.OutputTokens+out2.Usage.OutputTokens, u.OutputTokens)
			require.InDelta(t, out.Cost+out2.Cost, u.Cost, 1e-12)

			var events []ledger.Event
			require.NoError(t, a.Store.Read(func(r ledger.Reader) error {
				events, err = r.Events(a.Lease.Task, 0, 0)
				return err
			}))
			var calls []*ledger.ModelCallEvent
			for _, e := range events {
				if e.Type == ledger.EvModelCall {
					calls = append(calls, e.Model)
					require.NotContains(t, e.Message, "Paris", "no prompt text in events")
					require.NotContains(t, e.Message, "sunny")
				}
			}
			require.Len(t, calls, 2)
			require.Equal(t, ledger.ModelCallEvent{Model: "m", ModelID: "test-model", Key: "plan-1", InputTokens: 6, OutputTokens: 5, Cost: out.Cost}, *calls[0])
		})
	}
}

// TestModelGenerateReplaysTheJournal: the same call again (as a retried
// attempt makes it) is answered from the journal with replayed true, is
// not sent and not billed; the same key with another request is a new
// call.
func TestModelGenerateReplaysTheJournal(t *testing.T) {
	t.Parallel()
	srv := testmodel.New(t)
	a := modelAttempt(t, srv, taskfile.ProviderOpenAI, store.Options{InMemory: true})
	req := `{"model":"m","key":"k","messages":[{"role":"user","content":"hello there"}],"temperature":0.5}`
	first, err := generate(t, a, req)
	require.NoError(t, err)
	require.Equal(t, "echo: hello there", first.Text)

	// Another attempt of the unit makes the same call; the key order of
	// the request does not matter.
	a.Lease.Attempt++
	again, err := generate(t, a, `{"temperature":0.5,"messages":[{"content":"hello there","role":"user"}],"key":"k","model":"m"}`)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	first.Replayed = true
	require.Equal(t, first, again)
	require.Equal(t, 1, len(srv.Requests()), "sent once")
	require.EqualValues(t, 1, usage(t, a).Calls, "billed once")
	require.InDelta(t, first.Cost, usage(t, a).Cost, 1e-12)

	other, err := generate(t, a, `{"model":"m","key":"k","messages":[{"role":"user","content":"something else"}]}`)
	require.NoError(t, err)
	require.False(t, other.Replayed, "another request under the key is another call")
	require.Equal(t, "echo: something else", other.Text)
	require.Equal(t, 2, len(srv.Requests()))
	require.EqualValues(t, 2, usage(t, a).Calls)

	var calls []ledger.ModelCall
	require.NoError(t, a.Store.Read(func(r ledger.Reader) error {
		calls, err = r.ModelCalls(a.Lease.Task)
		return err
	}))
	require.Len(t, calls, 2)
	for _, c := range calls {
		require.Equal(t, "k", c.Key)
		require.Len(t, c.RequestSHA256, 64)
	}
}

// TestModelGenerateRefusals: no grant is DENIED, a malformed request
// INVALID, a missing key variable UNAVAILABLE; nothing is sent.
func TestModelGenerateRefusals(t *testing.T) {
	t.Parallel()
	srv := testmodel.New(t)
	a := modelAttempt(t, srv, taskfile.ProviderOpenAI, store.Options{InMemory: true})
	ok := `{"model":"m","key":"k","messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		req  string
		want int32
	}{
		{`{"model":"other","key":"k","messages":[{"role":"user","content":"hi"}]}`, guest.StatusDenied},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, guest.StatusInvalid},
		{`{"model":"m","key":"k","messages":[]}`, guest.StatusInvalid},
		{`{"model":"m","key":"k","messages":[{"role":"robot","content":"hi"}]}`, guest.StatusInvalid},
		{`{"model":"m","key":"k","messages":[{"role":"tool","content":"hi"}]}`, guest.StatusInvalid},
		{`{"model":"m","key":"k","messages":[{"role":"user","content":"hi"}],"temperature":9}`, guest.StatusInvalid},
		{`{"model":"m","key":"k","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"t","parameters":[1]}]}`, guest.StatusInvalid},
		{`{"model":"m","key":"k","prompt":"hi"}`, guest.StatusInvalid},
	} {
		_, err := generate(t, a, c.req)
		require.Equal(t, c.want, status(t, err), c.req)
	}

	bare := setup(t, &taskfile.Step{Name: "plain"})
	_, err := generate(t, bare, ok)
	require.Equal(t, guest.StatusDenied, status(t, err), "a step without models may call none")

	a.Getenv = func(string) string { return "" }
	_, err = generate(t, a, ok)
	require.Equal(t, guest.StatusUnavailable, status(t, err))
	require.Contains(t, err.Error(), "TEST_MODEL_KEY")
	require.Empty(t, srv.Requests(), "nothing was sent")
}

// TestModelGenerateProviderErrors: a rate limit with Retry-After and
// server errors are sent again; a persistent 500 ends UNAVAILABLE; a 4xx
// is INVALID at once, with the provider's message but never the key.
func TestModelGenerateProviderErrors(t *testing.T) {
	t.Parallel()
	req := `{"model":"m","key":"k","messages":[{"role":"user","content":"hi"}]}`
	for _, proto := range []string{taskfile.ProviderOpenAI, taskfile.ProviderAnthropic} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			srv := testmodel.New(t)
			a := modelAttempt(t, srv, proto, store.Options{InMemory: true})
			srv.FailNext(1, http.StatusTooManyRequests, "0")
			srv.FailNext(1, http.StatusServiceUnavailable, "")
			out, err := generate(t, a, req)
			require.NoError(t, err)
			require.Equal(t, "echo: hi", out.Text)
			require.Len(t, srv.Requests(), 3)
			require.Equal(t, 1, srv.Answered())
			require.EqualValues(t, 1, usage(t, a).Calls)

			srv.FailNext(modelTries, http.StatusInternalServerError, "")
			_, err = generate(t, a, strings.Replace(req, `"k"`, `"k2"`, 1))
			require.Equal(t, guest.StatusUnavailable, status(t, err))
			require.Contains(t, err.Error(), "500")
			require.Len(t, srv.Requests(), 3+modelTries)

			srv.Key = "another key"
			_, err = generate(t, a, strings.Replace(req, `"k"`, `"k3"`, 1))
			require.Equal(t, guest.StatusInvalid, status(t, err))
			require.Contains(t, err.Error(), "401")
			require.Contains(t, err.Error(), "wrong API key")
			require.NotContains(t, err.Error(), testKey)
			require.Len(t, srv.Requests(), 4+modelTries, "a 4xx is not sent again")
			require.EqualValues(t, 1, usage(t, a).Calls, "failures are not billed")
		})
	}
}

// TestModelGenerateRetriesWithinTheStepDeadline: with the step's time
// running out, a rate limit asking for a longer wait ends the call
// UNAVAILABLE at once instead of waiting past the deadline.
func TestModelGenerateRetriesWithinTheStepDeadline(t *testing.T) {
	t.Parallel()
	srv := testmodel.New(t)
	a := modelAttempt(t, srv, taskfile.ProviderOpenAI, store.Options{InMemory: true})
	srv.FailNext(1, http.StatusTooManyRequests, "3600")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := a.Call(ctx, "model.generate", []byte(`{"model":"m","key":"k","messages":[{"role":"user","content":"hi"}]}`))
	require.Equal(t, guest.StatusUnavailable, status(t, err))
	require.Less(t, time.Since(start), 30*time.Second)
	require.Len(t, srv.Requests(), 1)
}

// TestModelKeyNeverStored: after calls that succeeded, were replayed and
// were refused, no value in the store holds the API key.
func TestModelKeyNeverStored(t *testing.T) {
	t.Parallel()
	srv := testmodel.New(t)
	srv.Key = testKey
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	_, _, err = s.Submit(ctx, ledger.NewTask{Name: "t", Steps: []ledger.StepState{{Name: "think"}}})
	require.NoError(t, err)
	c, err := s.Claim(ctx, ledger.ClaimRequest{Owner: s.Owner("w"), Max: 1})
	require.NoError(t, err)
	a := &Attempt{Store: s, Lease: c.Leases[0], Step: modelStep(srv, taskfile.ProviderAnthropic)}
	withKey(a)
	req := `{"model":"m","key":"k","messages":[{"role":"user","content":"hi"}]}`
	_, err = generate(t, a, req)
	require.NoError(t, err)
	_, err = generate(t, a, req)
	require.NoError(t, err)
	srv.Key = "rotated"
	_, err = generate(t, a, strings.Replace(req, "hi", "bye", 1))
	require.Error(t, err)
	require.NotContains(t, err.Error(), testKey)
	require.NoError(t, s.Close())

	require.Greater(t, testbadger.RequireAbsent(t, dir, testKey), 5)
}

// TestModelRecordAndReplay: --model-record writes each live response under
// its request's hash; a replay set read from that folder and kept in
// another store answers the same calls without sending anything, after the
// folder is gone, and a call with no recording fails naming its hash.
func TestModelRecordAndReplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := testmodel.New(t)
	a := modelAttempt(t, srv, taskfile.ProviderAnthropic, store.Options{InMemory: true})
	a.ModelRecord = dir
	live1, err := generate(t, a, toolRequest)
	require.NoError(t, err)
	live2, err := generate(t, a, toolAnswer)
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 2)
	require.Len(t, srv.Requests(), 2)

	off := testmodel.New(t)
	b := modelAttempt(t, off, taskfile.ProviderAnthropic, store.Options{InMemory: true})
	set, err := ReadReplayDir(dir)
	require.NoError(t, err)
	pin := set.Pin()
	require.Equal(t, 2, pin.Recordings)
	_, _, err = b.Store.Submit(context.Background(), ledger.NewTask{Name: "holder", Steps: []ledger.StepState{{Name: "s", Limit: 1}},
		Manifest: ledger.Manifest{Plugins: map[string]ledger.PluginPin{}, ModelReplay: &pin}, Replay: set})
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(dir))
	idx, err := b.Store.ReplayIndex(pin.SHA256)
	require.NoError(t, err)
	b.Replay = &Replay{Pin: pin, Index: idx}
	b.Getenv = func(string) string { return "" } // no key needed: nothing is sent
	got1, err := generate(t, b, toolRequest)
	require.NoError(t, err)
	got2, err := generate(t, b, toolAnswer)
	require.NoError(t, err)
	require.Equal(t, live1, got1, "the same response, cost counted at the task's prices")
	require.Equal(t, live2, got2)
	require.Empty(t, off.Requests(), "nothing sent")
	require.EqualValues(t, 2, usage(t, b).Calls, "journaled and counted like live calls")

	_, err = generate(t, b, strings.Replace(toolRequest, "Paris", "Rome", 1))
	require.Equal(t, guest.StatusUnavailable, status(t, err))
	require.Contains(t, err.Error(), "no recorded response for request sha256 ")
	require.Contains(t, err.Error(), pin.SHA256)
}

// TestReadReplayDir: a replay folder is read whole at submit; what is not
// a recording of the request its name says is refused, naming the file,
// and so is a folder with none.
func TestReadReplayDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := ReadReplayDir(dir)
	require.ErrorContains(t, err, "holds no recordings")
	_, err = ReadReplayDir(filepath.Join(dir, "missing"))
	require.ErrorContains(t, err, "--model-replay")

	sum := strings.Repeat("ab", 32)
	rec := fmt.Sprintf(`{"request_sha256": %q, "provider": "openai", "model_id": "m", "response": {"text": "hi"}}`, sum)
	require.NoError(t, os.WriteFile(filepath.Join(dir, sum+".json"), []byte(rec), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("not read"), 0o644))
	set, err := ReadReplayDir(dir)
	require.NoError(t, err)
	require.Equal(t, 1, set.Pin().Recordings)
	require.Equal(t, dir, set.Pin().Dir)

	other := strings.Repeat("cd", 32)
	require.NoError(t, os.WriteFile(filepath.Join(dir, other+".json"), []byte(rec), 0o644))
	_, err = ReadReplayDir(dir)
	require.ErrorContains(t, err, other+".json is not the recording of request sha256 "+other)
	require.NoError(t, os.WriteFile(filepath.Join(dir, other+".json"), []byte("{"), 0o644))
	_, err = ReadReplayDir(dir)
	require.ErrorContains(t, err, "is not a recorded model response")
}

// heldCommit is the Durability of an earlier commit whose sync the test
// holds until it closes release.
type heldCommit struct {
	waiting chan struct{}
	release chan struct{}
}

func (h *heldCommit) Wait(ctx context.Context) error {
	close(h.waiting)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestModelCallWaitsForTheEarlierCommit: a model call of a unit that runs
// while the slot's previous commit is still syncing is sent only once that
// commit is on disk: no provider is asked on the strength of a commit a
// crash could undo.
func TestModelCallWaitsForTheEarlierCommit(t *testing.T) {
	t.Parallel()
	srv := testmodel.New(t)
	a := modelAttempt(t, srv, taskfile.ProviderOpenAI, store.Options{})
	held := &heldCommit{waiting: make(chan struct{}), release: make(chan struct{})}
	a.After = held
	done := make(chan error, 1)
	go func() {
		_, err := a.Call(context.Background(), "model.generate", []byte(toolRequest))
		done <- err
	}()
	select {
	case <-held.waiting:
	case err := <-done:
		t.Fatalf("the call ended (%v) without waiting for the earlier commit", err)
	}
	require.Empty(t, srv.Requests(), "nothing is sent while the earlier commit syncs")
	close(held.release)
	require.NoError(t, <-done)
	require.Len(t, srv.Requests(), 1)
}

// TestModelSendCutOffIsPossiblyBilled: a send whose connection breaks after
// the provider read the request is counted as possibly billed (the size of
// the body, the most it can cost) beside the retry's answer, billed once; a
// send that found no server (the dial failed) and a request the provider
// refused count nothing; no call leaves an intent behind.
func TestModelSendCutOffIsPossiblyBilled(t *testing.T) {
	t.Parallel()
	var sent atomic.Int64
	var size atomic.Int64
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		size.Store(int64(len(body)))
		if sent.Add(1) == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // read, then gone without an answer
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"hi there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}`)
	}))
	t.Cleanup(flaky.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	refusing := testmodel.New(t)
	refusing.FailNext(1, http.StatusBadRequest, "")

	model := func(name, base string) *taskfile.Model {
		return &taskfile.Model{Name: name, Provider: taskfile.ProviderOpenAI, BaseURL: base + "/v1", ID: "test-model",
			InputPrice: 3, OutputPrice: 15, Timeout: 5 * time.Second, MaxTokens: 256}
	}
	a := setupIn(t, &taskfile.Step{Name: "think", Models: map[string]*taskfile.Model{
		"flaky": model("flaky", flaky.URL), "gone": model("gone", gone.URL), "refusing": model("refusing", refusing.URL),
	}}, store.Options{InMemory: true})
	a.ModelBackoff = time.Millisecond
	req := func(m string) string {
		return `{"model":"` + m + `","key":"k","messages":[{"role":"user","content":"hello"}]}`
	}

	out, err := generate(t, a, req("flaky"))
	require.NoError(t, err)
	require.Equal(t, "hi there", out.Text)
	require.EqualValues(t, 2, sent.Load())
	_, err = generate(t, a, req("gone"))
	require.Equal(t, guest.StatusUnavailable, status(t, err))
	_, err = generate(t, a, req("refusing"))
	require.Equal(t, guest.StatusInvalid, status(t, err))

	u := usage(t, a)
	require.EqualValues(t, 1, u.Calls, "the answered call")
	require.Equal(t, ledger.ModelPossiblyBilled{Calls: 1, RequestBytes: size.Load(), MaxCost: (float64(size.Load())*3 + 256*15) / 1e6}, u.PossiblyBilled)
	require.NoError(t, a.Store.Read(func(r ledger.Reader) error {
		calls, err := r.ModelCalls(a.Lease.Task)
		require.Len(t, calls, 1, "the response; no intent left")
		require.Empty(t, calls[0].State)
		return err
	}))
}
