package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gr00tgw/gr00tgw/gateway/secure"
)

// apiKeyEnv holds the client tools' API key when --api-key is not given
// (an environment variable keeps the key out of the process list and the
// shell history).
const apiKeyEnv = "GR00TGW_API_KEY"

// authOptions are the client tools' TLS trust and API key (predict, smoke,
// bench).
type authOptions struct {
	caFile, apiKey string
}

// addAuthFlags defines --ca-file and --api-key on fs.
func addAuthFlags(fs *pflag.FlagSet) *authOptions {
	a := &authOptions{}
	fs.StringVar(&a.caFile, "ca-file", "", "PEM CA certificate(s) to trust for an https:// server (empty: the system roots)")
	fs.StringVar(&a.apiKey, "api-key", "", "API key for a server with auth.api_keys_file, sent as Authorization: Bearer (HTTP, openpi) or api_token (zmq) (empty: $"+apiKeyEnv+")")
	return a
}

// key is --api-key, else $GR00TGW_API_KEY.
func (a *authOptions) key() string {
	if a == nil {
		return ""
	}
	if a.apiKey != "" {
		return a.apiKey
	}
	return strings.TrimSpace(os.Getenv(apiKeyEnv))
}

// httpClient is an HTTP client with timeout that trusts --ca-file and
// sends the API key as "Authorization: Bearer <key>" on every request.
func (a *authOptions) httpClient(timeout time.Duration) (*http.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if a != nil && a.caFile != "" {
		cfg, err := secure.ClientConfig(a.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		t.TLSClientConfig = cfg
	}
	var rt http.RoundTripper = t
	if k := a.key(); k != "" {
		rt = bearer{key: k, next: t}
	}
	return &http.Client{Timeout: timeout, Transport: trustHint{rt, a != nil && a.caFile != ""}}, nil
}

// trustHint adds what to do to a TLS error about the server's certificate:
// pass the CA that signed it (--ca-file), or check the one passed.
type trustHint struct {
	next   http.RoundTripper
	withCA bool
}

func (h trustHint) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(r)
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	var host x509.HostnameError
	switch {
	case err == nil:
	case errors.As(err, &host):
		err = fmt.Errorf("%w (the certificate does not name %s: use the host name or IP it was issued for)", err, r.URL.Hostname())
	case errors.As(err, &unknown) || errors.As(err, &verify):
		if h.withCA {
			err = fmt.Errorf("%w (the server's certificate is not signed by the --ca-file CA)", err)
		} else {
			err = fmt.Errorf("%w (the server's certificate is not trusted by this host: pass the CA that signed it with --ca-file CA.pem)", err)
		}
	}
	return resp, err
}

// bearer adds "Authorization: Bearer <key>" to requests that carry none.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.next.RoundTrip(r)
}
