package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gr00tgw/gr00tgw/config"
)

// NewPrometheus builds an OTel MeterProvider whose instruments are exported
// in Prometheus text format by the returned handler (serve it at /metrics).
// It uses its own registry, so several servers in one process (tests) do
// not collide. Shut the provider down at exit.
func NewPrometheus() (*sdkmetric.MeterProvider, http.Handler, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	return mp, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}

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
	requests      metric.Int64Counter
	reqDuration   metric.Float64Histogram
	stageDuration metric.Float64Histogram
	pluginDur     metric.Float64Histogram
	warmupPCC     metric.Float64Gauge
	changes       metric.Int64Counter
	predictions   metric.Int64Counter
}

var secondsBuckets = metric.WithExplicitBucketBoundaries(
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

func newInstruments(m metric.Meter, s *Server) (*instruments, error) {
	var in instruments
	var err error
	if in.requests, err = m.Int64Counter("gateway.requests",
		metric.WithDescription("HTTP requests by route, status and error code")); err != nil {
		return nil, err
	}
	if in.reqDuration, err = m.Float64Histogram("gateway.request.duration", metric.WithUnit("s"),
		metric.WithDescription("HTTP request wall time by route and status"), secondsBuckets); err != nil {
		return nil, err
	}
	if in.stageDuration, err = m.Float64Histogram("gateway.stage.duration", metric.WithUnit("s"),
		metric.WithDescription("predict stage wall time (decode, plugin.pre, encode, queue, device, device.<stage>, plugin.post)"), secondsBuckets); err != nil {
		return nil, err
	}
	if in.pluginDur, err = m.Float64Histogram("gateway.plugin.duration", metric.WithUnit("s"),
		metric.WithDescription("embodiment plugin call time by plugin, stage and outcome"), secondsBuckets); err != nil {
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
		for st := stateStarting; st <= stateFailed; st++ {
			v := int64(0)
			if st == cur {
				v = 1
			}
			o.ObserveInt64(state, v, metric.WithAttributes(attribute.String("state", stateName(st))))
		}
		if set := s.set.Load(); set != nil {
			o.ObserveInt64(embodiments, int64(len(set.entries)), metric.WithAttributes(attribute.String("status", "served")))
			o.ObserveInt64(embodiments, int64(len(set.refused)), metric.WithAttributes(attribute.String("status", "refused")))
			o.ObserveInt64(embodiments, int64(len(set.starting)), metric.WithAttributes(attribute.String("status", "starting")))
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

// headerCarrier adapts fasthttp request headers to propagation.TextMapCarrier.
type headerCarrier struct{ h *fasthttp.RequestHeader }

func (c headerCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c headerCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c headerCarrier) Keys() []string {
	var keys []string
	c.h.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}

// stageSpans records one child span per device stage under parent, laid end
// to end from start with the backend's reported durations.
func stageSpans(ctx context.Context, tr trace.Tracer, start time.Time, stages []stageTiming) {
	t := start
	for _, st := range stages {
		_, sp := tr.Start(ctx, "device."+st.name, trace.WithTimestamp(t))
		t = t.Add(st.d)
		sp.End(trace.WithTimestamp(t))
	}
}

type stageTiming struct {
	name string
	d    time.Duration
}
