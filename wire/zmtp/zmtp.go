// Package zmtp is a minimal ZMTP 3.0 peer (https://rfc.zeromq.org/spec/23/)
// over one TCP connection: the 64-byte greeting, the NULL security
// mechanism's READY handshake with a socket-type check, and message frames
// with short (1-byte) and long (8-byte) lengths. It is what frontend/zmq
// serves Isaac-GR00T's pyzmq REQ clients with (announcing ROUTER, so each
// connection is one peer and replies keep the request's envelope) and
// what its Go client speaks (announcing REQ).
//
// Every declared frame length is checked against the configured maximum
// message size before anything is allocated, and a frame body is read in
// bounded chunks, so memory grows with the bytes that really arrive. A
// message over the limit (up to Options.DiscardMax) is read and discarded
// so the peer can go on after an error reply. PLAIN and CURVE security,
// ZMTP 1.0/2.0 peers and multi-hop routing are out of scope.
package zmtp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
)

// Frame flag bits.
const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
)

// greetingLen is the size of a ZMTP 3.x greeting.
const greetingLen = 64

// maxCommand bounds a command frame (READY metadata, PING, ERROR).
const maxCommand = 64 << 10

// chunk is the largest allocation made ahead of the bytes it holds.
const chunk = 1 << 20

// ErrProtocol is wrapped by errors about a peer that breaks ZMTP.
var ErrProtocol = errors.New("zmtp")

// TooLargeError reports a data message over Options.MaxMessage. When
// Discarded is true the message was read to its end and dropped: the
// connection is still in step and the peer can be answered; otherwise the
// connection must be closed.
type TooLargeError struct {
	// Size is the message's declared size so far (bytes).
	Size int64
	// Limit is Options.MaxMessage.
	Limit int
	// Discarded reports whether the message was skipped to its end.
	Discarded bool
}

// Error says how large the message was and the limit.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("message of %d bytes exceeds the maximum message size of %d bytes", e.Size, e.Limit)
}

// Options configure a connection.
type Options struct {
	// SocketType is the type this side announces ("ROUTER", "REQ", …).
	SocketType string
	// MaxMessage bounds the total size of a data message's frames (bytes).
	MaxMessage int
	// MaxFrames bounds the frames of one message (default 64).
	MaxFrames int
	// DiscardMax is the largest over-limit message that is read and
	// dropped rather than ending the connection (default 4×MaxMessage).
	DiscardMax int64
}

// Conn is one ZMTP connection after the handshake. It is not safe for
// concurrent use, except that Close may be called at any time.
type Conn struct {
	nc net.Conn // nil when built over a plain io.ReadWriter (tests)
	r  *bufio.Reader
	w  *bufio.Writer
	o  Options

	// PeerType is the peer's Socket-Type.
	PeerType string
	// PeerMinor is the peer's ZMTP minor version (0 or 1).
	PeerMinor byte
}

// compatible lists, per socket type, the peer types ZMTP allows
// (RFC 28 request-reply).
var compatible = map[string][]string{
	"ROUTER": {"REQ", "DEALER", "ROUTER"},
	"REP":    {"REQ", "DEALER"},
	"REQ":    {"REP", "ROUTER"},
	"DEALER": {"REP", "DEALER", "ROUTER"},
}

// Handshake runs the greeting and the NULL handshake on nc as o.SocketType
// and returns the connection. The caller bounds it with a deadline on nc.
func Handshake(nc net.Conn, o Options) (*Conn, error) {
	c, err := handshake(nc, o)
	if c != nil {
		c.nc = nc
	}
	return c, err
}

