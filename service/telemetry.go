package service

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gr00tgw/gr00tgw/config"
)

// NewTracerProvider builds the tracer provider selected by cfg:
// "none" returns a no-op provider; "stdout" writes spans to w
// (os.Stdout when nil), one JSON object per span; "otlp-grpc" and "otlp-http" export in batches to
// cfg.Traces.Endpoint (or the exporters' OTEL_EXPORTER_OTLP_* defaults).
// The returned shutdown flushes pending spans.
func NewTracerProvider(ctx context.Context, cfg config.OTel, version string, w io.Writer) (trace.TracerProvider, func(context.Context) error, error) {
	nop := func(context.Context) error { return nil }
	var exp sdktrace.SpanExporter
	var err error
	switch cfg.Traces.Exporter {
	case "", "none":
		return noop.NewTracerProvider(), nop, nil
	case "stdout":
		if w == nil {
			w = os.Stdout
		}
		exp, err = stdouttrace.New(stdouttrace.WithWriter(w))
	case "otlp-grpc":
		var opts []otlptracegrpc.Option
		if cfg.Traces.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Traces.Endpoint))
		}
		if cfg.Traces.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	case "otlp-http":
		var opts []otlptracehttp.Option
		if cfg.Traces.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpoint(cfg.Traces.Endpoint))
		}
		if cfg.Traces.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		return nil, nil, fmt.Errorf("tracing: unknown exporter[%s]", cfg.Traces.Exporter)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: exporter[%s]: %w", cfg.Traces.Exporter, err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", cfg.ServiceName), attribute.String("service.version", version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Traces.SampleRatio))),
	)
	return tp, tp.Shutdown, nil
}

// instruments are the gateway's OTel metrics.
type instruments struct {
	stageDuration metric.Float64Histogram
	pluginDur     metric.Float64Histogram
	warmupPCC     metric.Float64Gauge
	changes       metric.Int64Counter
	predictions   metric.Int64Counter
}

// SecondsBuckets are the bucket bounds of every duration histogram.
var SecondsBuckets = metric.WithExplicitBucketBoundaries(
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

func newInstruments(m metric.Meter, s *Core) (*instruments, error) {
	var in instruments
	var err error
	if in.stageDuration, err = m.Float64Histogram("gateway.stage.duration", metric.WithUnit("s"),
		metric.WithDescription("predict stage wall time (decode, plugin.pre, encode, queue, device, device.<stage>, plugin.post)"), SecondsBuckets); err != nil {
		return nil, err
	}
	if in.pluginDur, err = m.Float64Histogram("gateway.plugin.duration", metric.WithUnit("s"),
		metric.WithDescription("embodiment plugin call time by plugin, stage and outcome"), SecondsBuckets); err != nil {
		return nil, err
	}
	if in.warmupPCC, err = m.Float64Gauge("gateway.warmup.pcc",
		metric.WithDescription("lowest PCC of the warm-up actions against the demo golden")); err != nil {
		return nil, err
	}
	if in.changes, err = m.Int64Counter("gateway.embodiment.changes",
		metric.WithDescription("embodiment set changes at start-up and reload, by embodiment and change (added, replaced, retired, refused, unchanged)")); err != nil {
		return nil, err
	}
	if in.predictions, err = m.Int64Counter("gateway.predictions",
		metric.WithDescription("prediction attempts of every outcome by protocol (http, oip, zmq, openpi), route (HTTP route or protocol endpoint), embodiment and error code (\"\": served)")); err != nil {
		return nil, err
	}
	embodiments, err := m.Int64ObservableGauge("gateway.embodiments",
		metric.WithDescription("embodiments by status: served, refused, starting"))
	if err != nil {
		return nil, err
	}
	queue, err := m.Int64ObservableGauge("gateway.queue.depth",
		metric.WithDescription("requests waiting for the device lock"))
	if err != nil {
		return nil, err
	}
	inflight, err := m.Int64ObservableGauge("gateway.inflight",
		metric.WithDescription("predict requests in flight (waiting or running)"))
	if err != nil {
		return nil, err
	}
	state, err := m.Int64ObservableGauge("gateway.state",
		metric.WithDescription("lifecycle state: 1 for the current one (starting, ready, draining, failed)"))
	if err != nil {
		return nil, err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(queue, s.lock.waiting.Load())
		o.ObserveInt64(inflight, s.inflightN.Load())
		cur := s.state.Load()
		for st := StateStarting; st <= StateFailed; st++ {
			v := int64(0)
			if st == cur {
				v = 1
			}
			o.ObserveInt64(state, v, metric.WithAttributes(attribute.String("state", st.String())))
		}
		if set := s.set.Load(); set != nil {
			o.ObserveInt64(embodiments, int64(len(set.entries)), metric.WithAttributes(attribute.String("status", embodimentServed)))
			o.ObserveInt64(embodiments, int64(len(set.refused)), metric.WithAttributes(attribute.String("status", embodimentRefused)))
			o.ObserveInt64(embodiments, int64(len(set.starting)), metric.WithAttributes(attribute.String("status", embodimentStarting)))
		}
		return nil
	}, queue, inflight, state, embodiments)
	if err != nil {
		return nil, err
	}
	if err := registerRunnerMetrics(m, s); err != nil {
		return nil, err
	}
	if err := registerEmbodimentState(m, s); err != nil {
		return nil, err
	}
	return &in, nil
}

// stage records one predict stage; attrs carry the embodiment and the
// plugin version.
func (in *instruments) stage(ctx context.Context, name string, d time.Duration, attrs ...metric.RecordOption) {
	in.stageDuration.Record(ctx, d.Seconds(), append(attrs, metric.WithAttributes(attribute.String("stage", name)))...)
}
