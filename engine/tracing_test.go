package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// TestEveryUnitIsTraced: with a tracer provider, each unit of a three-item
// fan-out is one trace: a unit span dated from its lease's grant, and under
// it the run (with the plugin's http.fetch under the run) and the commit.
func TestEveryUnitIsTraced(t *testing.T) {
	t.Parallel()
	g := testgate.New(t)
	g.Open()
	dir := t.TempDir()
	testwasm.Copy(t, testwasm.CGuest(t, "gate"), filepath.Join(dir, "gate.wasm"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "task.hcl"), []byte(`task "traced" {`+g.Step("each", "gate.wasm", 3, 3)+`}`), 0o644))

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(dir, "home"), TracerProvider: tp})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close(ctx)) }()
	task, _, err := e.Submit(ctx, filepath.Join(dir, "task.hcl"), engine.SubmitOptions{})
	require.NoError(t, err)
	require.NoError(t, e.Work(ctx, engine.WorkOptions{Task: task.ID, Concurrency: 3, ExitWhenIdle: true}))
	got, err := e.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Succeeded, got.Status)
	require.NoError(t, tp.ForceFlush(ctx))

	byID := map[string]tracetest.SpanStub{}
	var units []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		byID[s.SpanContext.SpanID().String()] = s
		if s.Name == "lhengine.unit" {
			units = append(units, s)
		}
	}
	require.Len(t, units, 3, "one trace per unit")
	items := map[int64]bool{}
	for _, u := range units {
		attrs := attrMap(u.Attributes)
		require.Equal(t, task.ID, attrs["lhengine.task"].AsString())
		items[attrs["lhengine.item"].AsInt64()] = true
		require.Len(t, u.Events, 1)
		require.Equal(t, "claimed", u.Events[0].Name)
		require.Equal(t, u.StartTime, u.Events[0].Time, "the unit's span starts at its lease's grant")
		children := map[string][]tracetest.SpanStub{}
		for _, s := range spans.GetSpans() {
			if s.Parent.SpanID() == u.SpanContext.SpanID() {
				children[s.Name] = append(children[s.Name], s)
			}
		}
		require.Len(t, children["lhengine.run"], 1)
		require.Len(t, children["lhengine.commit"], 1)
		run, commit := children["lhengine.run"][0], children["lhengine.commit"][0]
		require.False(t, commit.StartTime.Before(run.EndTime), "the commit follows the run")
		var calls []string
		for _, s := range spans.GetSpans() {
			if s.Parent.SpanID() == run.SpanContext.SpanID() && s.Name == "lhengine.host_call" {
				calls = append(calls, attrMap(s.Attributes)["lhengine.call"].AsString())
			}
		}
		require.Equal(t, []string{"http.fetch"}, calls, "the plugin's host call is under its run")
		require.Equal(t, u.SpanContext.TraceID(), run.SpanContext.TraceID())
		require.WithinDuration(t, u.EndTime, commit.EndTime, time.Second)
	}
	require.Len(t, items, 3, "the three items")
}

func attrMap(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}
