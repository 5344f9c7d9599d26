//go:build linux

// Package runnertest is the conformance suite of the runner protocol
// (device/RUNNER.md): Run drives any runner implementation — Go, C++,
// Python — message by message over its socket and checks the handshake,
// ATTACH, PREDICT (bit-exact against a reference result), error kinds,
// CANCEL (well before completion), PING during a prediction, a second
// PREDICT while busy, writes outside output, unknown messages and CLOSE.
// Options.Tolerance relaxes the comparison with the reference (and only
// it) for runners that do not reproduce the Go backend's bits. A runner
// written in another language is tested by a Go test that calls Run with
// Exec(its command line).
package runnertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/runner"
)

// StartFunc starts one runner and returns the client's end of its socket;
// the runner must send HELLO first. The suite closes the connection; stop
// (called at the end of each case) reaps the runner.
type StartFunc func(t testing.TB) (c *net.UnixConn, stop func())

// Options configure Run.
type Options struct {
	// Inputs is a valid request for the runner's model (within its
	// layout) and Want the reference action_pred for it (the in-process
	// backend's), compared bit for bit unless Tolerance is set.
	Inputs *device.Inputs
	Want   []float32
	// Tolerance, when > 0, compares action_pred with Want by the largest
	// absolute difference, max|got−want| ≤ Tolerance (NaN fails), for a
	// runner that computes in another order or dtype (a GPU, bf16); 0
	// keeps the bit-exact comparison. Every other check stays exact: no
	// write outside output (the canaries), the two PREDICTs of Inputs
	// bit-identical to each other (a runner is deterministic), the
	// result's shape, the error kinds, the message orders.
	Tolerance float64
	// SlowInputs, when set, is a request that runs long enough (≥ 50 ms;
	// cases that need it are skipped under 20 ms) to be pinged, cancelled
	// at a tenth of its time and sent a second PREDICT while in flight;
	// nil uses Inputs.
	SlowInputs *device.Inputs
	// Timeout bounds each reply (default 30s).
	Timeout time.Duration
}

// Exec returns a StartFunc that runs argv with its socket as descriptor 3
// (GR00TGW_RUNNER_FD=3), as a gateway does.
func Exec(argv ...string) StartFunc {
	return func(t testing.TB) (*net.UnixConn, func()) {
		t.Helper()
		c, rf, err := runner.SocketPair()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "GR00TGW_RUNNER_FD=3")
		cmd.ExtraFiles = []*os.File{rf}
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = rf.Close()
		return c, func() {
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
	}
}

// peer is one connected runner under test.
type peer struct {
	t     testing.TB
	w     *runner.Wire
	hello runner.HelloBody
	seg   *runner.Segment
	segID uint32
	o     Options
	id    uint64
}

func open(t *testing.T, start StartFunc, o Options) *peer {
	t.Helper()
	c, stop := start(t)
	p := &peer{t: t, w: runner.NewWire(c), o: o}
	t.Cleanup(func() {
		_ = p.w.Close()
		stop()
		if p.seg != nil {
			p.seg.Close()
		}
	})
	m := p.recv()
	if m.Type != runner.MsgHello {
		t.Fatalf("first message has type %d, want HELLO (%d)", m.Type, runner.MsgHello)
	}
	if err := json.Unmarshal(m.Body, &p.hello); err != nil {
		t.Fatalf("HELLO body: %v", err)
	}
	return p
}

func (p *peer) recv() runner.Message {
	p.t.Helper()
	m, err := p.w.Recv(p.o.Timeout)
	if err != nil {
		p.t.Fatalf("recv: %v", err)
	}
	if m.FD >= 0 {
		_ = syscall.Close(m.FD)
		p.t.Fatalf("runner sent a descriptor with message type %d", m.Type)
	}
	return m
}

