package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionsKeys: sessions.max, sessions.ttl and sessions.max_bytes
// default to 1024, 5m and 64 MiB, load from flags, env and file, and
// refuse values outside their range naming the key.
func TestSessionsKeys(t *testing.T) {
	d := Default()
	assert.Equal(t, Sessions{Max: 1024, TTL: 5 * time.Minute, MaxBytes: 64 << 20}, d.Sessions)
	assert.Equal(t, "upstream", d.RTC.Mode)
	for _, tc := range []struct {
		name    string
		file    string
		env     []string
		args    []string
		want    Sessions
		wantErr string
	}{
		{name: "flags", args: []string{"--sessions-max=8", "--sessions-ttl=30s", "--sessions-max-bytes=1048576"},
			want: Sessions{Max: 8, TTL: 30 * time.Second, MaxBytes: 1 << 20}},
		{name: "env", env: []string{"GR00TGW_SESSIONS_MAX=2", "GR00TGW_SESSIONS_TTL=1h"},
			want: Sessions{Max: 2, TTL: time.Hour, MaxBytes: 64 << 20}},
		{name: "file", file: "sessions:\n  max: 16\n  max_bytes: 200000\n",
			want: Sessions{Max: 16, TTL: 5 * time.Minute, MaxBytes: 200000}},
		{name: "max zero", args: []string{"--sessions-max=0"}, wantErr: "key[sessions.max]"},
		{name: "max huge", args: []string{"--sessions-max=2000000"}, wantErr: "key[sessions.max]"},
		{name: "ttl zero", env: []string{"GR00TGW_SESSIONS_TTL=0s"}, wantErr: "key[sessions.ttl]"},
		{name: "bytes tiny", args: []string{"--sessions-max-bytes=1000"}, wantErr: "key[sessions.max_bytes]"},
		{name: "rtc mode", args: []string{"--rtc-mode=guided"}, wantErr: "key[rtc.mode]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{Environ: tc.env}
			if src.Environ == nil {
				src.Environ = []string{}
			}
			if tc.file != "" {
				src.File = writeFile(t, tc.file)
			}
			src.Flags = parsedFlags(t, tc.args...)
			l, err := Load(src)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, l.Config.Sessions)
		})
	}
}
