package main

import (
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
	return &http.Client{Timeout: timeout, Transport: rt}, nil
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
