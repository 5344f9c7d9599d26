package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSConfig is a client TLS configuration (TLS 1.2 or later) that trusts
// the PEM CA certificates in caFile, or the system roots when caFile is
// "". A file that cannot be read or holds no certificate is an error
// naming it.
func TLSConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ca file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca file %s: no PEM certificate", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}
