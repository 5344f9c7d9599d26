package httpfront

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/frontend/secure/securetest"
)

// serveTCP serves f on a loopback listener and returns its address.
func serveTCP(t *testing.T, f *fixture) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(func() { _ = f.shutdown(context.Background()) })
	return ln.Addr().String()
}

// rawPredict sends a /predict request on a fresh connection and returns it
// (the answer unread).
func rawPredict(t *testing.T, addr string, body []byte) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	require.NoError(t, err)
	_, err = conn.Write(body)
	require.NoError(t, err)
	return conn
}

// A client that disconnects cancels its request: a running prediction
// gives the device back, a queued one its queue slot, within a poll or two.
func TestClientDisconnectCancels(t *testing.T) {
	f := newFixture(t, true)
	addr := serveTCP(t, f)
	f.backend.gate = make(chan struct{}) // the device call waits (or for its ctx)
	f.backend.started = make(chan struct{}, 4)
	defer close(f.backend.gate)

	running := rawPredict(t, addr, body(t, nil))
	<-f.backend.started
	queued := rawPredict(t, addr, body(t, nil))
	require.Eventually(t, func() bool { return f.core.QueueWaiting() == 1 }, 5*time.Second, time.Millisecond, "second request queued")

	t0 := time.Now()
	require.NoError(t, queued.Close())
	require.Eventually(t, func() bool { return f.core.QueueWaiting() == 0 }, time.Second, time.Millisecond, "queue slot released")
	require.NoError(t, running.Close())
	require.Eventually(t, func() bool { return f.backend.active.Load() == 0 && f.core.Inflight() == 0 }, time.Second, time.Millisecond,
		"device released")
	d := time.Since(t0)
	t.Logf("both released %v after the disconnects", d)
	assert.Less(t, d, 500*time.Millisecond)

	// The device serves the next client at once.
	f.backend.gate, f.backend.started = nil, nil
	conn := rawPredict(t, addr, body(t, nil))
	defer conn.Close()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
}

// TestTLSClientDisconnectCancels: over TLS (tls.cert_file) a client that
// disconnects cancels its request as over plain TCP. The watcher only
// knew *net.TCPConn, and a peek would see the close_notify alert the
// client sends before its FIN, not the FIN.
func TestTLSClientDisconnectCancels(t *testing.T) {
	ca := securetest.NewCA(t, "disconnect")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	ca.Issue(t, "localhost", certFile, keyFile)
	cert, err := secure.LoadCertificate(certFile, keyFile)
	require.NoError(t, err)
	ccfg, err := secure.ClientConfig(ca.File)
	require.NoError(t, err)

	f := newFixture(t, true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = f.srv.Serve(cert.Listen(ln)) }()
	t.Cleanup(func() { _ = f.shutdown(context.Background()) })
	f.backend.gate = make(chan struct{})
	f.backend.started = make(chan struct{}, 4)
	defer close(f.backend.gate)

	b := body(t, nil)
	conn, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(b))
	require.NoError(t, err)
	_, err = conn.Write(b)
	require.NoError(t, err)
	<-f.backend.started
	require.NoError(t, conn.Close()) // close_notify, then FIN
	require.Eventually(t, func() bool { return f.backend.active.Load() == 0 && f.core.Inflight() == 0 },
		5*time.Second, 5*time.Millisecond, "device released")
}

// A request beyond the queue is refused before its body is read (a body
// under drainMax is discarded so that the client reads the answer, a
// larger one is not read at all), and a body over max_body_bytes is
// refused from its Content-Length: neither is buffered.
func TestBodyReadOnlyWhenAdmitted(t *testing.T) {
	f := newFixture(t, true, func(c *config.Config, o *fixtureOptions, d *fixture) { c.QueueDepth = 0; c.MaxBodyBytes = 16 << 20 })
	addr := serveTCP(t, f)
	f.backend.gate = make(chan struct{})
	f.backend.started = make(chan struct{}, 4)
	defer close(f.backend.gate)
	holder := rawPredict(t, addr, body(t, nil))
	defer holder.Close()
	<-f.backend.started

	for _, tc := range []struct {
		name   string
		length int
		want   int
	}{
		{"beyond the queue", 8 << 20, http.StatusServiceUnavailable},
		{"over the limit", 64 << 20, http.StatusRequestEntityTooLarge},
	} {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		// Headers and 16 KiB of the body (fasthttp reads up to 8 KiB
		// before the handler runs); the rest is never sent. An answer
		// proves the server did not wait for it.
		_, err = fmt.Fprintf(conn, "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{%s", tc.length, strings.Repeat(" ", 16<<10))
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, resp.StatusCode, tc.name)
		assert.True(t, resp.Close || strings.EqualFold(resp.Header.Get("Connection"), "close"), "%s: connection closed after a refused body", tc.name)
		conn.Close()
	}
}
