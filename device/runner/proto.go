// Package runner puts a device.Backend in its own process: the runner
// protocol (device/RUNNER.md) over a Unix SOCK_SEQPACKET socket with
// inputs in shared memory, its server side (Serve, what `gr00tgw runner`
// runs) and its client side (Open: a Pool of supervised runner processes
// that implements device.Backend). A crashed or hung runner costs the
// request in flight (device.ErrRestarting) and a restart, never the
// gateway. Linux only (memfd_create, SCM_RIGHTS, Pdeathsig): elsewhere
// only the protocol's types build, and Open, Serve and SocketPair return
// ErrUnsupported (config device.isolation defaults to inproc there).
package runner

import (
	"errors"
	"fmt"

	"github.com/gr00tgw/gr00tgw/device"
)

// ProtocolVersion is the runner protocol version this package speaks
// (HELLO "protocol"). A client refuses a runner of another version.
const ProtocolVersion = 1

// Magic starts every message: the bytes "GRNR".
const Magic = "GRNR"

// HeaderSize is the fixed message header: magic [4], type u32 LE, id u64 LE.
const HeaderSize = 16

// MaxMessage is the largest message either side sends or accepts (header
// and JSON body); tensors travel in shared memory, not in messages.
const MaxMessage = 1 << 20

// Message types (header "type").
const (
	MsgHello    uint32 = 1  // runner → client, first message: HelloBody
	MsgAttach   uint32 = 2  // client → runner, one memfd in SCM_RIGHTS: AttachBody
	MsgAttached uint32 = 3  // runner → client, same id: AttachBody
	MsgPredict  uint32 = 4  // client → runner: PredictBody
	MsgResult   uint32 = 5  // runner → client, same id: ResultBody
	MsgError    uint32 = 6  // runner → client, same id as the request: ErrorBody
	MsgCancel   uint32 = 7  // client → runner, id of the PREDICT to cancel; no reply of its own
	MsgPing     uint32 = 8  // client → runner; empty body
	MsgPong     uint32 = 9  // runner → client, same id; empty body
	MsgClose    uint32 = 10 // client → runner; empty body
	MsgClosed   uint32 = 11 // runner → client, same id; then the runner exits 0
)

// Error kinds (ErrorBody.Kind).
const (
	KindInput     = "input"     // inputs outside the layout or the segment: device.ErrInput
	KindDevice    = "device"    // the device failed
	KindCancelled = "cancelled" // CANCEL or the runner's own deadline stopped the call
	KindProtocol  = "protocol"  // a malformed or unexpected message
)

// Layout is what a runner accepts: the largest request and the tensor
// widths, so that a client can size shared memory (HELLO "layout").
type Layout struct {
	MaxPatches    int `json:"max_patches"`
	MaxImages     int `json:"max_images"`
	MaxSeq        int `json:"max_seq"`
	PixelCols     int `json:"pixel_cols"`
	StateDim      int `json:"state_dim"`
	ActionHorizon int `json:"action_horizon"`
	ActionDim     int `json:"action_dim"`
}

// MaxSegment caps SegmentSize: a HELLO layout needing a larger segment is
// a protocol error (1 GiB; the N1.7 layout needs about 11 MiB).
const MaxSegment = 1 << 30

