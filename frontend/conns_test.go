package frontend

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitsWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Limits
		want Limits
	}{
		{"zero", Limits{}, Limits{MaxConnections: 1024, MaxMessageBytes: 64 << 20, MaxElements: 1 << 20,
			IdleTimeout: 10 * time.Minute, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}},
		{"negative", Limits{MaxConnections: -1, IdleTimeout: -time.Second}, Limits{MaxConnections: 1024, MaxMessageBytes: 64 << 20,
			MaxElements: 1 << 20, IdleTimeout: 10 * time.Minute, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}},
		{"set", Limits{MaxConnections: 2, MaxMessageBytes: 3, MaxElements: 4, IdleTimeout: 5, ReadTimeout: 6, WriteTimeout: 7},
			Limits{MaxConnections: 2, MaxMessageBytes: 3, MaxElements: 4, IdleTimeout: 5, ReadTimeout: 6, WriteTimeout: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.in.WithDefaults()) })
	}
}

func TestAcquireBoundsSlots(t *testing.T) {
	cs := NewConns(2)
	assert.Equal(t, 2, cs.Max())
	require.True(t, cs.Acquire())
	require.True(t, cs.Acquire())
	assert.False(t, cs.Acquire(), "a third slot of two")
	cs.Release()
	assert.True(t, cs.Acquire(), "a released slot is free again")
	assert.Equal(t, DefaultMaxConnections, NewConns(0).Max())
}

// TestShutdownDrains: idle connections and listeners close at once, busy
// ones are asked to drain and are waited for; Track and Listen refuse
// afterwards; the base context is cancelled when the drain ends.
func TestShutdownDrains(t *testing.T) {
	cs := NewConns(4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, ok := cs.Listen(ln)
	require.True(t, ok)
	var idleClosed, busyClosed, busyDrained atomic.Bool
	idle, ok := cs.Track(true, Handle{Close: func() { idleClosed.Store(true) }})
	require.True(t, ok)
	busy, ok := cs.Track(false, Handle{Close: func() { busyClosed.Store(true) }})
	require.True(t, ok)
	drained := make(chan struct{})
	busy.h.Drain = func() { busyDrained.Store(true); close(drained) }
	assert.Equal(t, 2, cs.Len())

	done := make(chan error, 1)
	go func() { done <- cs.Shutdown(context.Background(), nil) }()
	<-drained
	assert.True(t, idleClosed.Load(), "an idle connection is closed at once")
	assert.False(t, busyClosed.Load(), "a busy one is not")
	assert.False(t, busy.SetIdle(true), "SetIdle says the connection should close")
	_, err = ln.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "the listener is closed")
	select {
	case <-done:
		t.Fatal("Shutdown returned with connections live")
	case <-time.After(20 * time.Millisecond):
	}
	assert.NoError(t, cs.Context().Err(), "requests keep their context while draining")
	idle.Done()
	busy.Done()
	require.NoError(t, <-done)
	assert.ErrorIs(t, cs.Context().Err(), context.Canceled)
	_, ok = cs.Track(true, Handle{Close: func() {}})
	assert.False(t, ok)
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, ok = cs.Listen(ln2)
	assert.False(t, ok)
	_, err = ln2.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "a listener refused while draining is closed")
}

// TestShutdownDeadline: at ctx's end the busy connections are cancelled
// and closed, and Shutdown returns ctx's error once they are done; stop
// runs first and sees the draining state.
func TestShutdownDeadline(t *testing.T) {
	cs := NewConns(1)
	c, ok := cs.Track(false, Handle{})
	require.True(t, ok)
	c.h.Close = func() { go c.Done() }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	stopErr := errors.New("stop")
	var sawDraining bool
	err := cs.Shutdown(ctx, func(context.Context) error { sawDraining = cs.Draining(); return stopErr })
	assert.ErrorIs(t, err, context.DeadlineExceeded, "ctx's error, not stop's")
	assert.True(t, sawDraining)
	assert.ErrorIs(t, cs.Context().Err(), context.Canceled)
	assert.Equal(t, 0, cs.Len())

	cs = NewConns(1)
	assert.ErrorIs(t, cs.Shutdown(context.Background(), func(context.Context) error { return stopErr }), stopErr,
		"a clean drain returns stop's error")
}

func TestDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d := NewDeadline(cancel)
	idle := errors.New("idle")
	d.Arm(time.Hour, errors.New("read"))
	d.Arm(5*time.Millisecond, idle)
	<-ctx.Done()
	assert.Equal(t, idle, d.Fired(), "the reason of the last Arm")

	ctx, cancel = context.WithCancel(context.Background())
	d = NewDeadline(cancel)
	d.Arm(5*time.Millisecond, idle)
	d.Disarm()
	time.Sleep(20 * time.Millisecond)
	assert.NoError(t, ctx.Err(), "a disarmed deadline does not fire")
	assert.Nil(t, d.Fired())
}
