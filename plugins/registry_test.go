package plugins_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

func TestRegistryReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	slow := slowMisbehave
	m := *slow.Manifest
	m.Limits.PoolSize = 2
	slow.Manifest = &m
	_, err := plugintest.Pack(ctx, slow, dir)
	require.NoError(t, err)
	_, err = plugintest.Pack(ctx, raw, dir)
	require.NoError(t, err)
	rec := newRecorder()
	reg, err := plugins.LoadDir(ctx, dir, append(plugintest.DefaultOptions(t), plugins.WithObserver(rec))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close(ctx) })

	require.Len(t, reg.Plugins(), 2)
	old, err := reg.Lookup("test_misbehave")
	require.NoError(t, err)
	_, err = reg.Lookup("oxe_droid_relative_eef_relative_joint")
	require.ErrorIs(t, err, plugins.ErrUnknownEmbodiment)
	assert.Contains(t, err.Error(), "served: [test_misbehave test_raw]")

	// An in-flight call on the old plugin (a long busy loop, well inside
	// its 4 s deadline) must finish on the old instance.
	type res struct {
		out *plugins.PreOutput
		err error
	}
	inflight := make(chan res, 1)
	go func() {
		out, err := old.Pre(ctx, preIn("spin:5000000", 4, 2))
		inflight <- res{out, err}
	}()
	require.Eventually(t, func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.inUse >= 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, reg.Reload(ctx))
	r := <-inflight
	require.NoError(t, r.err, "in-flight call finished on the old instance")
	assert.Equal(t, float32(2), r.out.State[0])

	cur, err := reg.Lookup("test_misbehave")
	require.NoError(t, err)
	assert.NotSame(t, old, cur)
	_, err = old.Pre(ctx, preIn("ok", 1, 1))
	require.ErrorIs(t, err, plugins.ErrClosed, "the old plugin is closed after Reload")
	out, err := reg.Pre(ctx, "test_misbehave", preIn("ok", 6, 2))
	require.NoError(t, err)
	assert.Equal(t, float32(3), out.State[0])

	// A broken new set keeps the current one in service.
	mf := filepath.Join(dir, "raw", plugins.ManifestFile)
	b, err := os.ReadFile(mf)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mf, []byte(strings.Replace(string(b), "abi: 1", "abi: 2", 1)), 0o644))
	err = reg.Reload(ctx)
	require.ErrorContains(t, err, "plugins: reload kept the current plugins: wasm: plugin[raw] ABI version mismatch")
	same, err := reg.Lookup("test_misbehave")
	require.NoError(t, err)
	assert.Same(t, cur, same)
	_, err = same.Pre(ctx, preIn("ok", 1, 1))
	require.NoError(t, err)
}
