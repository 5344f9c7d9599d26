//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gr00tgw/gr00tgw/device"
)

// Serve runs the runner side of the protocol on c for backend b, which it
// does not close: HELLO, then ATTACH, PREDICT (one at a time, batch 1),
// CANCEL, PING and CLOSE until the client sends CLOSE (nil) or goes away
// (an error wrapping the cause). PINGs are answered while a prediction
// runs. Serve returns once the prediction in flight, if any, has stopped.
func Serve(ctx context.Context, c *net.UnixConn, b device.Backend, o ServeOptions) error {
	if err := o.Layout.Validate(); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	s := &server{s: newSock(c), b: b, segs: map[uint32]*segment{}}
	defer s.closeSegments()
	hello := HelloBody{Protocol: ProtocolVersion, Runner: o.Runner, PID: os.Getpid(), Facts: wireFacts(b.Facts()), Layout: o.Layout,
		Features: []string{FeatureRTC}}
	if err := s.write(MsgHello, 0, hello); err != nil {
		return fmt.Errorf("runner: hello: %w", err)
	}
	defer s.stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := s.s.recv(time.Time{})
		if err != nil {
			return err
		}
		switch m.typ {
		case MsgPing:
			closeFD(m.fd)
			if err := s.write(MsgPong, m.id, nil); err != nil {
				return err
			}
		case MsgAttach:
			s.attach(m)
		case MsgPredict:
			closeFD(m.fd)
			s.predict(ctx, m)
		case MsgCancel:
			closeFD(m.fd)
			s.mu.Lock()
			if s.busy && s.curID == m.id {
				s.cancel()
			}
			s.mu.Unlock()
		case MsgClose:
			closeFD(m.fd)
			s.stop()
			return s.write(MsgClosed, m.id, nil)
		default:
			closeFD(m.fd)
			_ = s.write(MsgError, m.id, ErrorBody{Kind: KindProtocol, Message: fmt.Sprintf("unknown message type %d", m.typ)})
		}
	}
}

type server struct {
	s    *sock
	b    device.Backend
	wmu  sync.Mutex
	segs map[uint32]*segment // read loop only, and the prediction in flight (never both writing)

	mu     sync.Mutex
	busy   bool
	curID  uint64
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *server) write(typ uint32, id uint64, body any) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.s.send(typ, id, body, -1)
}

func (s *server) fail(id uint64, kind string, err error) {
	_ = s.write(MsgError, id, ErrorBody{Kind: kind, Message: err.Error()})
}

func (s *server) attach(m msg) {
	var a AttachBody
	if err := decode(m, &a); err != nil {
		closeFD(m.fd)
		s.fail(m.id, KindProtocol, err)
		return
	}
	if m.fd < 0 {
		s.fail(m.id, KindProtocol, fmt.Errorf("runner: ATTACH segment[%d] without a descriptor", a.Segment))
		return
	}
	if s.isBusy() {
		// The prediction in flight may use the segment being replaced.
		closeFD(m.fd)
		s.fail(m.id, KindProtocol, fmt.Errorf("runner: ATTACH segment[%d] while a prediction runs", a.Segment))
		return
	}
	seg, err := mapSegment(a.Segment, m.fd, a.Size)
	if err != nil {
		s.fail(m.id, KindInput, err)
		return
	}
	if old := s.segs[a.Segment]; old != nil {
		old.close()
	}
	s.segs[a.Segment] = seg
	_ = s.write(MsgAttached, m.id, a)
}

func (s *server) isBusy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

