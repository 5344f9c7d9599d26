//go:build linux

package runner_test

// Regression tests of supervision edge cases, against fake runners (helper
// modes "fake-*", served by fakeRunner): a runner that dies on its first
// PREDICT, one that honours timeout_ms to the millisecond, one that leaves a
// child in its process group, one with an absurd HELLO layout, one that
// exits right after every HELLO, one that answers ATTACH or PING with the
// wrong message.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/runner"
)

var fakeLayout = runner.Layout{MaxPatches: 16, MaxImages: 1, MaxSeq: 8, PixelCols: 4, StateDim: 2, ActionHorizon: 2, ActionDim: 2}

// fakeRunner is a minimal runner of the protocol that misbehaves per mode.
func fakeRunner(mode string, w *runner.Wire) int {
	if mode == "fake-echonoise" {
		return echoNoiseRunner(w)
	}
	if mode == "fake-orphan" {
		// a runner that started a helper process (same process group)
		cmd := exec.Command("sleep", "300")
		_ = cmd.Start()
		_ = os.WriteFile(os.Getenv("FAKE_CHILD_PID_FILE"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	}
	l := fakeLayout
	if mode == "fake-biglayout" {
		l.MaxPatches, l.PixelCols = 1<<58+1, 16 // MaxPatches·PixelCols·4 wraps to 64
	}
	if mode == "fake-hugelayout" {
		l.MaxSeq = 1 << 40 // no product wraps, but terabytes
	}
	_ = w.Send(runner.MsgHello, 0, runner.HelloBody{Protocol: 1, PID: os.Getpid(), Facts: runner.Facts{Backend: "fake"}, Layout: l}, -1)
	if mode == "fake-flap" {
		time.Sleep(20 * time.Millisecond)
		return 1
	}
	for {
		m, err := w.Recv(0)
		if err != nil {
			return 1
		}
		if m.FD >= 0 {
			if mode == "fake-truncate" && m.Type == runner.MsgAttach {
				// a runner "sizing" the segment it was passed (the seal refuses)
				_ = syscall.Ftruncate(m.FD, 0)
			}
			_ = syscall.Close(m.FD)
		}
		switch m.Type {
		case runner.MsgPing:
			if mode == "fake-badpong" {
				_ = w.Send(runner.MsgAttached, m.ID, nil, -1)
				continue
			}
			_ = w.Send(runner.MsgPong, m.ID, nil, -1)
		case runner.MsgAttach:
			var a runner.AttachBody
			_ = json.Unmarshal(m.Body, &a)
			if mode == "fake-badattach" {
				_ = w.Send(runner.MsgPong, m.ID, nil, -1)
				continue
			}
			_ = w.Send(runner.MsgAttached, m.ID, a, -1)
		case runner.MsgPredict:
			var p runner.PredictBody
			_ = json.Unmarshal(m.Body, &p)
			switch mode {
			case "fake-dieonpredict":
				os.Exit(9)
			case "fake-slowdie":
				time.Sleep(300 * time.Millisecond)
				os.Exit(9)
			case "fake-deadline":
				// honour timeout_ms exactly, as the Go runner does
				time.Sleep(time.Duration(p.TimeoutMS) * time.Millisecond)
				_ = w.Send(runner.MsgError, m.ID, runner.ErrorBody{Kind: runner.KindCancelled, Message: "deadline"}, -1)
			default:
				_ = w.Send(runner.MsgResult, m.ID, runner.ResultBody{Horizon: 2, ActionDim: 2}, -1)
			}
		case runner.MsgClose:
			_ = w.Send(runner.MsgClosed, m.ID, nil, -1)
			return 0
		}
	}
}

func fakeInputs() *device.Inputs {
	return &device.Inputs{PixelValues: make([]float32, 16*4), PixelRows: 16, PixelCols: 4, ImageGridTHW: [][3]int{{1, 4, 4}},
		InputIDs: make([]int32, 4), PositionIDs: make([]int32, 12), State: make([]float32, 2)}
}

// TestRunnerTruncatesSegment: a runner that truncates the memfd it was
// passed cannot (the segment's size is sealed): the request is served. An
// unsealed segment made the gateway's next copy out of it a SIGBUS, a crash
// of the gateway process.
func TestRunnerTruncatesSegment(t *testing.T) {
	p, err := openPool(t, "fake-truncate", 1, runner.Options{BackoffMin: time.Hour})
	require.NoError(t, err)
	defer p.Close()
	for range 2 {
		_, err := p.Predict(context.Background(), fakeInputs())
		require.NoError(t, err)
	}
}

// TestGateDeathCountedOnce: a restarted runner that dies during its gate
// is counted once, by the cause of its death (it was counted again as
// "gate": restarts_by_cause summed to more than restarts).
func TestGateDeathCountedOnce(t *testing.T) {
	p, err := openPool(t, "fake-dieonpredict", 1, runner.Options{MaxRestarts: 2, BackoffMin: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	_ = p.SetGate(context.Background(), func(ctx context.Context, b device.Backend) error {
		_, err := b.Predict(ctx, fakeInputs())
		return err
	})
	require.Eventually(t, func() bool { return p.Supervision().Runners[0].State == "failed" }, 20*time.Second, 10*time.Millisecond)
	st := p.Supervision().Runners[0]
	sum := 0
	for _, n := range st.RestartsByCause {
		sum += n
	}
	assert.Equal(t, st.Restarts, sum, "restarts_by_cause %v", st.RestartsByCause)
	assert.Zero(t, st.RestartsByCause["gate"], "restarts_by_cause %v", st.RestartsByCause)
}

// TestGateRunnerDiesDuringGate: a runner that dies during the start-up
// gate fails SetGate with ErrRestarting; SetGate does not panic.
func TestGateRunnerDiesDuringGate(t *testing.T) {
	p, err := openPool(t, "fake-dieonpredict", 1, runner.Options{MaxRestarts: 1, BackoffMin: time.Hour})
	require.NoError(t, err)
	defer p.Close()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("SetGate panicked: %v", r)
			}
		}()
		done <- p.SetGate(context.Background(), func(ctx context.Context, b device.Backend) error {
			_, err := b.Predict(ctx, fakeInputs())
			return err
		})
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("SetGate did not return")
	}
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "panicked")
	assert.ErrorIs(t, err, device.ErrRestarting)
}

