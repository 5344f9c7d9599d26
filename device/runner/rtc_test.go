//go:build linux

package runner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device"
	"github.com/gr00tgw/gr00tgw/device/runner"
)

// TestPoolRTC: a request with RTC reaches the Go runner (HELLO feature
// "rtc": the previous chunk in the segment, the options in PREDICT) and
// answers what the in-process backend answers, bit for bit; a runner that
// does not list the feature gets no such request (an input error names it).
func TestPoolRTC(t *testing.T) {
	in := caseAInputs(t)
	prev := make([]float32, 40*132)
	for i := range prev {
		prev[i] = float32(i%97)/97 - 0.5
	}
	in.RTC = &device.RTC{Prev: prev, PrevRows: 40, Horizon: 40, Overlap: 12, Frozen: 4, RampRate: 6}
	want := reference(t, in)
	for r := 0; r < 4; r++ {
		require.Equal(t, prev[(28+r)*132:(29+r)*132], want[r*132:(r+1)*132], "the reference froze row %d", r)
	}
	p, err := openPool(t, "serve", 1, runner.Options{})
	require.NoError(t, err)
	defer p.Close()
	res, err := p.Predict(context.Background(), in)
	require.NoError(t, err)
	bitsEqual(t, want, res.ActionPred)

	q, err := openPool(t, "fake-echonoise", 1, runner.Options{})
	require.NoError(t, err)
	defer q.Close()
	fi := fakeInputs()
	fi.RTC = &device.RTC{Prev: make([]float32, 5*8), PrevRows: 5, Horizon: 5, Overlap: 2, RampRate: 6}
	_, err = q.Predict(context.Background(), fi)
	require.ErrorIs(t, err, device.ErrInput)
	require.ErrorContains(t, err, `does not list the feature "rtc"`)
}