// inputs builds device.Inputs as views of the segment (no copy).
func (s *server) inputs(p *PredictBody) (*device.Inputs, *segment, error) {
	seg := s.segs[p.Segment]
	if seg == nil {
		return nil, nil, fmt.Errorf("segment[%d] is not attached", p.Segment)
	}
	if p.PixelRows < 0 || p.PixelCols < 0 || (p.PixelCols > 0 && p.PixelRows > p.PixelValues.Count/p.PixelCols) || p.PixelValues.Count != p.PixelRows*p.PixelCols {
		return nil, nil, fmt.Errorf("pixel_values has %d elements, want pixel_rows %d × pixel_cols %d", p.PixelValues.Count, p.PixelRows, p.PixelCols)
	}
	spans := []struct {
		name string
		sp   *Span
	}{{"pixel_values", &p.PixelValues}, {"input_ids", &p.InputIDs}, {"attention_mask", p.AttentionMask},
		{"position_ids", &p.PositionIDs}, {"state", &p.State}, {"noise", p.Noise}, {"output", &p.Output}}
	if p.RTC != nil {
		spans = append(spans, struct {
			name string
			sp   *Span
		}{"rtc.prev", &p.RTC.Prev})
	}
	for _, x := range spans {
		if x.sp == nil {
			continue
		}
		if err := seg.span(x.name, *x.sp); err != nil {
			return nil, nil, err
		}
	}
	in := &device.Inputs{PixelValues: seg.f32(p.PixelValues), PixelRows: p.PixelRows, PixelCols: p.PixelCols,
		ImageGridTHW: p.ImageGridTHW, InputIDs: seg.i32(p.InputIDs), PositionIDs: seg.i32(p.PositionIDs),
		State: seg.f32(p.State), EmbodimentID: p.EmbodimentID, Seed: p.Seed}
	if p.AttentionMask != nil {
		in.AttentionMask = seg.i32(*p.AttentionMask)
	}
	if p.Noise != nil {
		in.Noise = seg.f32(*p.Noise)
	}
	if r := p.RTC; r != nil {
		in.RTC = &device.RTC{Prev: seg.f32(r.Prev), PrevRows: r.PrevRows, Horizon: r.Horizon, Overlap: r.Overlap, Frozen: r.Frozen, RampRate: r.RampRate}
	}
	return in, seg, nil
}

func (s *server) predict(ctx context.Context, m msg) {
	var p PredictBody
	if err := decode(m, &p); err != nil {
		s.fail(m.id, KindProtocol, err)
		return
	}
	in, seg, err := s.inputs(&p)
	if err != nil {
		s.fail(m.id, KindInput, fmt.Errorf("%w: %w", device.ErrInput, err))
		return
	}
	s.mu.Lock()
	if s.busy {
		s.mu.Unlock()
		s.fail(m.id, KindProtocol, fmt.Errorf("runner: PREDICT %d while PREDICT %d runs (batch 1)", m.id, s.curID))
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	if p.TimeoutMS > 0 {
		cctx, cancel = context.WithTimeout(ctx, time.Duration(p.TimeoutMS)*time.Millisecond)
	}
	s.busy, s.curID, s.cancel, s.done = true, m.id, cancel, make(chan struct{})
	done := s.done
	s.mu.Unlock()
	go func() {
		defer close(done)
		res, err := s.b.Predict(cctx, in)
		typ, body := MsgResult, any(nil)
		errBody := func(kind string, err error) { typ, body = MsgError, ErrorBody{Kind: kind, Message: err.Error()} }
		switch {
		case err != nil && cctx.Err() != nil:
			errBody(KindCancelled, fmt.Errorf("runner: predict cancelled: %w", err))
		case errors.Is(err, device.ErrInput):
			errBody(KindInput, err)
		case err != nil:
			errBody(KindDevice, err)
		case len(res.ActionPred) != p.Output.Count:
			errBody(KindInput, fmt.Errorf("%w: action_pred has %d values, output span %d", device.ErrInput, len(res.ActionPred), p.Output.Count))
		default:
			copy(seg.f32(p.Output), res.ActionPred)
			rb := ResultBody{Horizon: res.Horizon, ActionDim: res.ActionDim, Stages: make([]StageNS, len(res.Stages))}
			for i, st := range res.Stages {
				rb.Stages[i] = StageNS{st.Name, st.Duration.Nanoseconds()}
			}
			body = rb
		}
		// Idle before the answer: the client may send the next ATTACH or
		// PREDICT as soon as it has read it.
		s.mu.Lock()
		s.busy = false
		s.cancel()
		s.mu.Unlock()
		_ = s.write(typ, m.id, body)
	}()
}

// stop cancels the prediction in flight and waits for it.
func (s *server) stop() {
	s.mu.Lock()
	done := s.done
	if s.busy {
		s.cancel()
	}
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (s *server) closeSegments() {
	for id, seg := range s.segs {
		seg.close()
		delete(s.segs, id)
	}
}
