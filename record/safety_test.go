package record

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gr00tgw/gr00tgw/safety"
)

func TestSafetyOf(t *testing.T) {
	viol := safety.Violation{Group: "joint_position", Step: 3, Dim: 6, Kind: safety.KindMaxStepDelta, Limit: 0.08, Value: 0.3}
	want := &Violation{Group: "joint_position", Step: 3, Dim: 6, Kind: "max_step_delta", Limit: 0.08, Value: 0.3}

	assert.Equal(t, &Safety{Policy: "off"}, SafetyOf(safety.Verdict{}, nil))
	assert.Equal(t, &Safety{Policy: "clamp", Clamped: 5, First: want},
		SafetyOf(safety.Verdict{Policy: safety.Clamp, Clamped: 5, First: &viol}, nil))
	assert.Equal(t, &Safety{Policy: "reject", Rejected: true, First: want},
		SafetyOf(safety.Verdict{Policy: safety.Reject}, &safety.Error{Violation: viol}))
	assert.Equal(t, &Safety{Policy: "reject"},
		SafetyOf(safety.Verdict{Policy: safety.Reject}, errors.New("safety: state group eef_9d missing")))
}
