package oip

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/service"
	"github.com/gr00tgw/gr00tgw/service/servicetest"
)

// TestParseSessionParams: session_id and the RTC options are request
// parameters under upstream's names; each bad one is refused naming
// parameters.<key>; the service's errors are restated the same way.
func TestParseSessionParams(t *testing.T) {
	parse := func(params map[string]any) (*Infer, error) {
		return Parse(body(t, map[string]any{"inputs": droidInputs(), "parameters": params}), -1, servicetest.DROID())
	}
	inf, err := parse(map[string]any{"session_id": "arm-1", "rtc_overlap_steps": "auto", "rtc_frozen_steps": 3,
		"action_horizon": 40, "rtc_ramp_rate": 6})
	require.NoError(t, err)
	r := inf.Request
	assert.Equal(t, "arm-1", r.Session)
	assert.Equal(t, "parameters.session_id", r.SessionField)
	require.NotNil(t, r.Options)
	assert.True(t, r.Options.OverlapAuto)
	assert.Equal(t, []int{40, 3}, []int{*r.Options.Horizon, *r.Options.Frozen})
	assert.Equal(t, 6.0, *r.Options.RampRate)

	inf, err = parse(nil)
	require.NoError(t, err)
	assert.Nil(t, inf.Request.Options, "no parameters, no RTC")
	assert.Equal(t, "", inf.Request.Session)

	for _, tc := range []struct {
		name   string
		params map[string]any
		status int
		field  string
	}{
		{"id too long", map[string]any{"session_id": strings.Repeat("a", 129)}, 400, "parameters.session_id"},
		{"id bad byte", map[string]any{"session_id": "a b"}, 400, "parameters.session_id"},
		{"id not a string", map[string]any{"session_id": 5}, 422, "parameters.session_id"},
		{"steps fraction", map[string]any{"rtc_overlap_steps": 2.5}, 422, "parameters.rtc_overlap_steps"},
		{"steps other string", map[string]any{"rtc_frozen_steps": "later"}, 422, "parameters.rtc_frozen_steps"},
		{"horizon auto", map[string]any{"action_horizon": "auto"}, 422, "parameters.action_horizon"},
		{"rate a string", map[string]any{"rtc_ramp_rate": "6"}, 422, "parameters.rtc_ramp_rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.params)
			var he *service.HandlerError
			require.True(t, errors.As(err, &he), "%v", err)
			assert.Equal(t, tc.status, he.Status)
			assert.Equal(t, tc.field, he.Field)
		})
	}
	for in, want := range map[string]string{"session": "parameters.session_id", "options.rtc_frozen_steps": "parameters.rtc_frozen_steps"} {
		var he *service.HandlerError
		require.True(t, errors.As(renameParams(service.Invalid(in, "%s: x", in)), &he))
		assert.Equal(t, want, he.Field)
	}
}