// Validate checks that every size is positive and that the segment the
// layout needs (each tensor's 4-byte elements, without overflow) is at most
// MaxSegment; the error names the field at fault.
func (l Layout) Validate() error {
	fields := []struct {
		name string
		v    int
	}{{"max_patches", l.MaxPatches}, {"max_images", l.MaxImages}, {"max_seq", l.MaxSeq}, {"pixel_cols", l.PixelCols},
		{"state_dim", l.StateDim}, {"action_horizon", l.ActionHorizon}, {"action_dim", l.ActionDim}}
	for _, f := range fields {
		if f.v <= 0 {
			return fmt.Errorf("layout %s %d is not positive", f.name, f.v)
		}
	}
	// bytes of a×b 4-byte elements, or false past MaxSegment
	bytes := func(a, b int) (int, bool) {
		if a > MaxSegment/4/b {
			return 0, false
		}
		return 4 * a * b, true
	}
	total := 0
	for _, t := range []struct {
		name string
		a, b int
	}{{"max_patches × pixel_cols", l.MaxPatches, l.PixelCols}, {"max_seq", l.MaxSeq, 1}, {"max_seq", l.MaxSeq, 1},
		{"3 × max_seq", 3, l.MaxSeq}, {"state_dim", l.StateDim, 1},
		{"action_horizon × action_dim", l.ActionHorizon, l.ActionDim}, {"action_horizon × action_dim", l.ActionHorizon, l.ActionDim},
		{"action_horizon × action_dim", l.ActionHorizon, l.ActionDim}} {
		n, ok := bytes(t.a, t.b)
		if ok {
			total += (n + 63) &^ 63
		}
		if !ok || total > MaxSegment {
			return fmt.Errorf("layout %s (%d × %d values) needs a segment over MaxSegment (%d bytes)", t.name, t.a, t.b, MaxSegment)
		}
	}
	return nil
}

// SegmentSize is the shared-memory segment a request of this layout needs:
// pixel_values first (at offset 0, so that an encoder can write it in
// place), then input_ids, attention_mask, position_ids, state, noise, the
// output action_pred and the RTC previous chunk, each 64-byte aligned.
func (l Layout) SegmentSize() int {
	_, end := l.offsets()
	return end
}

// Slot is a tensor's place in a full-layout segment: Layout.Offsets is
// indexed by it, and the tensors lie in the segment in this order.
type Slot int

const (
	SlotPixelValues   Slot = iota // at offset 0, so that an encoder can write it in place
	SlotInputIDs                  // int32, MaxSeq
	SlotAttentionMask             // int32, MaxSeq
	SlotPositionIDs               // int32, 3 × MaxSeq
	SlotState                     // float32, StateDim
	SlotNoise                     // float32, ActionHorizon × ActionDim
	SlotOutput                    // float32 action_pred, ActionHorizon × ActionDim
	SlotRTCPrev                   // float32 RTC previous chunk, ActionHorizon × ActionDim
	NumSlots                      // the number of slots
)

var slotNames = [NumSlots]string{"pixel_values", "input_ids", "attention_mask", "position_ids", "state", "noise", "output", "rtc prev"}

// String is the tensor's name (pixel_values, input_ids, …, rtc prev).
func (s Slot) String() string {
	if s < 0 || s >= NumSlots {
		return fmt.Sprintf("slot(%d)", int(s))
	}
	return slotNames[s]
}

// offsets returns the fixed offsets of the tensors of a full-layout
// segment, by Slot, and the segment size.
func (l Layout) offsets() ([NumSlots]int, int) {
	chunk := l.ActionHorizon * l.ActionDim
	sizes := [NumSlots]int{
		SlotPixelValues: l.MaxPatches * l.PixelCols, SlotInputIDs: l.MaxSeq, SlotAttentionMask: l.MaxSeq,
		SlotPositionIDs: 3 * l.MaxSeq, SlotState: l.StateDim, SlotNoise: chunk, SlotOutput: chunk, SlotRTCPrev: chunk,
	}
	var off [NumSlots]int
	p := 0
	for i, n := range sizes {
		off[i] = p
		p += (n*4 + 63) &^ 63
	}
	return off, (p + 4095) &^ 4095
}

// Facts is device.Facts on the wire (HELLO "facts").
type Facts struct {
	Backend    string         `json:"backend"`
	Policy     string         `json:"policy"`
	Stages     []string       `json:"stages"`
	MaxSeqLen  int            `json:"max_seq_len"`
	MaxImages  int            `json:"max_images"`
	MaxPatches int            `json:"max_patches"`
	Extra      map[string]any `json:"extra,omitempty"`
}

func wireFacts(f device.Facts) Facts {
	return Facts{Backend: f.Backend, Policy: f.Policy, Stages: f.Stages, MaxSeqLen: f.MaxSeqLen,
		MaxImages: f.MaxImages, MaxPatches: f.MaxPatches, Extra: f.Extra}
}

func (f Facts) device() device.Facts {
	return device.Facts{Backend: f.Backend, Policy: f.Policy, Stages: f.Stages, MaxSeqLen: f.MaxSeqLen,
		MaxImages: f.MaxImages, MaxPatches: f.MaxPatches, Extra: f.Extra}
}