// TestGateFailsFastOnDownRunner: SetGate waiting for a busy runner that
// then goes away (restarting) fails at once, not when its ctx ends.
func TestGateFailsFastOnDownRunner(t *testing.T) {
	p, err := openPool(t, "fake-slowdie", 1, runner.Options{BackoffMin: time.Hour})
	require.NoError(t, err)
	defer p.Close()
	busy := make(chan error, 1)
	go func() { _, err := p.Predict(context.Background(), fakeInputs()); busy <- err }()
	time.Sleep(50 * time.Millisecond) // the runner is busy
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	err = p.SetGate(ctx, func(ctx context.Context, b device.Backend) error { return nil })
	assert.Less(t, time.Since(t0), 3*time.Second, "SetGate waited for its ctx")
	assert.ErrorIs(t, err, device.ErrRestarting)
	assert.ErrorIs(t, <-busy, device.ErrRestarting)
}

// TestHelloLayoutOverflowRefused: a HELLO layout whose sizes overflow (or
// exceed the segment cap) is a protocol error naming the field, not a
// tiny segment that panics the gateway later.
func TestHelloLayoutOverflowRefused(t *testing.T) {
	for _, tc := range []struct{ mode, field string }{{"fake-biglayout", "max_patches"}, {"fake-hugelayout", "max_seq"}} {
		t.Run(tc.mode, func(t *testing.T) {
			p, err := openPool(t, tc.mode, 1, runner.Options{})
			if err == nil {
				defer p.Close()
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("PixelBuffer panicked: %v", r)
						}
					}()
					if _, rel, ok := p.PixelBuffer(); ok {
						rel()
					}
				}()
				t.Fatalf("Open accepted layout %+v", p.Layout())
			}
			assert.Contains(t, err.Error(), "protocol")
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestLayoutValidate(t *testing.T) {
	require.NoError(t, fakeLayout.Validate())
	l := fakeLayout
	l.StateDim = 0
	assert.ErrorContains(t, l.Validate(), "state_dim")
	l = fakeLayout
	l.ActionHorizon, l.ActionDim = 1<<62, 1<<62
	assert.ErrorContains(t, l.Validate(), "action_horizon")
}

// TestSpanCountOverflowRefused: a span whose 4×count wraps is outside the
// segment (the runner's check), not a view of it.
func TestSpanCountOverflowRefused(t *testing.T) {
	seg, err := runner.NewSegment(0, 4096)
	require.NoError(t, err)
	defer seg.Close()
	assert.PanicsWithError(t, "span [offset 0, 4611686018427387904 elements] outside segment[0] of 4096 bytes", func() { seg.F32(runner.Span{Offset: 0, Count: 1 << 62}) })
	assert.Panics(t, func() { seg.I32(runner.Span{Offset: 4, Count: 1<<62 - 1}) })
	assert.Len(t, seg.F32(runner.Span{Offset: 4092, Count: 1}), 1)
}

// TestLeaderExitKillsProcessGroup: when the runner leader dies by itself,
// what it started in its process group (which may hold the segments) is
// killed before the runner is replaced.
func TestLeaderExitKillsProcessGroup(t *testing.T) {
	pf := t.TempDir() + "/child"
	t.Setenv("FAKE_CHILD_PID_FILE", pf)
	p, err := openPool(t, "fake-orphan", 1, runner.Options{})
	require.NoError(t, err)
	defer p.Close()
	b, err := os.ReadFile(pf)
	require.NoError(t, err)
	child, _ := strconv.Atoi(string(b))
	require.Positive(t, child)
	defer syscall.Kill(child, syscall.SIGKILL)
	pid := p.Supervision().Runners[0].PID
	require.NoError(t, syscall.Kill(pid, syscall.SIGSEGV))
	deadline := time.Now().Add(10 * time.Second)
	for p.Supervision().Runners[0].PID == pid || p.Supervision().Runners[0].PID == 0 {
		require.True(t, time.Now().Before(deadline), "no restart")
		time.Sleep(10 * time.Millisecond)
	}
	// The child is killed; it is a zombie until `sleep`'s parent (the old
	// runner, now gone) is reaped by init, so look at its state.
	assert.Eventually(t, func() bool { return gone(child) }, 2*time.Second, 10*time.Millisecond,
		"runner %d died and was replaced, but its child %d (same process group) is alive", pid, child)
	assert.Equal(t, "exit status 2", p.Supervision().Runners[0].LastCause, "the leader's own exit (Go's SIGSEGV exit), not the group kill")
}

// gone reports whether pid no longer runs (absent or a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestDeadlineAnsweredCancelledIsDeadline: a runner that stops a call at
// its timeout_ms (answering ERROR cancelled) while the caller's ctx is
// still live yields context.DeadlineExceeded (504), never
// context.Canceled (503 "shutting down").
func TestDeadlineAnsweredCancelledIsDeadline(t *testing.T) {
	p, err := openPool(t, "fake-deadline", 1, runner.Options{})
	require.NoError(t, err)
	defer p.Close()
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond+990*time.Microsecond)
		_, err = p.Predict(ctx, fakeInputs())
		cancel()
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, context.Canceled)
	}
}

