package protocoltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/client/oipclient"
	"github.com/gr00tgw/gr00tgw/client/openpiclient"
	"github.com/gr00tgw/gr00tgw/client/zmqclient"
	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/wire"
)

// TestSafetyGateEveryProtocol serves the real plugins on the tiny random
// checkpoint with the gate on — DROID under reject, then every embodiment
// under clamp — and sends the DROID demo over HTTP, OIP, ZeroMQ and openpi. The random
// weights' DROID chunk jerks past the shipped DROID limits (safety's
// TestGateOnCaseA): every protocol refuses it with its own error shape and
// code unsafe_action naming the value. LIBERO's chunk is clipped into its
// limits under clamp, and every protocol carries the same actions and
// report.
func TestSafetyGateEveryProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: serves the tiny checkpoint")
	}
	e, err := start(func(c *config.Config) {
		c.Safety.Policy = "clamp"
		c.Safety.Policies = []string{droidTag + "=reject"}
	})
	require.NoError(t, err)
	t.Cleanup(e.shutdown)
	ctx := context.Background()

	// HTTP: 422 unsafe_action naming the value.
	st, a := postTo(t, e, e.droid, 7)
	require.Equal(t, 422, st, "%v", a)
	assert.Equal(t, service.CodeUnsafeAction, a["code"])
	field, _ := a["field"].(string)
	require.True(t, strings.HasPrefix(field, "actions."), field)
	msg, _ := a["error"].(string)
	assert.Contains(t, msg, "safety: unsafe action: "+field)
	t.Logf("DROID over HTTP: %s", msg)

	// OIP: the same status and body.
	o := raw(t, e.droid)
	body, hl, err := oipclient.Request(o, oipclient.Options{Seed: u64(7)})
	require.NoError(t, err)
	ost, out, _ := e.oipPost(t, droidTag, body, hl)
	assert.Equal(t, 422, ost, string(out))
	assert.Contains(t, string(out), `"code":"unsafe_action"`)
	assert.Contains(t, string(out), field)

	// ZeroMQ: the error reply, code and field.
	zc, err := zmqclient.Dial(ctx, e.zmqAddr, zmqclient.Options{Token: zmqToken, Timeout: time.Minute})
	require.NoError(t, err)
	defer zc.Close()
	zobs, err := zmqclient.FromRaw(o, "")
	require.NoError(t, err)
	_, err = zc.GetAction(ctx, zobs, zmqclient.Nested, map[string]any{"seed": int64(7)})
	var zse *zmqclient.ServerError
	require.ErrorAs(t, err, &zse)
	assert.Equal(t, service.CodeUnsafeAction, zse.Code)
	assert.Equal(t, field, zse.Field)
	assert.Contains(t, zse.Message, "unsafe action")

	// openpi: the error text frame.
	pc, err := openpiclient.Dial(ctx, e.openpiAddr, openpiclient.Options{APIKey: openpiKey})
	require.NoError(t, err)
	defer pc.Close()
	pobs, err := openpiclient.FromRaw(o, true)
	require.NoError(t, err)
	pobs.Set("seed", int64(7))
	_, err = pc.Infer(ctx, pobs)
	var pse *openpiclient.ServerError
	require.ErrorAs(t, err, &pse)
	assert.Contains(t, pse.Text, "unsafe action")
	assert.Contains(t, pse.Text, field)

	// Under clamp the same chunk is clipped into the limits: every
	// protocol answers the same clamped actions with the same report.
	c, err := start(func(c *config.Config) { c.Safety.Policy = "clamp" })
	require.NoError(t, err)
	t.Cleanup(c.shutdown)
	st, a = postTo(t, c, c.droid, 7)
	require.Equal(t, 200, st, "%v", a)
	rep, ok := a["safety"].(map[string]any)
	require.True(t, ok, "HTTP answer carries safety: %v", a)
	assert.Equal(t, "clamp", rep["policy"])
	clamped, _ := rep["clamped"].(json.Number).Int64()
	assert.Positive(t, clamped)
	first := rep["first"].(map[string]any)
	assert.Equal(t, field, fmt.Sprintf("actions.%s[%s][%s]", first["group"], first["step"], first["dim"]),
		"clamp reports the violation reject refused")
	t.Logf("DROID over HTTP under clamp: safety %v", rep)
	want := c.httpActions(t, c.droid, u64(7))

	r := c.oipInfer(t, droidTag, body, hl)
	for g, w := range want {
		sameBits(t, w, r.Actions[g], "oip "+g)
	}
	assert.Equal(t, "clamp", r.Parameters["safety_policy"])
	assert.Equal(t, fmt.Sprint(clamped), fmt.Sprint(r.Parameters["safety_clamped"]))
	assert.Contains(t, r.Parameters["safety_first"], field)

	zc2, err := zmqclient.Dial(ctx, c.zmqAddr, zmqclient.Options{Token: zmqToken, Timeout: time.Minute})
	require.NoError(t, err)
	defer zc2.Close()
	v, err := zc2.Call(ctx, "get_action", wire.NewMap(2).Set("observation", zobs.Value(zmqclient.Nested)).
		Set("options", wire.NewMap(1).Set("seed", int64(7))))
	require.NoError(t, err)
	pair := v.([]any)
	acts, info := pair[0].(*wire.Map), pair[1].(*wire.Map)
	for g, w := range want {
		arr, _ := acts.Get(g)
		f, err := arr.(*wire.Array).Float32s()
		require.NoError(t, err)
		sameBits(t, w, f, "zmq "+g)
	}
	zs, ok := info.Get("safety")
	require.True(t, ok, "zmq info carries safety")
	zp, _ := zs.(*wire.Map).Get("policy")
	zn, _ := zs.(*wire.Map).Get("clamped")
	assert.Equal(t, "clamp", zp)
	assert.EqualValues(t, clamped, zn)

	pc2, err := openpiclient.Dial(ctx, c.openpiAddr, openpiclient.Options{APIKey: openpiKey})
	require.NoError(t, err)
	defer pc2.Close()
	m, err := pc2.Infer(ctx, pobs)
	require.NoError(t, err)
	pr, err := openpiclient.ParseResult(m)
	require.NoError(t, err)
	for g, w := range want {
		f, _ := pr.Groups[g].Float32s()
		sameBits(t, w, f, "openpi "+g)
	}
	ps, ok := m.Get("safety")
	require.True(t, ok, "openpi reply carries safety")
	pn, _ := ps.(*wire.Map).Get("clamped")
	assert.EqualValues(t, clamped, pn)

	// Metrics by embodiment, group and kind.
	req, _ := http.NewRequest("GET", "/metrics", nil)
	resp, err := e.srv.App().Test(req, -1)
	require.NoError(t, err)
	mb, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(mb), `gateway_safety_checks_total{embodiment="`+droidTag+`",`)
	assert.Contains(t, string(mb), `outcome="rejected"`)
	assert.Contains(t, string(mb), `gateway_safety_violations_total{embodiment="`+droidTag+`",group=`)
}

// postTo posts body with seed to e's /predict and decodes the answer
// (numbers as json.Number).
func postTo(t *testing.T, e *env, body []byte, seed uint64) (int, map[string]any) {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	m["seed"] = seed
	b, _ := json.Marshal(m)
	req, _ := http.NewRequest("POST", "/predict", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.App().Test(req, -1)
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var a map[string]any
	require.NoError(t, dec.Decode(&a), string(out))
	return resp.StatusCode, a
}
