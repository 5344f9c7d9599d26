package secure_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/frontend/secure"
	"github.com/gr00tgw/gr00tgw/frontend/secure/securetest"
)

// TestCertificateReloadAndPlainHTTP serves net/http over Listen: a client
// trusting the CA connects, a rotated pair is served after Reload (a bad
// pair is refused and the old one stays), and plain HTTP is answered 400.
func TestCertificateReloadAndPlainHTTP(t *testing.T) {
	t.Parallel()
	ca := securetest.NewCA(t, "test-ca")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Issue(t, "first", certFile, keyFile)
	c, err := secure.LoadCertificate(certFile, keyFile)
	require.NoError(t, err)
	assert.Contains(t, c.Describe(), `subject "first"`)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })} //nolint:errcheck
	go srv.Serve(c.Listen(ln))                                                                                               //nolint:errcheck
	t.Cleanup(func() { srv.Close() })

	ccfg, err := secure.ClientConfig(ca.File)
	require.NoError(t, err)
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	assert.Equal(t, "first", served())

	ca.Issue(t, "second", certFile, keyFile)
	require.NoError(t, c.Reload())
	assert.Equal(t, "second", served())

	require.NoError(t, os.WriteFile(keyFile, []byte("not a key"), 0o600))
	err = c.Reload()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tls: cert["+certFile+"]")
	assert.Equal(t, "second", served(), "a failed reload keeps the served pair")

	// A client without the CA refuses the server.
	_, err = tls.Dial("tcp", ln.Addr().String(), &tls.Config{MinVersion: tls.VersionTLS12})
	require.Error(t, err)

	// Plain HTTP to the TLS port: a 400 naming the problem, then closed,
	// both for a server that reads first (net/http here) and for one that
	// handshakes explicitly first (fasthttp).
	plainHTTP(t, ln.Addr().String())
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tl := c.Listen(ln2)
	t.Cleanup(func() { tl.Close() })
	go func() {
		for {
			conn, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if err := conn.(interface{ Handshake() error }).Handshake(); err == nil {
					io.WriteString(conn, "HTTP/1.0 200 OK\r\n\r\n") //nolint:errcheck
				}
			}()
		}
	}()
	plainHTTP(t, ln2.Addr().String())

	_, err = secure.ClientConfig(filepath.Join(dir, "missing.pem"))
	require.Error(t, err)
	_, err = secure.ClientConfig(keyFile)
	require.ErrorContains(t, err, "no PEM certificate")
}

// plainHTTP sends a plain HTTP request to a TLS address and expects a 400
// naming the problem.
func plainHTTP(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.True(t, strings.Contains(string(body), "HTTPS server"), string(body))
}
