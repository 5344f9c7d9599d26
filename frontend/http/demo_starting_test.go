package httpfront

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gr00tgw/gr00tgw/config"
	"github.com/gr00tgw/gr00tgw/device"
)

// gateProbe runs probe while the gateway's device gate is pending (after
// the default embodiment's warm-up, before the server is ready).
type gateProbe struct {
	*supervisedBackend
	probe func()
}

func (b *gateProbe) SetGate(ctx context.Context, gate device.GateFunc) error {
	b.probe()
	return b.supervisedBackend.SetGate(ctx, gate)
}

// TestDemoWaitsForDeviceGate: between the default embodiment's warm-up and
// the device gate (a supervised backend's runners), /demo answers 503
// starting like /predict, so that a client waiting for /demo does not
// then get 503 from /predict (real size: the gate is a whole warm-up).
func TestDemoWaitsForDeviceGate(t *testing.T) {
	var demo, predict int
	var f0 *fixture
	gp := &gateProbe{supervisedBackend: &supervisedBackend{fakeBackend: &fakeBackend{}, slotsN: 1,
		sv: device.Supervision{Serving: true, Runners: []device.RunnerStatus{{Index: 0, PID: 42, State: "ok"}}}}}
	gp.probe = func() {
		resp, _ := f0.do(t, http.MethodGet, "/demo", nil, nil)
		demo = resp.StatusCode
		resp, _ = f0.do(t, http.MethodPost, "/predict", mustJSON(t, demoRequest(t)), nil)
		predict = resp.StatusCode
	}
	f := newFixture(t, true, func(_ *config.Config, _ *fixtureOptions, f *fixture) { f.deps.Backend, f0 = gp, f })
	assert.Equal(t, http.StatusServiceUnavailable, predict, "/predict during the gate")
	assert.Equal(t, http.StatusServiceUnavailable, demo, "/demo during the gate")
	resp, b := f.do(t, http.MethodGet, "/demo", nil, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
}
