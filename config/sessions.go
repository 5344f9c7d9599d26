package config

import (
	"fmt"
	"time"
)

// Sessions bounds the per-robot session store (issue 27 point 2): each
// session keeps its embodiment, plugin version, the last normalised
// action_pred, when it was produced and a latency estimate, for real-time
// chunking across calls. Evicted least recently used past max sessions or
// max_bytes, expired after ttl unused.
type Sessions struct {
	// Max caps the sessions held; admitting one more evicts the least
	// recently used (metric gateway.sessions.evictions, reason capacity).
	Max int `koanf:"max" flag:"sessions-max" usage:"most sessions held (least recently used evicted past it)"`
	// TTL expires a session unused (neither read nor written) this long.
	TTL time.Duration `koanf:"ttl" flag:"sessions-ttl" usage:"drop a session unused this long"`
	// MaxBytes caps the memory the sessions are charged (their chunks,
	// ids and a fixed overhead each); least recently used are evicted
	// past it.
	MaxBytes int `koanf:"max_bytes" flag:"sessions-max-bytes" usage:"memory bound of the session store in bytes (least recently used evicted past it)"`
}

// RTC configures real-time chunking.
type RTC struct {
	// Mode is how a session's previous chunk seeds the next: "upstream"
	// (default: its rows as the model produced them, bit-exact with
	// upstream N1.7) or "reencode" (the plugin re-expresses the rows not
	// yet executed against the current state and renormalises them at
	// their new positions, for state-relative action groups; plugins
	// without the reencode export fall back to upstream).
	Mode string `koanf:"mode" flag:"rtc-mode" usage:"how a session's previous chunk seeds real-time chunking: upstream (bit-exact) or reencode (re-expressed against the current state by the plugin)"`
}

// RTC modes.
const (
	RTCModeUpstream = "upstream"
	RTCModeReencode = "reencode"
)

// Defaults of Sessions (session.DefaultMaxSessions etc.; config does not
// import the session package).
const (
	DefaultSessionsMax      = 1024
	DefaultSessionsTTL      = 5 * time.Minute
	DefaultSessionsMaxBytes = 64 << 20
)

func defaultSessions() Sessions {
	return Sessions{Max: DefaultSessionsMax, TTL: DefaultSessionsTTL, MaxBytes: DefaultSessionsMaxBytes}
}

func (c *Config) sessionChecks() []keyCheck {
	return []keyCheck{
		{"sessions.max", func() error {
			if c.Sessions.Max < 1 || c.Sessions.Max > 1<<20 {
				return fmt.Errorf("%d is outside [1, 1048576]", c.Sessions.Max)
			}
			return nil
		}},
		{"sessions.ttl", func() error { return positive(c.Sessions.TTL) }},
		{"rtc.mode", func() error { return oneOf(c.RTC.Mode, RTCModeUpstream, RTCModeReencode) }},
		{"sessions.max_bytes", func() error {
			if c.Sessions.MaxBytes < 64<<10 {
				return fmt.Errorf("%d is below 65536 (one session of a full chunk needs ~22 KB)", c.Sessions.MaxBytes)
			}
			return nil
		}},
	}
}
