package httpfront

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
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

// headerCarrier adapts fasthttp request headers to propagation.TextMapCarrier.
type headerCarrier struct{ h *fasthttp.RequestHeader }

func (c headerCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c headerCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c headerCarrier) Keys() []string {
	var keys []string
	c.h.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}