func (p *peer) send(typ uint32, body any, fd int) uint64 {
	p.t.Helper()
	p.id++
	if err := p.w.Send(typ, p.id, body, fd); err != nil {
		p.t.Fatalf("send type %d: %v", typ, err)
	}
	return p.id
}

// expect reads the reply to id, of type typ (ERROR bodies are reported).
func (p *peer) expect(id uint64, typ uint32) runner.Message {
	p.t.Helper()
	m := p.recv()
	if m.ID != id {
		p.t.Fatalf("reply id %d (type %d), want %d", m.ID, m.Type, id)
	}
	if m.Type != typ {
		p.t.Fatalf("reply type %d (%s), want %d", m.Type, m.Body, typ)
	}
	return m
}

func (p *peer) expectError(id uint64, kind string) runner.ErrorBody {
	p.t.Helper()
	m := p.expect(id, runner.MsgError)
	var e runner.ErrorBody
	if err := json.Unmarshal(m.Body, &e); err != nil {
		p.t.Fatalf("ERROR body: %v", err)
	}
	if e.Kind != kind {
		p.t.Fatalf("ERROR kind %q (%s), want %q", e.Kind, e.Message, kind)
	}
	if e.Message == "" {
		p.t.Fatalf("ERROR %q without a message", kind)
	}
	return e
}

// attach creates a segment of size bytes (0: the layout's) and attaches it.
func (p *peer) attach(id uint32, size int) {
	p.t.Helper()
	if size == 0 {
		size = p.hello.Layout.SegmentSize()
	}
	seg, err := runner.NewSegment(id, size)
	if err != nil {
		p.t.Fatal(err)
	}
	if p.seg != nil {
		p.seg.Close()
	}
	p.seg, p.segID = seg, id
	rid := p.send(runner.MsgAttach, runner.AttachBody{Segment: id, Size: size}, seg.FD())
	p.expect(rid, runner.MsgAttached)
}

// predictBody writes in into the attached segment at the layout offsets.
func (p *peer) predictBody(in *device.Inputs) runner.PredictBody {
	l := p.hello.Layout
	off := l.Offsets()
	sp := func(slot runner.Slot, n int) runner.Span { return runner.Span{Offset: off[slot], Count: n} }
	b := runner.PredictBody{Segment: p.segID, PixelValues: sp(runner.SlotPixelValues, len(in.PixelValues)), PixelRows: in.PixelRows, PixelCols: in.PixelCols,
		ImageGridTHW: in.ImageGridTHW, InputIDs: sp(runner.SlotInputIDs, len(in.InputIDs)), PositionIDs: sp(runner.SlotPositionIDs, len(in.PositionIDs)),
		State: sp(runner.SlotState, len(in.State)), Seed: in.Seed, EmbodimentID: in.EmbodimentID,
		Output: sp(runner.SlotOutput, l.ActionHorizon*l.ActionDim)}
	copy(p.seg.F32(b.PixelValues), in.PixelValues)
	copy(p.seg.I32(b.InputIDs), in.InputIDs)
	copy(p.seg.I32(b.PositionIDs), in.PositionIDs)
	copy(p.seg.F32(b.State), in.State)
	if in.AttentionMask != nil {
		s := sp(runner.SlotAttentionMask, len(in.AttentionMask))
		copy(p.seg.I32(s), in.AttentionMask)
		b.AttentionMask = &s
	}
	if in.Noise != nil {
		s := sp(runner.SlotNoise, len(in.Noise))
		copy(p.seg.F32(s), in.Noise)
		b.Noise = &s
	}
	return b
}

// canary fills the segment outside the inputs before a PREDICT.
const canary = 0xA5A5A5A5

func bitsOf(f []float32) []uint32 {
	out := make([]uint32, len(f))
	for i, x := range f {
		out[i] = math.Float32bits(x)
	}
	return out
}

