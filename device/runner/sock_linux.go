//go:build linux

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
)

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
