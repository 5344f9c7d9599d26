package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gr00tgw/gr00tgw/device/runner"
)

// The slots lie in Slot order, each 64-byte aligned and as long as its
// tensor, pixel_values at offset 0; SegmentSize rounds the end to a page.
func TestSlotOffsets(t *testing.T) {
	l := runner.Layout{MaxPatches: 5, PixelCols: 3, MaxSeq: 20, StateDim: 7, ActionHorizon: 4, ActionDim: 9}
	values := [runner.NumSlots]int{
		runner.SlotPixelValues: 15, runner.SlotInputIDs: 20, runner.SlotAttentionMask: 20, runner.SlotPositionIDs: 60,
		runner.SlotState: 7, runner.SlotNoise: 36, runner.SlotOutput: 36, runner.SlotRTCPrev: 36,
	}
	off := l.Offsets()
	want := 0
	for s := runner.SlotPixelValues; s < runner.NumSlots; s++ {
		assert.Equal(t, want, off[s], "%s", s)
		want += (4*values[s] + 63) &^ 63
	}
	assert.Equal(t, (want+4095)&^4095, l.SegmentSize())
}

func TestSlotNames(t *testing.T) {
	for _, tc := range []struct {
		s    runner.Slot
		want string
	}{
		{runner.SlotPixelValues, "pixel_values"}, {runner.SlotInputIDs, "input_ids"}, {runner.SlotAttentionMask, "attention_mask"},
		{runner.SlotPositionIDs, "position_ids"}, {runner.SlotState, "state"}, {runner.SlotNoise, "noise"},
		{runner.SlotOutput, "output"}, {runner.SlotRTCPrev, "rtc prev"}, {runner.NumSlots, "slot(8)"}, {-1, "slot(-1)"},
	} {
		assert.Equal(t, tc.want, tc.s.String())
	}
}
