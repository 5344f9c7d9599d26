package zmtp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/internal/pytest"
)

// echoServer accepts ZMTP connections as ROUTER and answers every message
// with its envelope and "echo:" + payload; an over-limit message is
// answered "too large".
func echoServer(t *testing.T, o Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				nc.SetDeadline(time.Now().Add(30 * time.Second))
				c, err := Handshake(nc, o)
				if err != nil {
					return
				}
				for {
					frames, err := c.ReadMessage()
					var tl *TooLargeError
					if errors.As(err, &tl) && tl.Discarded {
						c.WriteMessage(nil, []byte("too large"))
						continue
					}
					if err != nil {
						return
					}
					last := len(frames) - 1
					reply := append(append([][]byte{}, frames[:last]...), append([]byte("echo:"), frames[last]...))
					if c.WriteMessage(reply...) != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func dialREQ(t *testing.T, addr string) *Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	c, err := Handshake(nc, Options{SocketType: "REQ", MaxMessage: 1 << 20})
	require.NoError(t, err)
	return c
}

func TestEchoAndLimits(t *testing.T) {
	addr := echoServer(t, Options{SocketType: "ROUTER", MaxMessage: 1000, DiscardMax: 100000})
	c := dialREQ(t, addr)
	assert.Equal(t, "ROUTER", c.PeerType)
	for _, payload := range [][]byte{[]byte("hi"), bytes.Repeat([]byte{7}, 300), {}} {
		require.NoError(t, c.WriteMessage(nil, payload))
		got, err := c.ReadMessage()
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.Empty(t, got[0], "empty delimiter kept")
		assert.Equal(t, append([]byte("echo:"), payload...), got[1])
	}
	// Over the limit: discarded, answered, and the connection goes on.
	require.NoError(t, c.WriteMessage(nil, bytes.Repeat([]byte{1}, 5000)))
	got, err := c.ReadMessage()
	require.NoError(t, err)
	assert.Equal(t, "too large", string(got[1]))
	require.NoError(t, c.WriteMessage(nil, []byte("again")))
	got, err = c.ReadMessage()
	require.NoError(t, err)
	assert.Equal(t, "echo:again", string(got[1]))

	// Over DiscardMax: the declared length alone ends the connection,
	// nothing is allocated for it.
	raw := []byte{flagLong}
	raw = binary.BigEndian.AppendUint64(raw, 1<<40)
	_, err = c.w.Write(raw)
	require.NoError(t, err)
	require.NoError(t, c.w.Flush())
	_, err = c.ReadMessage()
	assert.Error(t, err, "server closed the connection")
}

func TestBadPeers(t *testing.T) {
	addr := echoServer(t, Options{SocketType: "ROUTER", MaxMessage: 1000})
	for _, tc := range []struct {
		name  string
		write []byte
		want  string
	}{
		{name: "http", write: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat(" ", 64))},
		{name: "zmtp 2.0", write: append([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 1}, make([]byte, 53)...)},
		{name: "PUB socket", write: append(greeting(), frame(flagCommand, readyCommand("PUB"))...), want: "invalid socket type PUB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			nc.Write(tc.write)
			// The server reads the greeting, refuses it and closes.
			got, err := io.ReadAll(nc)
			assert.NoError(t, err, "closed cleanly, not hung")
			assert.Contains(t, string(got), tc.want)
		})
	}
}

func TestGreetingMechanism(t *testing.T) {
	// A PLAIN greeting is refused with an ERROR command.
	in := greeting()
	copy(in[12:32], "PLAIN\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	var out bytes.Buffer
	_, err := handshake(struct {
		io.Reader
		io.Writer
	}{bytes.NewReader(in), &out}, Options{SocketType: "ROUTER", MaxMessage: 10})
	require.ErrorContains(t, err, `security mechanism "PLAIN"`)
	assert.Contains(t, out.String(), "ERROR")
}

func TestPING(t *testing.T) {
	in := append(greeting(), frame(flagCommand, readyCommand("REQ"))...)
	in = append(in, frame(flagCommand, append([]byte("\x04PING\x00\x0a"), "ctx"...))...)
	in = append(in, frame(0, []byte("m"))...)
	var out bytes.Buffer
	c, err := handshake(struct {
		io.Reader
		io.Writer
	}{bytes.NewReader(in), &out}, Options{SocketType: "ROUTER", MaxMessage: 10})
	require.NoError(t, err)
	got, err := c.ReadMessage()
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("m")}, got)
	assert.True(t, bytes.HasSuffix(out.Bytes(), []byte("\x04PONGctx")), "% x", out.Bytes())
}