// compare checks got against want: bit for bit when tol is 0, else by
// max|got−want| ≤ tol (a NaN on either side fails).
func compare(got, want []float32, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("action_pred has %d values, want %d", len(got), len(want))
	}
	if tol <= 0 {
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				return fmt.Errorf("action_pred[%d] = %v, want %v (bit-exact)", j, got[j], want[j])
			}
		}
		return nil
	}
	worst, at := 0.0, -1
	for j := range want {
		d := math.Abs(float64(got[j]) - float64(want[j]))
		if math.IsNaN(d) {
			return fmt.Errorf("action_pred[%d] = %v, want %v (tolerance %g)", j, got[j], want[j], tol)
		}
		if d > worst {
			worst, at = d, j
		}
	}
	if worst > tol {
		return fmt.Errorf("action_pred[%d] = %v, want %v: max|d| %g over the tolerance %g", at, got[at], want[at], worst, tol)
	}
	return nil
}

// minSlow is how long SlowInputs must take for the in-flight cases to tell
// orders apart; a faster runner skips them.
const minSlow = 20 * time.Millisecond

// slowDuration runs SlowInputs once (warming the runner) and returns how
// long it took; under minSlow the case is skipped.
func (p *peer) slowDuration(t *testing.T) time.Duration {
	t.Helper()
	t0 := time.Now()
	p.expect(p.send(runner.MsgPredict, p.predictBody(p.o.SlowInputs), -1), runner.MsgResult)
	d := time.Since(t0)
	if d < minSlow {
		t.Skipf("SlowInputs took %v, under %v: too fast to tell message orders apart", d, minSlow)
	}
	return d
}

