package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/service"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func health(addr string) string {
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// swapOpenServing replaces the serving pipeline for one test.
func swapOpenServing(t *testing.T, fn func(ctx context.Context, cfg config.Config, log *slog.Logger, mp metric.MeterProvider) (*service.Deps, error)) {
	t.Helper()
	old := openServing
	openServing = fn
	t.Cleanup(func() { openServing = old })
}

func TestServeStartFailureExitsWithCause(t *testing.T) {
	addr := freeAddr(t)
	release := make(chan struct{})
	swapOpenServing(t, func(ctx context.Context, cfg config.Config, log *slog.Logger, mp metric.MeterProvider) (*service.Deps, error) {
		<-release
		return nil, errors.New("tokenizer_dir: open /x/tokenizer.json: no such file")
	})
	done := make(chan error, 1)
	go func() {
		done <- runServe(context.Background(), []string{"--addr", addr, "--log-level", "error", "--metrics=false"})
	}()
	// Listening at once, reporting starting.
	require.Eventually(t, func() bool { return strings.Contains(health(addr), `"starting"`) }, 5*time.Second, 10*time.Millisecond)
	close(release)
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "tokenizer.json")
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not exit after a failed start")
	}
}

func TestServeSignalWhileStartingIsCleanExit(t *testing.T) {
	addr := freeAddr(t)
	swapOpenServing(t, func(ctx context.Context, cfg config.Config, log *slog.Logger, mp metric.MeterProvider) (*service.Deps, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, []string{"--addr", addr, "--log-level", "error"}) }()
	require.Eventually(t, func() bool { return health(addr) != "" }, 5*time.Second, 10*time.Millisecond)
	cancel() // SIGTERM
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not exit")
	}
}

func TestServeUsageAndConfigErrors(t *testing.T) {
	err := runServe(context.Background(), []string{"--no-such-flag"})
	require.ErrorIs(t, err, errUsage)
	err = runServe(context.Background(), []string{"--warmup-pcc-min", "2"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "key[warmup_pcc_min] (from flag --warmup-pcc-min)")
	// A configured demo_dir that is missing fails before anything loads
	// (it used to fall back silently to the plugin's demo).
	swapOpenServing(t, func(context.Context, config.Config, *slog.Logger, metric.MeterProvider) (*service.Deps, error) {
		t.Error("serve opened the serving pipeline with a missing demo_dir")
		return nil, errors.New("unreachable")
	})
	err = runServe(context.Background(), []string{"--demo-dir", "/nonexistent", "--addr", freeAddr(t)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "key[demo_dir] (from flag --demo-dir)")
	err = runConfig(context.Background(), []string{"show"})
	require.ErrorIs(t, err, errUsage)
}

func TestJSONToMsgpackKeepsBigSeeds(t *testing.T) {
	mp, err := jsonToMsgpack([]byte(`{"seed": 18446744073709551615, "images": {"a": ["aGVsbG8="]}, "x": 1.5}`))
	require.NoError(t, err)
	assert.Contains(t, string(mp), "hello") // frames travel as raw bytes
	assert.NotContains(t, string(mp), "aGVsbG8=")
}
