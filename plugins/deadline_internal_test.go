package plugins

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero/api"
)

// fakeGlobal is an api.MutableGlobal in Go memory (the embedded nil
// interface only satisfies wazero's sealed method set).
type fakeGlobal struct {
	api.MutableGlobal
	v uint64
}

func (g *fakeGlobal) Get() uint64  { return g.v }
func (g *fakeGlobal) Set(v uint64) { g.v = v }

// TestWatchdogStaleFires: a timer or cancellation that belongs to an
// earlier call never raises the flag during a later one.
func TestWatchdogStaleFires(t *testing.T) {
	flag, budget := &fakeGlobal{}, &fakeGlobal{v: 7}
	w := newWatchdog(flag, budget)

	ctx1, cancel1 := context.WithCancel(context.Background())
	w.arm(ctx1, time.Now(), time.Millisecond)
	require.Eventually(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.fired }, 5*time.Second, time.Millisecond)
	assert.Equal(t, uint64(1), flag.v)
	assert.Equal(t, uint64(0), budget.v)
	assert.True(t, w.disarm())
	assert.Equal(t, uint64(0), flag.v, "disarm clears a raised flag")

	w.arm(context.Background(), time.Now(), time.Hour)
	w.fireTimer() // the first call's timer, running late
	cancel1()     // the first call's context, canceled late
	w.mu.Lock()
	fired := w.fired
	w.mu.Unlock()
	assert.False(t, fired)
	assert.False(t, w.disarm())
	assert.Equal(t, uint64(0), flag.v)

	ctx3, cancel3 := context.WithCancel(context.Background())
	w.arm(ctx3, time.Now(), time.Hour)
	cancel3()
	require.Eventually(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.fired }, 5*time.Second, time.Millisecond)
	assert.True(t, w.disarm())
}