// HelloBody is the runner's first message.
type HelloBody struct {
	Protocol int    `json:"protocol"`
	Runner   string `json:"runner"` // implementation and version, free text
	PID      int    `json:"pid"`
	Facts    Facts  `json:"facts"`
	Layout   Layout `json:"layout"`
	// Features lists the optional parts of the protocol the runner
	// implements ("rtc"); a client never sends what a runner did not list.
	Features []string `json:"features,omitempty"`
}

// AttachBody names a shared-memory segment (ATTACH, ATTACHED). Size is the
// bytes the runner maps; it must not exceed the memfd's size.
type AttachBody struct {
	Segment uint32 `json:"segment"`
	Size    int    `json:"size"`
}

// Span is one tensor in a segment: Count elements (float32 or int32, 4
// bytes each) from byte Offset (a multiple of 4).
type Span struct {
	Offset int `json:"offset"`
	Count  int `json:"count"`
}

// PredictBody is one prediction: device.Inputs with every tensor in the
// attached segment Segment. AttentionMask and Noise are optional (null).
type PredictBody struct {
	Segment       uint32   `json:"segment"`
	PixelValues   Span     `json:"pixel_values"`
	PixelRows     int      `json:"pixel_rows"`
	PixelCols     int      `json:"pixel_cols"`
	ImageGridTHW  [][3]int `json:"image_grid_thw"`
	InputIDs      Span     `json:"input_ids"`
	AttentionMask *Span    `json:"attention_mask"`
	PositionIDs   Span     `json:"position_ids"`
	State         Span     `json:"state"`
	Noise         *Span    `json:"noise"`
	Seed          uint64   `json:"seed"`
	EmbodimentID  int      `json:"embodiment_id"`
	// Output is where the runner writes action_pred [horizon·action_dim].
	Output Span `json:"output"`
	// TimeoutMS, when > 0, is the call's remaining deadline: the runner
	// may stop the call past it (answering ERROR cancelled).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// RTC, when present, turns on real-time chunking (device.RTC); only
	// sent to a runner whose HELLO lists the feature "rtc".
	RTC *RTCBody `json:"rtc,omitempty"`
}

// RTCBody is device.RTC on the wire: the previous chunk [prev_rows,
// action_dim] float32 at Prev in the segment, and the options under
// upstream's names.
type RTCBody struct {
	Prev     Span    `json:"prev"`
	PrevRows int     `json:"prev_rows"`
	Horizon  int     `json:"action_horizon"`
	Overlap  int     `json:"rtc_overlap_steps"`
	Frozen   int     `json:"rtc_frozen_steps"`
	RampRate float64 `json:"rtc_ramp_rate"`
}

// FeatureRTC is the HELLO feature of a runner that implements PREDICT's rtc.
const FeatureRTC = "rtc"

// StageNS is one stage's wall time in nanoseconds.
type StageNS struct {
	Name string `json:"name"`
	NS   int64  `json:"ns"`
}

// ResultBody answers PREDICT: action_pred is in the request's Output span.
type ResultBody struct {
	Horizon   int       `json:"horizon"`
	ActionDim int       `json:"action_dim"`
	Stages    []StageNS `json:"stages"`
	// Extra, optional, holds HELLO facts.extra keys whose values changed
	// since (the PyTorch runner's cuda_graphs as layouts are captured);
	// the client merges them into the facts it reports.
	Extra map[string]any `json:"extra,omitempty"`
}

// ErrorBody answers a request that failed.
type ErrorBody struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// errProtocol is wrapped by errors about malformed or unexpected messages.
var errProtocol = errors.New("runner: protocol error")

// msg is one decoded message.
type msg struct {
	typ  uint32
	id   uint64
	body []byte
	fd   int // a descriptor received with it, -1 if none
}

// Offsets returns the byte offsets of a full-layout segment's tensors, by
// Slot (the layout the Go client uses; any in-bounds spans are valid on
// the wire).
func (l Layout) Offsets() [NumSlots]int {
	off, _ := l.offsets()
	return off
}