func frame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		b := []byte{flags | flagLong}
		b = binary.BigEndian.AppendUint64(b, uint64(len(body)))
		return append(b, body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// TestPyzmq talks to libzmq (pyzmq) both ways: a pyzmq REQ client against
// our ROUTER, and our REQ against a pyzmq REP server.
func TestPyzmq(t *testing.T) {
	py := pytest.Find(t, "zmq")
	addr := echoServer(t, Options{SocketType: "ROUTER", MaxMessage: 1 << 20, DiscardMax: 8 << 20})
	out := pytest.Run(t, py, nil, "-c", `
import sys, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.REQ)
s.setsockopt(zmq.RCVTIMEO, 15000); s.setsockopt(zmq.SNDTIMEO, 15000)
s.connect("tcp://`+addr+`")
for p in (b"ping", b"x" * 70000, b"y" * (2 << 20), b"after"):
    s.send(p)
    r = s.recv()
    print(len(p), r[:12].decode())
`)
	assert.Equal(t, "4 echo:ping\n70000 echo:xxxxxxx\n2097152 too large\n5 echo:after\n", string(out))

	// Our REQ against a pyzmq REP server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	done := make(chan []byte, 1)
	go func() {
		done <- pytest.Run(t, py, nil, "-c", `
import zmq
s = zmq.Context().socket(zmq.REP)
s.setsockopt(zmq.RCVTIMEO, 20000)
s.bind("tcp://127.0.0.1:`+itoa(port)+`")
for _ in range(2):
    m = s.recv()
    s.send(b"rep:" + m)
print("ok")
`)
	}()
	var c *Conn
	for i := 0; i < 100; i++ {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		c, err = Handshake(nc, Options{SocketType: "REQ", MaxMessage: 1 << 20})
		require.NoError(t, err)
		break
	}
	require.NotNil(t, c, "pyzmq REP server never listened")
	assert.Equal(t, "REP", c.PeerType)
	for _, p := range []string{"a", strings.Repeat("b", 1000)} {
		require.NoError(t, c.WriteMessage(nil, []byte(p)))
		got, err := c.ReadMessage()
		require.NoError(t, err)
		assert.Equal(t, "rep:"+p, string(got[len(got)-1]))
	}
	assert.Equal(t, "ok\n", string(<-done))
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// FuzzReadMessage feeds arbitrary peer bytes after a valid greeting and
// READY: the handshake and the message reader never panic, never read a
// frame over the limit into memory, and stop at the first error.
func FuzzReadMessage(f *testing.F) {
	hs := append(greeting(), frame(flagCommand, readyCommand("REQ"))...)
	f.Add(frame(flagMore, nil))
	f.Add(append(frame(flagMore, nil), frame(0, []byte("payload"))...))
	f.Add([]byte{flagLong, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(frame(flagCommand, []byte("\x04PING\x00\x01")))
	f.Add(frame(0, bytes.Repeat([]byte{1}, 300)))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append(append([]byte(nil), hs...), b...)
		c, err := handshake(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(in), io.Discard}, Options{SocketType: "ROUTER", MaxMessage: 256, DiscardMax: 4096})
		if err != nil {
			t.Fatalf("valid handshake refused: %v", err)
		}
		for i := 0; i < 100; i++ {
			frames, err := c.ReadMessage()
			var tl *TooLargeError
			if errors.As(err, &tl) && tl.Discarded {
				continue
			}
			if err != nil {
				return
			}
			n := 0
			for _, fr := range frames {
				n += len(fr)
			}
			if n > 256 {
				t.Fatalf("message of %d bytes over the limit", n)
			}
		}
	})
}

// FuzzHandshake: arbitrary greetings and READY commands never panic.
func FuzzHandshake(f *testing.F) {
	f.Add(append(greeting(), frame(flagCommand, readyCommand("REQ"))...))
	f.Add(append(greeting(), frame(flagCommand, []byte("\x05READY\x0bSocket-Type\xff\xff\xff\xffREQ"))...))
	f.Add(greeting()[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = handshake(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(b), io.Discard}, Options{SocketType: "ROUTER", MaxMessage: 256})
	})
}
