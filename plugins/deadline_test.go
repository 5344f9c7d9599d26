package plugins_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins"
	"github.com/gr00tgw/gr00tgw/plugins/plugintest"
)

// TestDeadlineModes: in both modes an infinite loop costs exactly one
// failed request bounded by the deadline, caller cancellation stops a
// running call, and the next request succeeds on a fresh instance.
func TestDeadlineModes(t *testing.T) {
	for _, mode := range []plugins.DeadlineMode{plugins.DeadlineStopFlag, plugins.DeadlineCloseOnContextDone} {
		t.Run(mode.String(), func(t *testing.T) {
			rec := newRecorder()
			p := plugintest.MustOpen(t, misbehave, plugins.WithObserver(rec), plugins.WithDeadlineMode(mode))
			require.Equal(t, mode, p.DeadlineMode())
			timeout := time.Duration(200*plugintest.TimeoutScale()) * time.Millisecond

			start := time.Now()
			_, err := p.Pre(context.Background(), preIn("hang", 1, 1))
			took := time.Since(start)
			require.ErrorIs(t, err, plugins.ErrTimeout)
			assert.GreaterOrEqual(t, took, timeout)
			assert.Less(t, took, timeout+5*time.Second, "the deadline bounds the call")
			assert.Equal(t, 1, rec.get(rec.recycled, plugins.ReasonTimeout))
			mustPreOK(t, p, 1)

			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(30*time.Millisecond, cancel)
			_, err = p.Pre(ctx, preIn("hang", 1, 1))
			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, 1, rec.get(rec.recycled, plugins.ReasonCanceled))
			mustPreOK(t, p, 2)

			// A long but finite call and many short ones: a disarmed
			// watchdog never stops a later call.
			_, err = p.Pre(context.Background(), preIn("spin:1000000", 1, 1))
			require.NoError(t, err)
			for i := range 50 {
				mustPreOK(t, p, float64(i))
			}
			assert.Equal(t, 1, rec.get(rec.recycled, plugins.ReasonTimeout))
		})
	}
}

// TestInterpreterUsesCloseOnContextDone: the stop flag is a compiler-only
// mode; the interpreter keeps deadlines through wazero.
func TestInterpreterUsesCloseOnContextDone(t *testing.T) {
	if testing.Short() {
		t.Skip("interpreter load is slow")
	}
	p := plugintest.MustOpen(t, misbehave, plugins.WithInterpreter())
	require.Equal(t, plugins.DeadlineCloseOnContextDone, p.DeadlineMode())
	_, err := p.Pre(context.Background(), preIn("hang", 1, 1))
	require.ErrorIs(t, err, plugins.ErrTimeout)
	mustPreOK(t, p, 1)
}

// TestRewriteFailureFallsBack: if the module with stop checks does not
// compile (a rewriter bug), the plugin is served as shipped, with
// deadlines through close-on-context-done, instead of failing to load.
func TestRewriteFailureFallsBack(t *testing.T) {
	restore := plugins.SetInstrumentForTest(func(wasm []byte) ([]byte, error) {
		return append(append([]byte(nil), wasm[:8]...), 0x0A, 0x02, 0x01, 0xFF), nil // a broken code section
	})
	defer restore()
	p := plugintest.MustOpen(t, misbehave)
	require.Equal(t, plugins.DeadlineCloseOnContextDone, p.DeadlineMode())
	_, err := p.Pre(context.Background(), preIn("hang", 1, 1))
	require.ErrorIs(t, err, plugins.ErrTimeout)
	mustPreOK(t, p, 1)
}
