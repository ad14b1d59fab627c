package worker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/lhengine/lhengine/ledger"
)

// noSpan is the span of an untraced unit: it records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// span starts a child span of ctx's called name with attrs; untraced, it
// builds nothing.
func (w *Worker) span(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if w.cfg.Tracer == nil {
		return ctx, noSpan
	}
	return w.cfg.Tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// unitSpan starts the span of one attempt of a unit, dated from its lease's
// grant (the claim, or the commit that handed it back), with the unit's
// place and lease as attributes.
func (w *Worker) unitSpan(ctx context.Context, l ledger.Lease) (context.Context, trace.Span) {
	if w.cfg.Tracer == nil {
		return ctx, noSpan // untraced: nothing built per unit
	}
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
	ctx, span := w.cfg.Tracer.Start(ctx, "lhengine.unit", opts...)
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