func handshake(rw io.ReadWriter, o Options) (*Conn, error) {
	if o.MaxFrames <= 0 {
		o.MaxFrames = 64
	}
	if o.DiscardMax <= 0 {
		o.DiscardMax = 4 * int64(o.MaxMessage)
	}
	c := &Conn{r: bufio.NewReaderSize(rw, 64<<10), w: bufio.NewWriterSize(rw, 64<<10), o: o}
	// Our greeting and READY go out at once; libzmq reads a 3.x greeting
	// whole and answers with the rest of its own.
	c.w.Write(greeting()) //nolint:errcheck // bufio: the flush reports it
	if err := c.writeCommand(readyCommand(o.SocketType)); err != nil {
		return nil, err
	}
	var g [greetingLen]byte
	if _, err := io.ReadFull(c.r, g[:10]); err != nil {
		return nil, fmt.Errorf("zmtp: reading the greeting: %w", err)
	}
	if g[0] != 0xff || g[9]&0x01 == 0 {
		return nil, fmt.Errorf("%w: not a ZMTP peer (greeting % x)", ErrProtocol, g[:10])
	}
	if _, err := io.ReadFull(c.r, g[10:]); err != nil {
		return nil, fmt.Errorf("zmtp: reading the greeting: %w", err)
	}
	if g[10] < 3 {
		return nil, fmt.Errorf("%w: peer speaks ZMTP %d.%d, want 3.x", ErrProtocol, g[10], g[11])
	}
	c.PeerMinor = g[11]
	if mech := string(bytes.TrimRight(g[12:32], "\x00")); mech != "NULL" {
		c.sendError("unsupported security mechanism " + mech)
		return nil, fmt.Errorf("%w: peer asks for security mechanism %q, only NULL is served", ErrProtocol, mech)
	}
	flags, size, err := c.header()
	if err != nil {
		return nil, err
	}
	if flags&flagCommand == 0 {
		return nil, fmt.Errorf("%w: want the READY command, got a message frame", ErrProtocol)
	}
	body, err := c.command(size)
	if err != nil {
		return nil, err
	}
	name, rest, err := commandName(body)
	if err != nil {
		return nil, err
	}
	switch name {
	case "READY":
	case "ERROR":
		return nil, fmt.Errorf("%w: peer refused the handshake: %s", ErrProtocol, errorReason(rest))
	default:
		return nil, fmt.Errorf("%w: want the READY command, got %q", ErrProtocol, name)
	}
	props, err := parseProperties(rest)
	if err != nil {
		return nil, err
	}
	c.PeerType = props["Socket-Type"]
	if !slices.Contains(compatible[o.SocketType], c.PeerType) {
		c.sendError("invalid socket type " + c.PeerType)
		return nil, fmt.Errorf("%w: peer socket type %q cannot talk to %s", ErrProtocol, c.PeerType, o.SocketType)
	}
	return c, nil
}

func greeting() []byte {
	g := make([]byte, greetingLen)
	g[0], g[9] = 0xff, 0x7f
	g[10], g[11] = 3, 0
	copy(g[12:], "NULL")
	return g
}

func readyCommand(socketType string) []byte {
	b := []byte{5}
	b = append(b, "READY"...)
	b = appendProperty(b, "Socket-Type", socketType)
	if socketType == "REQ" || socketType == "DEALER" || socketType == "ROUTER" {
		b = appendProperty(b, "Identity", "")
	}
	return b
}

func appendProperty(b []byte, name, value string) []byte {
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

func commandName(body []byte) (string, []byte, error) {
	if len(body) < 1 || int(body[0]) > len(body)-1 {
		return "", nil, fmt.Errorf("%w: malformed command frame", ErrProtocol)
	}
	n := int(body[0])
	return string(body[1 : 1+n]), body[1+n:], nil
}

func parseProperties(b []byte) (map[string]string, error) {
	props := map[string]string{}
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 || 1+n+4 > len(b) {
			return nil, fmt.Errorf("%w: malformed READY metadata", ErrProtocol)
		}
		name := string(b[1 : 1+n])
		vl := binary.BigEndian.Uint32(b[1+n:])
		b = b[1+n+4:]
		if uint64(vl) > uint64(len(b)) {
			return nil, fmt.Errorf("%w: READY property %s of %d bytes, %d left", ErrProtocol, name, vl, len(b))
		}
		props[name] = string(b[:vl])
		b = b[vl:]
	}
	return props, nil
}

func errorReason(b []byte) string {
	if len(b) < 1 || int(b[0]) > len(b)-1 {
		return "(no reason)"
	}
	return string(b[1 : 1+int(b[0])])
}

// sendError sends an ERROR command (best effort, during the handshake).
func (c *Conn) sendError(reason string) {
	if len(reason) > 255 {
		reason = reason[:255]
	}
	b := append([]byte{5}, "ERROR"...)
	b = append(b, byte(len(reason)))
	_ = c.writeCommand(append(b, reason...))
}

func (c *Conn) writeCommand(body []byte) error {
	c.writeHeader(flagCommand, len(body))
	c.w.Write(body) //nolint:errcheck // bufio: the flush reports it
	return c.w.Flush()
}

func (c *Conn) writeHeader(flags byte, n int) {
	if n > 255 {
		c.w.WriteByte(flags | flagLong) //nolint:errcheck // bufio: the flush reports it
		var l [8]byte
		binary.BigEndian.PutUint64(l[:], uint64(n))
		c.w.Write(l[:]) //nolint:errcheck // bufio: the flush reports it
		return
	}
	c.w.WriteByte(flags)   //nolint:errcheck // bufio: the flush reports it
	c.w.WriteByte(byte(n)) //nolint:errcheck // bufio: the flush reports it
}

