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

	"github.com/gr00tgw/gr00tgw/client"
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
	if a.apiKey != "" {
		return a.apiKey
	}
	return strings.TrimSpace(os.Getenv(apiKeyEnv))
}

// options are the client options of the flags: the --ca-file trust, the
// key, and TLS errors explained in terms of --ca-file.
func (a *authOptions) options(timeout time.Duration) (client.Options, error) {
	o := client.Options{Timeout: timeout, APIKey: a.key()}
	if a.caFile != "" {
		cfg, err := client.TLSConfig(a.caFile)
		if err != nil {
			return o, fmt.Errorf("--ca-file: %w", err)
		}
		o.TLS = cfg
	}
	o.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return trustHint{rt, a.caFile != ""} }
	return o, nil
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
