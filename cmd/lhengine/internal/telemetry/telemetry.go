// Package telemetry makes the OpenTelemetry tracer provider a command hands
// the engine, from the standard OTEL_* environment: traces of every unit
// go over OTLP/HTTP when an endpoint is configured, and nowhere otherwise.
package telemetry

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Enabled reports whether the environment asks for traces:
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// and OTEL_TRACES_EXPORTER is not "none".
func Enabled() bool {
	if os.Getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// TracerProvider returns a provider that batches spans to the OTLP/HTTP
// endpoint the environment names (the exporter reads every
// OTEL_EXPORTER_OTLP_* variable: endpoint, headers, timeout, TLS), as
// service OTEL_SERVICE_NAME (default "lhengine") of version; nil when
// Enabled is false. shutdown sends what is left; call it before exiting.
func TracerProvider(ctx context.Context, version string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	if !Enabled() {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, err
	}
	name := os.Getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = "lhengine"
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(name), semconv.ServiceVersion(version)))
	if err != nil {
		return nil, nil, err
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}
