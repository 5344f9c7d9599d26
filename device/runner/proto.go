// Package runner puts a device.Backend in its own process: the runner
// protocol (device/RUNNER.md) over a Unix SOCK_SEQPACKET socket with
// inputs in shared memory, its server side (Serve, what `gr00tgw runner`
// runs) and its client side (Open: a Pool of supervised runner processes
// that implements device.Backend). A crashed or hung runner costs the
// request in flight (device.ErrRestarting) and a restart, never the
// gateway. Linux only (memfd_create, SCM_RIGHTS).
package runner

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

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

// SegmentSize is the shared-memory segment a request of this layout needs:
// pixel_values first (at offset 0, so that an encoder can write it in
// place), then input_ids, attention_mask, position_ids, state, noise and
// the output action_pred, each 64-byte aligned.
func (l Layout) SegmentSize() int {
	_, end := l.offsets()
	return end
}

// offsets returns the fixed offsets of the tensors of a full-layout segment
// (in order: pixel_values, input_ids, attention_mask, position_ids, state,
// noise, output) and the segment size.
func (l Layout) offsets() ([7]int, int) {
	sizes := [7]int{l.MaxPatches * l.PixelCols, l.MaxSeq, l.MaxSeq, 3 * l.MaxSeq, l.StateDim,
		l.ActionHorizon * l.ActionDim, l.ActionHorizon * l.ActionDim}
	var off [7]int
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
}

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

// sock is one end of a SEQPACKET connection.
type sock struct {
	c   *net.UnixConn
	buf []byte
	oob []byte
}

func newSock(c *net.UnixConn) *sock {
	return &sock{c: c, buf: make([]byte, MaxMessage), oob: make([]byte, unix.CmsgSpace(4*4))}
}

// send writes one message; fd >= 0 travels in SCM_RIGHTS. Not safe for
// concurrent use (callers serialise writes).
func (s *sock) send(typ uint32, id uint64, body any, fd int) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	p := make([]byte, HeaderSize+len(b))
	copy(p, Magic)
	binary.LittleEndian.PutUint32(p[4:], typ)
	binary.LittleEndian.PutUint64(p[8:], id)
	copy(p[HeaderSize:], b)
	if len(p) > MaxMessage {
		return fmt.Errorf("runner: message type %d of %d bytes over %d", typ, len(p), MaxMessage)
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	_, _, err := s.c.WriteMsgUnix(p, oob, nil)
	return err
}

// recv reads one message. A deadline of zero means none. Not safe for
// concurrent use. A received descriptor belongs to the caller.
func (s *sock) recv(deadline time.Time) (msg, error) {
	_ = s.c.SetReadDeadline(deadline)
	n, oobn, flags, _, err := s.c.ReadMsgUnix(s.buf, s.oob)
	if errors.Is(err, io.EOF) {
		return msg{fd: -1}, errEOF
	}
	if err != nil {
		return msg{fd: -1}, err
	}
	m := msg{fd: -1}
	if oobn > 0 {
		cms, perr := unix.ParseSocketControlMessage(s.oob[:oobn])
		if perr == nil {
			for _, cm := range cms {
				fds, ferr := unix.ParseUnixRights(&cm)
				if ferr != nil {
					continue
				}
				for _, fd := range fds {
					if m.fd < 0 {
						m.fd = fd
					} else {
						_ = unix.Close(fd) // one descriptor per message at most
					}
				}
			}
		}
	}
	if n == 0 {
		closeFD(m.fd)
		return msg{fd: -1}, errEOF
	}
	if flags&unix.MSG_TRUNC != 0 || flags&unix.MSG_CTRUNC != 0 {
		closeFD(m.fd)
		return msg{fd: -1}, fmt.Errorf("%w: message over %d bytes", errProtocol, MaxMessage)
	}
	if n < HeaderSize || string(s.buf[:4]) != Magic {
		closeFD(m.fd)
		return msg{fd: -1}, fmt.Errorf("%w: %d bytes without the %q header (%q)", errProtocol, n, Magic, printable(s.buf[:min(n, 16)]))
	}
	m.typ = binary.LittleEndian.Uint32(s.buf[4:])
	m.id = binary.LittleEndian.Uint64(s.buf[8:])
	m.body = append([]byte(nil), s.buf[HeaderSize:n]...)
	return m, nil
}

// errEOF is the peer closing the connection.
var errEOF = errors.New("runner: connection closed by the peer")

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}

func printable(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 32 || c > 126 {
			c = '.'
		}
		out[i] = c
	}
	return string(out)
}

// decode unmarshals a message body strictly enough for the protocol.
func decode(m msg, v any) error {
	if err := json.Unmarshal(m.body, v); err != nil {
		return fmt.Errorf("%w: message type %d: %w", errProtocol, m.typ, err)
	}
	return nil
}

// SocketPair returns a connected SOCK_SEQPACKET pair: the client end as a
// connection and the runner end as a file to hand a child process (close
// it in the parent once the child started). Both are close-on-exec; the
// child inherits its end through exec.Cmd.ExtraFiles.
func SocketPair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("runner: socketpair: %w", err)
	}
	cf := os.NewFile(uintptr(fds[0]), "runner-client")
	defer cf.Close()
	c, err := net.FileConn(cf)
	if err != nil {
		_ = unix.Close(fds[1])
		return nil, nil, fmt.Errorf("runner: socketpair: %w", err)
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "runner-socket"), nil
}

// Message is one raw protocol message (Wire).
type Message struct {
	Type uint32
	ID   uint64
	Body []byte
	// FD is a descriptor received with it (SCM_RIGHTS), -1 if none; the
	// receiver owns it.
	FD int
}

// Wire is a raw protocol endpoint, for conformance suites and tools that
// speak the protocol message by message (device/runnertest). Not safe for
// concurrent use.
type Wire struct{ s *sock }

// NewWire wraps a connected SOCK_SEQPACKET socket.
func NewWire(c *net.UnixConn) *Wire { return &Wire{newSock(c)} }

// Send writes one message: header, JSON of body (nil: empty), and fd in
// SCM_RIGHTS when fd >= 0.
func (w *Wire) Send(typ uint32, id uint64, body any, fd int) error {
	return w.s.send(typ, id, body, fd)
}

// SendRaw writes p as one message, unchecked (to test a peer's handling
// of garbage).
func (w *Wire) SendRaw(p []byte) error {
	_, _, err := w.s.c.WriteMsgUnix(p, nil, nil)
	return err
}

// Recv reads one message within timeout (0: no limit).
func (w *Wire) Recv(timeout time.Duration) (Message, error) {
	var dl time.Time
	if timeout > 0 {
		dl = time.Now().Add(timeout)
	}
	m, err := w.s.recv(dl)
	return Message{Type: m.typ, ID: m.id, Body: m.body, FD: m.fd}, err
}

// Close closes the connection.
func (w *Wire) Close() error { return w.s.c.Close() }

// IsEOF reports whether err is the peer closing the connection.
func IsEOF(err error) bool { return errors.Is(err, errEOF) }

// Offsets returns the byte offsets of a full-layout segment's tensors, in
// order pixel_values, input_ids, attention_mask, position_ids, state,
// noise, output (the layout the Go client uses; any in-bounds spans are
// valid on the wire).
func (l Layout) Offsets() [7]int {
	off, _ := l.offsets()
	return off
}
