package service

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gr00tgw/gr00tgw/config"
)

func TestNewTracerProvider(t *testing.T) {
	ctx := context.Background()
	tp, stop, err := NewTracerProvider(ctx, config.Default().OTel, "v", nil)
	require.NoError(t, err)
	assert.IsType(t, noop.TracerProvider{}, tp)
	require.NoError(t, stop(ctx))

	var buf bytes.Buffer
	cfg := config.Default().OTel
	cfg.Traces.Exporter = "stdout"
	tp, stop, err = NewTracerProvider(ctx, cfg, "v1.2.3", &buf)
	require.NoError(t, err)
	_, sp := tp.Tracer("t").Start(ctx, "probe", trace.WithAttributes())
	sp.End()
	require.NoError(t, stop(ctx))
	assert.Contains(t, buf.String(), `"Name":"probe"`)
	assert.Contains(t, buf.String(), `"Value":"gr00tgw"`)

	// OTLP exporters construct without dialling (connections are lazy).
	for _, exp := range []string{"otlp-grpc", "otlp-http"} {
		cfg.Traces.Exporter, cfg.Traces.Endpoint, cfg.Traces.Insecure = exp, "127.0.0.1:1", true
		_, stop, err := NewTracerProvider(ctx, cfg, "v", os.Stderr)
		require.NoError(t, err, exp)
		sctx, cancel := context.WithTimeout(ctx, 1)
		_ = stop(sctx)
		cancel()
	}
	cfg.Traces.Exporter = "zipkin"
	_, _, err = NewTracerProvider(ctx, cfg, "v", nil)
	assert.Error(t, err)
}
