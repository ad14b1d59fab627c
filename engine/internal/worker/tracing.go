package worker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lhengine/lhengine/ledger"
)

var noTracer = noop.NewTracerProvider().Tracer("")

func (w *Worker) tracer() trace.Tracer {
	if w.cfg.Tracer == nil {
		return noTracer
	}
	return w.cfg.Tracer
}

// unitSpan starts the span of one attempt of a unit, dated from its lease's
// grant (the claim, or the commit that handed it back), with the unit's
// place and lease as attributes.
func (w *Worker) unitSpan(ctx context.Context, l ledger.Lease) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("lhengine.task", l.Task),
		attribute.Int("lhengine.step", l.Step),
		attribute.Int("lhengine.item", l.Item),
		attribute.Int("lhengine.attempt", l.Attempt),
		attribute.Int64("lhengine.epoch", int64(l.Epoch)),
		attribute.String("lhengine.owner", l.Owner),
	)}
	if !l.Unit.Claimed.IsZero() {
		opts = append(opts, trace.WithTimestamp(l.Unit.Claimed))
	}
	ctx, span := w.tracer().Start(ctx, "lhengine.unit", opts...)
	if !l.Unit.Claimed.IsZero() {
		span.AddEvent("claimed", trace.WithTimestamp(l.Unit.Claimed))
	}
	return ctx, span
}

// endSpan ends span, marked failed with err if there is one.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