// header reads one frame header: its flags and declared size.
func (c *Conn) header() (byte, int64, error) {
	flags, err := c.r.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	if flags&^(flagMore|flagLong|flagCommand) != 0 {
		return 0, 0, fmt.Errorf("%w: frame flags 0x%02x have reserved bits set", ErrProtocol, flags)
	}
	if flags&flagLong == 0 {
		n, err := c.r.ReadByte()
		if err != nil {
			return 0, 0, unexpected(err)
		}
		return flags, int64(n), nil
	}
	var l [8]byte
	if _, err := io.ReadFull(c.r, l[:]); err != nil {
		return 0, 0, unexpected(err)
	}
	u := binary.BigEndian.Uint64(l[:])
	if u > 1<<62 {
		return 0, 0, fmt.Errorf("%w: frame length %d", ErrProtocol, u)
	}
	return flags, int64(u), nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// command reads a command frame's body (bounded by maxCommand).
func (c *Conn) command(size int64) ([]byte, error) {
	if size > maxCommand {
		return nil, fmt.Errorf("%w: command frame of %d bytes (at most %d)", ErrProtocol, size, maxCommand)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return nil, unexpected(err)
	}
	return b, nil
}

// body reads a frame body of n bytes. Its buffer doubles as bytes arrive
// (chunk at first), so it holds at most max(chunk, twice what has
// arrived): a peer that declares n and stalls costs what it sent, not n.
func (c *Conn) body(n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, chunk))
	for len(buf) < n {
		step := min(n-len(buf), max(len(buf), chunk))
		buf = slices.Grow(buf, step)
		if _, err := io.ReadFull(c.r, buf[len(buf):len(buf)+step]); err != nil {
			return nil, unexpected(err)
		}
		buf = buf[:len(buf)+step]
	}
	return buf, nil
}

// AwaitData answers the command frames (PING heartbeats) that arrive
// before the next data frame and returns once that frame's first byte is
// buffered, without consuming it. A caller waiting for an idle peer's next
// request calls it under its idle deadline, so a peer that heartbeats
// (libzmq's ZMQ_HEARTBEAT_IVL) is held to that deadline, not to the one
// for reading a message. An error leaves the connection unusable.
func (c *Conn) AwaitData() error {
	for {
		b, err := c.r.Peek(1)
		if err != nil {
			return err
		}
		if b[0]&flagCommand == 0 {
			return nil
		}
		_, size, err := c.header()
		if err != nil {
			return unexpected(err)
		}
		if err := c.handleCommand(size); err != nil {
			return err
		}
	}
}

// ReadMessage returns the frames of the next data message, answering PING
// commands on the way. A message over MaxMessage returns a
// *TooLargeError (see its Discarded). Any other error leaves the
// connection unusable.
func (c *Conn) ReadMessage() ([][]byte, error) {
	var (
		frames [][]byte
		total  int64
		count  int
		over   bool
	)
	for {
		flags, size, err := c.header()
		if err != nil {
			if count > 0 {
				return nil, unexpected(err)
			}
			return nil, err
		}
		if flags&flagCommand != 0 {
			if count > 0 {
				return nil, fmt.Errorf("%w: command frame inside a message", ErrProtocol)
			}
			if err := c.handleCommand(size); err != nil {
				return nil, err
			}
			continue
		}
		count++
		if count > c.o.MaxFrames {
			return nil, fmt.Errorf("%w: message of more than %d frames", ErrProtocol, c.o.MaxFrames)
		}
		total += size
		if total > int64(c.o.MaxMessage) {
			over = true
		}
		if over {
			if total > c.o.DiscardMax {
				return nil, &TooLargeError{Size: total, Limit: c.o.MaxMessage}
			}
			if _, err := io.CopyN(io.Discard, c.r, size); err != nil {
				return nil, unexpected(err)
			}
		} else {
			b, err := c.body(int(size))
			if err != nil {
				return nil, err
			}
			frames = append(frames, b)
		}
		if flags&flagMore == 0 {
			break
		}
	}
	if over {
		return nil, &TooLargeError{Size: total, Limit: c.o.MaxMessage, Discarded: true}
	}
	return frames, nil
}

func (c *Conn) handleCommand(size int64) error {
	body, err := c.command(size)
	if err != nil {
		return err
	}
	name, rest, err := commandName(body)
	if err != nil {
		return err
	}
	switch name {
	case "PING": // ZMTP 3.1 heartbeat: TTL (2 bytes), then the context to echo
		if len(rest) < 2 {
			return fmt.Errorf("%w: malformed PING", ErrProtocol)
		}
		ctx := rest[2:]
		if len(ctx) > 16 {
			ctx = ctx[:16]
		}
		return c.writeCommand(append(append([]byte{4}, "PONG"...), ctx...))
	case "ERROR":
		return fmt.Errorf("%w: peer error: %s", ErrProtocol, errorReason(rest))
	}
	return nil // PONG, SUBSCRIBE, CANCEL, unknown commands: ignored
}

// WriteMessage sends frames as one message.
func (c *Conn) WriteMessage(frames ...[]byte) error {
	for i, f := range frames {
		var flags byte
		if i < len(frames)-1 {
			flags = flagMore
		}
		c.writeHeader(flags, len(f))
		c.w.Write(f) //nolint:errcheck // bufio: the flush reports it
	}
	return c.w.Flush()
}

// NetConn is the underlying connection (for deadlines).
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the connection.
func (c *Conn) Close() error {
	if c.nc == nil {
		return nil
	}
	return c.nc.Close()
}