// TestFlappingRunnerFails: a runner that dies right after each successful
// start counts each death within the stable uptime as a failed restart and
// ends failed after MaxRestarts, instead of restarting forever.
func TestFlappingRunnerFails(t *testing.T) {
	p, err := openPool(t, "fake-flap", 1, runner.Options{MaxRestarts: 3, BackoffMin: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !p.Supervision().Failed {
		require.True(t, time.Now().Before(deadline), "still restarting: %+v", p.Supervision().Runners[0])
		time.Sleep(10 * time.Millisecond)
	}
	st := p.Supervision().Runners[0]
	t.Logf("state %s restarts %d failures %d cause %s", st.State, st.Restarts, st.Failures, st.LastCause)
	assert.Equal(t, "failed", st.State)
	assert.LessOrEqual(t, st.Restarts, 4)
	assert.Contains(t, p.Supervision().Reason, "3 consecutive failed restarts")
}

// TestFlapBackoffGrows: the delay between flapping restarts keeps doubling
// across cycles (a successful start does not reset it).
func TestFlapBackoffGrows(t *testing.T) {
	p, err := openPool(t, "fake-flap", 1, runner.Options{MaxRestarts: 100, BackoffMin: 50 * time.Millisecond, BackoffMax: time.Hour})
	require.NoError(t, err)
	defer p.Close()
	time.Sleep(2 * time.Second)
	// 50+100+200+400+800 ms = 1.55 s: about 5 restarts, not ~40.
	st := p.Supervision().Runners[0]
	t.Logf("after 2s: state %s restarts %d failures %d", st.State, st.Restarts, st.Failures)
	assert.LessOrEqual(t, st.Restarts, 7)
	assert.Positive(t, st.Failures)
}

// TestStableRunnerResetsFailures: a runner that stays up for the stable
// uptime clears its consecutive failures.
func TestStableRunnerResetsFailures(t *testing.T) {
	o := runner.Options{MaxRestarts: 3, BackoffMin: 5 * time.Millisecond}
	runner.SetStableUptime(&o, 300*time.Millisecond)
	p, err := openPool(t, "fake-ok", 1, o)
	require.NoError(t, err)
	defer p.Close()
	for i := 0; i < 5; i++ { // more deaths than MaxRestarts, each after a stable run
		pid := p.Supervision().Runners[0].PID
		time.Sleep(400 * time.Millisecond)
		require.NoError(t, syscall.Kill(pid, syscall.SIGSEGV)) // a crash: exit status 2
		deadline := time.Now().Add(5 * time.Second)
		for st := p.Supervision().Runners[0]; st.State != "ok" || st.PID == pid; st = p.Supervision().Runners[0] {
			require.NotEqual(t, "failed", st.State)
			require.True(t, time.Now().Before(deadline), "no restart: %+v", st)
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(400 * time.Millisecond)
	assert.Equal(t, 0, p.Supervision().Runners[0].Failures)
}

// TestAttachProtocolErrorKillsRunner: a runner that answers ATTACH with
// another message is killed (protocol) and restarted; the call fails
// with ErrRestarting.
func TestAttachProtocolErrorKillsRunner(t *testing.T) {
	p, err := openPool(t, "fake-badattach", 1, runner.Options{BackoffMin: time.Hour})
	require.NoError(t, err)
	defer p.Close()
	pid := p.Supervision().Runners[0].PID
	_, err = p.Predict(context.Background(), fakeInputs())
	require.ErrorIs(t, err, device.ErrRestarting)
	st := p.Supervision().Runners[0]
	assert.NotEqual(t, "ok", st.State)
	assert.Equal(t, "protocol", st.LastCauseKind)
	assert.True(t, gone(pid), "runner %d still runs", pid)
}

// TestPingWrongReplyKillsRunner: a PING answered with anything but PONG
// kills the runner (protocol).
func TestPingWrongReplyKillsRunner(t *testing.T) {
	p, err := openPool(t, "fake-badpong", 1, runner.Options{PingInterval: 20 * time.Millisecond, BackoffMin: time.Hour})
	require.NoError(t, err)
	defer p.Close()
	assert.Eventually(t, func() bool {
		st := p.Supervision().Runners[0]
		return st.State != "ok" && st.LastCauseKind == "protocol"
	}, 5*time.Second, 10*time.Millisecond)
}

// TestCloseKeepsLoanedSegmentMapped: Pool.Close does not unmap a
// PixelBuffer still on loan (its holder may be writing into it); the
// segment is unmapped when it is given back.
func TestCloseKeepsLoanedSegmentMapped(t *testing.T) {
	maps0 := memfdMaps(t)
	p, err := openPool(t, "fake-ok", 1, runner.Options{})
	require.NoError(t, err)
	buf, rel, ok := p.PixelBuffer()
	require.True(t, ok)
	buf2, rel2, ok := p.PixelBuffer()
	require.True(t, ok)
	rel2()
	_ = buf2
	require.NoError(t, p.Close())
	assert.Equal(t, maps0+1, memfdMaps(t), "the loaned segment stays mapped, the free one is unmapped")
	for i := range buf { // a SIGSEGV here if Close unmapped it
		buf[i] = float32(i)
	}
	rel()
	rel()
	assert.Equal(t, maps0, memfdMaps(t), "unmapped once given back")
	_, _, ok = p.PixelBuffer()
	assert.False(t, ok, "no buffer from a closed pool")
}

// TestExternalKillIsNotAFlap: a runner SIGKILLed from outside (an operator,
// a chaos test) soon after it started is restarted without counting a
// failure: only the runner's own deaths (exit, crash, hang, protocol) are
// flaps.
func TestExternalKillIsNotAFlap(t *testing.T) {
	p, err := openPool(t, "fake-ok", 1, runner.Options{MaxRestarts: 2, BackoffMin: 5 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	for i := 0; i < 4; i++ {
		pid := p.Supervision().Runners[0].PID
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		deadline := time.Now().Add(5 * time.Second)
		for st := p.Supervision().Runners[0]; st.State != "ok" || st.PID == pid; st = p.Supervision().Runners[0] {
			require.NotEqual(t, "failed", st.State)
			require.True(t, time.Now().Before(deadline), "no restart: %+v", st)
			time.Sleep(5 * time.Millisecond)
		}
	}
	assert.Equal(t, 0, p.Supervision().Runners[0].Failures)
	assert.Equal(t, 4, p.Supervision().Runners[0].Restarts)
}
