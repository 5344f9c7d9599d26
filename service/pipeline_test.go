package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device"
)

// TestCheckResult covers the backend/embodiment horizon contract.
func TestCheckResult(t *testing.T) {
	res := func(h, d, n int) *device.Result {
		return &device.Result{ActionPred: make([]float32, n), Horizon: h, ActionDim: d}
	}
	for _, tc := range []struct {
		name    string
		res     *device.Result
		emb     int
		wantErr string
	}{
		{"droid", res(40, 132, 40*132), 40, ""},
		{"libero", res(40, 132, 40*132), 16, ""},
		{"nil", nil, 40, "no result"},
		{"sliced by backend", res(16, 132, 16*132), 16, "want [40, 132]"},
		{"wrong dim", res(40, 64, 40*64), 40, "want [40, 132]"},
		{"short buffer", res(40, 132, 10), 40, "want [40, 132]"},
		{"embodiment longer than model", res(40, 132, 40*132), 41, "outside the model's 40"},
		{"no embodiment horizon", res(40, 132, 40*132), 0, "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkResult(tc.res, 40, 132, tc.emb)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}
