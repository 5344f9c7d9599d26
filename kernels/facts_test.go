package kernels

import (
	"encoding/json"
	"testing"

	"github.com/gr00tgw/gr00tgw/kernels/arena"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFacts(t *testing.T) {
	s, err := schedule.Plan(schedule.N17())
	require.NoError(t, err)
	pl, err := arena.Build(s, arena.MixedDiT())
	require.NoError(t, err)
	f := Facts(pl, "abc")
	assert.Equal(t, "mixed_dit", f["policy"])
	assert.Equal(t, "bfloat8_b", f["mk_arena_dtype"])
	assert.Equal(t, 1395712, f["worker_l1_size"])
	a := f["arena"].(map[string]any)
	assert.Equal(t, int64(1159007232), a["arena_bytes"])
	assert.Equal(t, "abc", a["digest_sha256"])
	_, err = json.Marshal(f)
	require.NoError(t, err)
}
