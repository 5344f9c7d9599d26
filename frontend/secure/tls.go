package secure

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Certificate is a TLS server certificate read from a PEM certificate
// (chain) file and its key file, served through GetCertificate so Reload
// swaps it for new handshakes without a restart (connections already
// established keep theirs). Safe for concurrent use.
type Certificate struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
	mu                sync.Mutex
}

// LoadCertificate reads certFile and keyFile (PEM). Errors name the files.
func LoadCertificate(certFile, keyFile string) (*Certificate, error) {
	c := &Certificate{certFile: certFile, keyFile: keyFile}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload re-reads both files; when they hold a valid pair it replaces the
// served certificate, otherwise the previous one stays and the error is
// returned.
func (c *Certificate) Reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls: cert[%s] key[%s]: %w", c.certFile, c.keyFile, err)
	}
	if pair.Leaf == nil && len(pair.Certificate) > 0 {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("tls: cert[%s]: %w", c.certFile, err)
		}
	}
	c.cert.Store(&pair)
	return nil
}

// Leaf is the served certificate's leaf (for logs: subject, expiry).
func (c *Certificate) Leaf() *x509.Certificate {
	if p := c.cert.Load(); p != nil {
		return p.Leaf
	}
	return nil
}

// Describe is a one-line summary of the served certificate for logs:
// subject, DNS names and expiry (no key material).
func (c *Certificate) Describe() string {
	l := c.Leaf()
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("subject %q dns %v not_after %s", l.Subject.CommonName, l.DNSNames, l.NotAfter.UTC().Format(time.RFC3339))
}

// GetCertificate is tls.Config.GetCertificate: the certificate served now.
func (c *Certificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p := c.cert.Load()
	if p == nil {
		return nil, errors.New("tls: no certificate loaded")
	}
	return p, nil
}

// ServerConfig is the TLS configuration of a gateway listener: TLS 1.2 at
// least, HTTP/1.1 over ALPN (fasthttp serves no HTTP/2), the certificate
// from GetCertificate.
func (c *Certificate) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: c.GetCertificate,
	}
}

// Listen wraps ln so every accepted connection speaks TLS with c. A
// client that sends plain HTTP fails the handshake: it is answered a
// plain-text 400 naming the problem (as net/http answers it) and closed.
func (c *Certificate) Listen(ln net.Listener) net.Listener {
	return &tlsListener{Listener: ln, cfg: c.ServerConfig()}
}

type tlsListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsConn{Conn: tls.Server(nc, l.cfg)}, nil
}

// tlsConn is a server *tls.Conn (fasthttp sees its ConnectionState) whose
// first failed handshake with a plain-text client is answered.
type tlsConn struct {
	*tls.Conn
	answered atomic.Bool
}

// plainHTTPAnswer is what a plain-HTTP client of a TLS port reads.
const plainHTTPAnswer = "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" +
	"client sent an HTTP request to an HTTPS server (tls.cert_file is set: use https://)\n"

func (c *tlsConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.answerPlain(err)
	return n, err
}

// Handshake is tls.Conn's, answering a plain-HTTP client (fasthttp
// handshakes explicitly before it reads).
func (c *tlsConn) Handshake() error {
	err := c.Conn.Handshake()
	c.answerPlain(err)
	return err
}

// HandshakeContext is tls.Conn's, answering a plain-HTTP client.
func (c *tlsConn) HandshakeContext(ctx context.Context) error {
	err := c.Conn.HandshakeContext(ctx)
	c.answerPlain(err)
	return err
}

// answerPlain writes plainHTTPAnswer once when err says the client spoke
// something else than TLS, and closes the connection.
func (c *tlsConn) answerPlain(err error) {
	var rhe tls.RecordHeaderError
	if err != nil && errors.As(err, &rhe) && rhe.Conn != nil && c.answered.CompareAndSwap(false, true) {
		_ = rhe.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(rhe.Conn, plainHTTPAnswer)
		_ = rhe.Conn.Close()
	}
}

// ClientConfig returns a client TLS configuration trusting the PEM CA
// certificates in caFile ("" : the system roots).
func ClientConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: ca file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: ca file %s: no PEM certificate", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}
