package main

import (
	"log/slog"
	"net"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/frontend/secure"
)

// security is serve's TLS certificate and API keyring (nil when off),
// both re-read on SIGHUP.
type security struct {
	keys *secure.Keyring
	cert *secure.Certificate
}

// loadSecurity reads tls.* and auth.api_keys_file at start; a file that
// does not parse fails the start with its key named.
func loadSecurity(cfg config.Config, log *slog.Logger) (*security, error) {
	sec := &security{}
	if cfg.TLS.CertFile != "" {
		c, err := secure.LoadCertificate(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			return nil, &config.KeyError{Key: "tls.cert_file", Err: err}
		}
		sec.cert = c
		log.Info("TLS: serving HTTPS only", "certificate", c.Describe())
	}
	if cfg.Auth.APIKeysFile != "" {
		k, err := secure.LoadKeyring(cfg.Auth.APIKeysFile)
		if err != nil {
			return nil, &config.KeyError{Key: "auth.api_keys_file", Err: err}
		}
		sec.keys = k
		log.Info("API keys required on every predict route (health and /metrics open)", "file", cfg.Auth.APIKeysFile, "keys", k.Len())
	}
	return sec, nil
}

// listen wraps the HTTP listener in TLS when a certificate is configured.
func (s *security) listen(ln net.Listener) net.Listener {
	if s.cert == nil {
		return ln
	}
	return s.cert.Listen(ln)
}

// reload re-reads the certificate and the key file (SIGHUP). What fails
// to load is logged and the previous certificate or keys keep serving.
func (s *security) reload(log *slog.Logger) {
	if s.cert != nil {
		if err := s.cert.Reload(); err != nil {
			log.Error("SIGHUP: TLS certificate not reloaded (the previous one keeps serving)", "err", err)
		} else {
			log.Info("SIGHUP: TLS certificate reloaded", "certificate", s.cert.Describe())
		}
	}
	if s.keys != nil {
		if n, err := s.keys.Reload(); err != nil {
			log.Error("SIGHUP: API keys not reloaded (the previous keys keep serving)", "err", err, "keys", n)
		} else {
			log.Info("SIGHUP: API keys reloaded", "file", s.keys.Path(), "keys", n)
		}
	}
}
