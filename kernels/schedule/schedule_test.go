package schedule

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultCoreMap(t *testing.T) {
	m := Default()
	require.NoError(t, m.Validate())
	count := map[Role]int{}
	for x := 0; x < GridX; x++ {
		for y := 0; y < GridY; y++ {
			count[m.RoleAt(Coord{x, y})]++
		}
	}
	assert.Equal(t, map[Role]int{Reader: 8, Hub: 4, Sync: 2, Compute: 96}, count)
	for c := 0; c < Cores; c++ {
		assert.Equal(t, c, m.ComputeIndex(m.Compute[c]))
		hs := m.HubsReaching(m.Compute[c])
		require.Len(t, hs, 1)
		assert.Equal(t, m.HubOf[c/Group], hs[0])
	}
	for _, r := range m.Readers {
		assert.Empty(t, m.HubsReaching(r), "a multicast must not land on a reader")
	}
	s := m.Summary()
	assert.Equal(t, 96, s["compute_cores"])
}

func TestCoreMapRejects(t *testing.T) {
	m := Default()
	m.Groups[0] = []Rect{{1, 2, 6, 3}, {1, 3, 1, 3}}
	assert.Error(t, m.Validate(), "overlap / double role")

	m = Default()
	m.Readers[0] = Coord{0, 0}
	assert.Error(t, m.Validate())

	m = Default()
	m.Readers[1], m.SyncAt[0] = m.SyncAt[0], m.Readers[1]
	assert.ErrorContains(t, m.Validate(), "hops")
}

func TestKinds(t *testing.T) {
	want := []BlockKind{CrossText, Self, CrossImage, Self, CrossText, Self, CrossImage, Self}
	for i, k := range want {
		assert.Equal(t, k, Kind(i), "block %d", i)
	}
}

func TestPlanInvariants(t *testing.T) {
	for _, d := range []Dims{N17(), N17Tiny()} {
		s, err := Plan(d)
		require.NoError(t, err)
		require.NoError(t, s.Check(nil))
		var worst L1Use
		for _, u := range s.L1(func(*Matmul) int { return 1088 }) {
			if u.Bytes > worst.Bytes {
				worst = u
			}
		}
		t.Logf("dims %+v: %d ops, %d prologue matmuls, worst L1 core %d %d B (%s) of %d",
			d, len(s.Ops), len(s.Prologue), worst.Core, worst.Bytes, worst.Op, WorkerL1)
	}
}

// With the real shapes every matmul keeps all 8 banks and all 96 cores busy
// in equal shares.
func TestRealShapesBalanced(t *testing.T) {
	s, err := Plan(N17())
	require.NoError(t, err)
	assert.Len(t, s.Prologue, 32) // 16 cross blocks × K, V
	for _, mm := range s.Matmuls() {
		per := mm.Nt() / Banks
		require.Zerof(t, mm.Nt()%Banks, "%s", mm.Name)
		for g := 0; g < Banks; g++ {
			require.Equal(t, per, mm.Cols[g][1]-mm.Cols[g][0])
		}
		n := len(mm.Tiles[0])
		for c := 0; c < Cores; c++ {
			require.InDeltaf(t, n, len(mm.Tiles[c]), 1, "%s core %d", mm.Name, c)
		}
	}
	// 32 heads × 3 ways fill the 96 cores for the image blocks.
	for _, op := range s.Ops {
		if op.Kind == OpAttention && op.Attn.Kind == CrossImage {
			for c := 0; c < Cores; c++ {
				require.Len(t, op.Attn.Parts[c], 1)
			}
			p := op.Attn.Parts[0][0]
			assert.Equal(t, AttnPart{Head: 0, Way: 0, Ways: 3, K0: 0, K1: 4}, p)
		}
	}
	// q: one tile per core; ff up-projection: 2 columns × 2 rows per core
	q, ff1 := s.Ops[2].MM, s.Ops[6].MM
	require.Equal(t, "transformer_blocks.0.attn1.to_q", q.Name)
	require.Equal(t, "transformer_blocks.0.ff.net.0.proj", ff1.Name)
	assert.Equal(t, []OutTile{{0, 0}}, q.Tiles[0])
	assert.Equal(t, []OutTile{{1, 0}}, q.Tiles[6])
	assert.Equal(t, []OutTile{{0, 0}, {0, 12}, {1, 0}, {1, 12}}, ff1.Tiles[0])
}

func TestCheckCatchesErrors(t *testing.T) {
	s, err := Plan(N17())
	require.NoError(t, err)
	mm := s.Ops[2].MM
	mm.Tiles[1] = append(mm.Tiles[1], mm.Tiles[0][0])
	assert.ErrorContains(t, s.Check(nil), "produced 2 times")

	s, _ = Plan(N17())
	mm = s.Ops[2].MM
	mm.Tiles[0], mm.Tiles[12] = mm.Tiles[12], mm.Tiles[0]
	assert.ErrorContains(t, s.Check(nil), "group")

	s, _ = Plan(N17())
	assert.ErrorContains(t, s.Check(func(*Matmul) int { return 64 * 1024 }), "L1")
}

func TestFromConfig(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/n17-tiny/config.json")
	require.NoError(t, err, "the committed tiny checkpoint")
	d, err := FromConfig(raw)
	require.NoError(t, err)
	assert.Equal(t, N17Tiny(), d)
}

func FuzzFromConfig(f *testing.F) {
	f.Add([]byte(`{"action_horizon":40,"backbone_embedding_dim":32,"input_embedding_dim":64,"diffusion_model_cfg":{"num_layers":8,"num_attention_heads":4,"attention_head_dim":16,"output_dim":48}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"diffusion_model_cfg":{"num_layers":-1}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := FromConfig(raw)
		if err != nil {
			return
		}
		require.NoError(t, d.Validate())
		if d.Blocks > 64 || d.Width > 4096 || d.CrossDim > 4096 || d.OutDim > 4096 || d.Rows > 256 {
			return // keep planning cheap
		}
		s, err := Plan(d)
		require.NoError(t, err)
		_ = s.Check(nil) // may fail the L1 budget for odd shapes, must not panic
	})
}