// Run runs the conformance suite against runners from start.
func Run(t *testing.T, start StartFunc, o Options) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.SlowInputs == nil {
		o.SlowInputs = o.Inputs
	}
	if o.Inputs == nil || o.Want == nil {
		t.Fatal("runnertest: Options.Inputs and Want are required")
	}
	t.Run("hello", func(t *testing.T) {
		p := open(t, start, o)
		h := p.hello
		if h.Protocol != runner.ProtocolVersion {
			t.Fatalf("protocol %d, want %d", h.Protocol, runner.ProtocolVersion)
		}
		l := h.Layout
		if l.MaxPatches <= 0 || l.MaxImages <= 0 || l.MaxSeq <= 0 || l.PixelCols <= 0 || l.StateDim <= 0 || l.ActionHorizon <= 0 || l.ActionDim <= 0 {
			t.Fatalf("layout %+v has a non-positive size", l)
		}
		if h.Facts.Backend == "" || len(h.Facts.Stages) == 0 {
			t.Fatalf("facts %+v lack backend or stages", h.Facts)
		}
		if h.PID <= 0 {
			t.Fatalf("pid %d", h.PID)
		}
	})
	t.Run("ping", func(t *testing.T) {
		p := open(t, start, o)
		for range 3 {
			p.expect(p.send(runner.MsgPing, nil, -1), runner.MsgPong)
		}
	})
	t.Run("predict_bit_exact", func(t *testing.T) {
		p := open(t, start, o)
		p.attach(7, 0)
		var first []float32
		for i := range 2 { // twice: the second on a warm runner, same bits
			// Canaries everywhere but the inputs: the runner may write
			// inside output only.
			all := p.seg.F32(runner.Span{Offset: 0, Count: p.seg.Size() / 4})
			for j := range all {
				all[j] = math.Float32frombits(canary)
			}
			b := p.predictBody(o.Inputs)
			before := bitsOf(all)
			m := p.expect(p.send(runner.MsgPredict, b, -1), runner.MsgResult)
			for j, x := range bitsOf(all) {
				if off := 4 * j; (off < b.Output.Offset || off >= b.Output.Offset+4*b.Output.Count) && x != before[j] {
					t.Fatalf("run %d: the runner wrote at byte %d of the segment, outside output [%d, %d)", i, off, b.Output.Offset, b.Output.Offset+4*b.Output.Count)
				}
			}
			var r runner.ResultBody
			if err := json.Unmarshal(m.Body, &r); err != nil {
				t.Fatal(err)
			}
			if r.Horizon*r.ActionDim != len(o.Want) {
				t.Fatalf("result %d×%d, want %d values", r.Horizon, r.ActionDim, len(o.Want))
			}
			got := append([]float32(nil), p.seg.F32(runner.Span{Offset: b.Output.Offset, Count: len(o.Want)})...)
			if err := compare(got, o.Want, o.Tolerance); err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
			if i == 0 {
				first = got
			} else if err := compare(got, first, 0); err != nil {
				t.Fatalf("run 2 differs from run 1 on the same input (a runner must be deterministic): %v", err)
			}
			if len(r.Stages) == 0 {
				t.Fatalf("no stage timings")
			}
		}
	})
	t.Run("segment_too_small", func(t *testing.T) {
		p := open(t, start, o)
		p.attach(1, 4096) // one page: the inputs' spans lie beyond it
		off := p.hello.Layout.Offsets()
		b := runner.PredictBody{Segment: 1, PixelValues: runner.Span{Offset: 0, Count: len(o.Inputs.PixelValues)},
			PixelRows: o.Inputs.PixelRows, PixelCols: o.Inputs.PixelCols, ImageGridTHW: o.Inputs.ImageGridTHW,
			InputIDs:    runner.Span{Offset: off[runner.SlotInputIDs], Count: len(o.Inputs.InputIDs)},
			PositionIDs: runner.Span{Offset: off[runner.SlotPositionIDs], Count: len(o.Inputs.PositionIDs)},
			State:       runner.Span{Offset: off[runner.SlotState], Count: len(o.Inputs.State)}, EmbodimentID: o.Inputs.EmbodimentID,
			Output: runner.Span{Offset: off[runner.SlotOutput], Count: 1}}
		p.expectError(p.send(runner.MsgPredict, b, -1), runner.KindInput)
		p.expect(p.send(runner.MsgPing, nil, -1), runner.MsgPong) // still serving
	})
	t.Run("attach_beyond_memfd", func(t *testing.T) {
		p := open(t, start, o)
		seg, err := runner.NewSegment(2, 4096)
		if err != nil {
			t.Fatal(err)
		}
		defer seg.Close()
		id := p.send(runner.MsgAttach, runner.AttachBody{Segment: 2, Size: 1 << 20}, seg.FD())
		p.expectError(id, runner.KindInput)
		p.expect(p.send(runner.MsgPing, nil, -1), runner.MsgPong)
	})
	t.Run("unattached_segment", func(t *testing.T) {
		p := open(t, start, o)
		b := runner.PredictBody{Segment: 99}
		p.expectError(p.send(runner.MsgPredict, b, -1), runner.KindInput)
	})
	t.Run("input_error", func(t *testing.T) {
		p := open(t, start, o)
		p.attach(3, 0)
		in := *o.Inputs
		in.State = in.State[:len(in.State)-1] // one value short
		p.expectError(p.send(runner.MsgPredict, p.predictBody(&in), -1), runner.KindInput)
		p.expect(p.send(runner.MsgPing, nil, -1), runner.MsgPong)
	})
	t.Run("unknown_message", func(t *testing.T) {
		p := open(t, start, o)
		p.expectError(p.send(99, nil, -1), runner.KindProtocol)
		p.expect(p.send(runner.MsgPing, nil, -1), runner.MsgPong)
	})
	t.Run("ping_during_predict_and_cancel", func(t *testing.T) {
		p := open(t, start, o)
		p.attach(4, 0)
		pid := p.send(runner.MsgPredict, p.predictBody(o.SlowInputs), -1)
		ping := p.send(runner.MsgPing, nil, -1)
		if err := p.w.Send(runner.MsgCancel, pid, nil, -1); err != nil {
			t.Fatal(err)
		}
		var gotPong, gotPredict bool
		for !gotPong || !gotPredict {
			m := p.recv()
			switch {
			case m.ID == ping && m.Type == runner.MsgPong:
				gotPong = true
			case m.ID == pid && (m.Type == runner.MsgResult || m.Type == runner.MsgError):
				if m.Type == runner.MsgError {
					var e runner.ErrorBody
					_ = json.Unmarshal(m.Body, &e)
					if e.Kind != runner.KindCancelled {
						t.Fatalf("cancelled predict answered ERROR %q (%s), want cancelled or a result", e.Kind, e.Message)
					}
				}
				gotPredict = true
			default:
				t.Fatalf("unexpected message type %d id %d", m.Type, m.ID)
			}
		}
		// The runner serves the next prediction normally.
		p.expect(p.send(runner.MsgPredict, p.predictBody(o.Inputs), -1), runner.MsgResult)
	})
	t.Run("ping_answered_during_predict", func(t *testing.T) {
		p := open(t, start, o)
		p.attach(5, 0)
		d := p.slowDuration(t)
		pid := p.send(runner.MsgPredict, p.predictBody(o.SlowInputs), -1)
		ping := p.send(runner.MsgPing, nil, -1)
		m := p.recv()
		if m.ID == pid {
			t.Fatalf("PREDICT answered (type %d) before the PING sent right after it (the prediction takes %v): PINGs must be answered while a PREDICT runs", m.Type, d)
		}
		if m.ID != ping || m.Type != runner.MsgPong {
			t.Fatalf("unexpected message type %d id %d, want PONG %d", m.Type, m.ID, ping)
		}
		p.expect(pid, runner.MsgResult)
	})
	t.Run("cancel_before_completion", func(t *testing.T) {
		p := open(t, start, o)
		p.attach(6, 0)
		d := p.slowDuration(t)
		pid := p.send(runner.MsgPredict, p.predictBody(o.SlowInputs), -1)
		time.Sleep(d / 10)
		if err := p.w.Send(runner.MsgCancel, pid, nil, -1); err != nil {
			t.Fatal(err)
		}
		// CANCEL came at a tenth of the prediction's time: it must stop it.
		p.expectError(pid, runner.KindCancelled)
		p.expect(p.send(runner.MsgPredict, p.predictBody(o.Inputs), -1), runner.MsgResult)
	})
	t.Run("second_predict_while_busy", func(t *testing.T) {
		p := open(t, start, o)
		p.attach(8, 0)
		d := p.slowDuration(t)
		first := p.send(runner.MsgPredict, p.predictBody(o.SlowInputs), -1)
		second := p.send(runner.MsgPredict, p.predictBody(o.SlowInputs), -1)
		var gotFirst, gotSecond bool
		for !gotFirst || !gotSecond {
			m := p.recv()
			switch m.ID {
			case first:
				if m.Type != runner.MsgResult {
					t.Fatalf("the first PREDICT answered type %d (%s), want RESULT", m.Type, m.Body)
				}
				gotFirst = true
			case second:
				var e runner.ErrorBody
				_ = json.Unmarshal(m.Body, &e)
				if m.Type != runner.MsgError || e.Kind != runner.KindProtocol {
					t.Fatalf("a PREDICT sent while one runs (for %v) answered type %d (%s), want ERROR protocol (batch 1)", d, m.Type, m.Body)
				}
				gotSecond = true
			default:
				t.Fatalf("unexpected message type %d id %d", m.Type, m.ID)
			}
		}
		p.expect(p.send(runner.MsgPing, nil, -1), runner.MsgPong)
	})
	t.Run("close", func(t *testing.T) {
		p := open(t, start, o)
		p.expect(p.send(runner.MsgClose, nil, -1), runner.MsgClosed)
		if _, err := p.w.Recv(o.Timeout); !runner.IsEOF(err) && !errors.Is(err, net.ErrClosed) {
			t.Fatalf("after CLOSED: %v, want the connection closed", err)
		}
	})
}
