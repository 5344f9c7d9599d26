package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListenAddr(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "5555", want: "127.0.0.1:5555"},
		{in: ":5555", want: "127.0.0.1:5555"},
		{in: "*:5555", want: "0.0.0.0:5555"},
		{in: "tcp://*:5555", want: "0.0.0.0:5555"},
		{in: "0.0.0.0:8000", want: "0.0.0.0:8000"},
		{in: "localhost:0", want: "localhost:0"},
		{in: "[::1]:5555", want: "[::1]:5555"},
		{in: "nope", err: `port "nope" is not a number`},
		{in: "1.2.3.4:70000", err: "not a number in [0, 65535]"},
		{in: "", err: "empty address"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ListenAddr(tc.in)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestProtocolKeys(t *testing.T) {
	d := Default()
	assert.Empty(t, d.ZMQ.Addr, "zmq off by default")
	assert.Empty(t, d.OpenPI.Addr, "openpi off by default")
	assert.False(t, d.ZMQ.AllowKill)
	for _, tc := range []struct {
		name    string
		file    string
		env     []string
		args    []string
		check   func(t *testing.T, l *Loaded)
		wantErr string
	}{
		{name: "flags", args: []string{"--zmq-addr=5555", "--openpi-addr=*:8000", "--zmq-api-token=t", "--zmq-allow-kill", "--zmq-max-batch=2"},
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, "127.0.0.1:5555", l.Config.ZMQ.Addr, "resolved (ListenAddr)")
				assert.Equal(t, "0.0.0.0:8000", l.Config.OpenPI.Addr)
				assert.Equal(t, "t", l.Config.ZMQ.APIToken)
				assert.True(t, l.Config.ZMQ.AllowKill)
				assert.Equal(t, 2, l.Config.ZMQ.MaxBatch)
				assert.Equal(t, Origin{LayerFlag, "--zmq-addr"}, l.Provenance["zmq.addr"])
			}},
		{name: "env", env: []string{"GR00TGW_ZMQ_ADDR=0.0.0.0:5555", "GR00TGW_OPENPI_API_KEY=k", "GR00TGW_OPENPI_IDLE_TIMEOUT=1m"},
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, "0.0.0.0:5555", l.Config.ZMQ.Addr)
				assert.Equal(t, "k", l.Config.OpenPI.APIKey)
				assert.Equal(t, time.Minute, l.Config.OpenPI.IdleTimeout)
			}},
		{name: "file", file: "zmq:\n  addr: tcp://*:5555\n  max_message_bytes: 2048\nopenpi:\n  addr: \"8000\"\n",
			check: func(t *testing.T, l *Loaded) {
				assert.Equal(t, "0.0.0.0:5555", l.Config.ZMQ.Addr)
				assert.Equal(t, 2048, l.Config.ZMQ.MaxMessageBytes)
				assert.Equal(t, "127.0.0.1:8000", l.Config.OpenPI.Addr)
			}},
		{name: "bad zmq addr", args: []string{"--zmq-addr=host:port"}, wantErr: "config: key[zmq.addr] (from flag --zmq-addr)"},
		{name: "bad batch", env: []string{"GR00TGW_ZMQ_MAX_BATCH=0"}, wantErr: "key[zmq.max_batch]"},
		{name: "tiny message limit", args: []string{"--openpi-max-message-bytes=10"}, wantErr: "key[openpi.max_message_bytes]"},
		{name: "zero timeout", args: []string{"--zmq-read-timeout=0s"}, wantErr: "key[zmq.read_timeout]"},
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
			tc.check(t, l)
		})
	}
}

// TestOneAddressRule: addr, zmq.addr and openpi.addr read the same way (a
// bare port or :port is loopback, *:port every interface, tcp:// dropped)
// and refuse the same malformed values, each naming its key.
func TestOneAddressRule(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"20000", "127.0.0.1:20000"}, {":20000", "127.0.0.1:20000"}, {"*:20000", "0.0.0.0:20000"},
		{"tcp://*:20000", "0.0.0.0:20000"}, {"0.0.0.0:20000", "0.0.0.0:20000"}, {"[::1]:20000", "[::1]:20000"},
	} {
		for _, flag := range []string{"addr", "zmq-addr", "openpi-addr"} {
			l, err := Load(Sources{Environ: []string{}, Flags: parsedFlags(t, "--"+flag+"="+tc.in)})
			require.NoError(t, err, "--%s=%s", flag, tc.in)
			got := map[string]string{"addr": l.Config.Addr, "zmq-addr": l.Config.ZMQ.Addr, "openpi-addr": l.Config.OpenPI.Addr}[flag]
			assert.Equal(t, tc.want, got, "--%s=%s", flag, tc.in)
		}
	}
	for _, bad := range []string{"host:port", "20000x", "1.2.3.4", ":65536"} {
		for flag, key := range map[string]string{"addr": "addr", "zmq-addr": "zmq.addr", "openpi-addr": "openpi.addr"} {
			_, err := Load(Sources{Environ: []string{}, Flags: parsedFlags(t, "--"+flag+"="+bad)})
			require.Error(t, err, "--%s=%s", flag, bad)
			assert.Contains(t, err.Error(), "key["+key+"] (from flag --"+flag+")")
		}
	}
}
