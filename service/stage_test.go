package service

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/device"
)

func TestStageBlock(t *testing.T) {
	plain := stageBlock(device.Facts{Backend: "cpu", Policy: "fp32", Stages: []string{"vision", "llm"}})
	require.Equal(t, "gr00tgw-cpu", plain["served"])
	require.Equal(t, "fp32", plain["policy"])
	require.Equal(t, []string{"vision", "llm"}, plain["stages"])

	// A backend's own stage block (the mixed_dit arena facts) is merged in
	// and wins over the generic "served".
	mk := stageBlock(device.Facts{Backend: "cpu", Policy: "mixed_dit", Extra: map[string]any{
		"stage": map[string]any{"served": "stage2-megakernel", "mk_arena_dtype": "bfp8_b"},
	}})
	require.Equal(t, "stage2-megakernel", mk["served"])
	require.Equal(t, "bfp8_b", mk["mk_arena_dtype"])
	require.Equal(t, "mixed_dit", mk["policy"])
}
