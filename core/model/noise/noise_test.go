package noise

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/npy"
)

type golden struct {
	Torch string `json:"torch"`
	Cases []struct {
		Seed   uint64    `json:"seed"`
		N      int       `json:"n"`
		First  []float64 `json:"first"`
		Last   []float64 `json:"last"`
		SHA256 string    `json:"sha256"`
	} `json:"cases"`
}

func digest(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func checkGolden(t *testing.T, data []byte) {
	t.Helper()
	var g golden
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Cases)
	for _, c := range g.Cases {
		got := make([]float32, c.N)
		Randn(got, c.Seed)
		for i, w := range c.First {
			require.Equal(t, float32(w), got[i], "seed %d n %d first[%d]", c.Seed, c.N, i)
		}
		for i, w := range c.Last {
			require.Equal(t, float32(w), got[c.N-len(c.Last)+i], "seed %d n %d last[%d]", c.Seed, c.N, i)
		}
		require.Equal(t, c.SHA256, digest(got), "seed %d n %d sha256", c.Seed, c.N)
	}
}

// TestGolden compares with torch.randn values committed in testdata
// (regenerate: see testdata/gen_randn_golden.py).
func TestGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/randn_golden.json")
	require.NoError(t, err)
	checkGolden(t, data)
}

// TestCaseANoise: the n17-tiny case A noise is torch.randn([1,40,132])
// with manual_seed(1234).
func TestCaseANoise(t *testing.T) {
	a, err := npy.ReadFile("../../../testdata/n17-tiny/caseA/noise.npy")
	require.NoError(t, err)
	want, err := a.Float32s()
	require.NoError(t, err)
	got := make([]float32, len(want))
	Randn(got, 1234)
	require.Equal(t, want, got)
}

// TestTorch re-runs the generator against the installed torch for more
// seeds and sizes. Opt-in: VERIFY_TORCH=1 (needs /usr/bin/python3 + torch).
func TestTorch(t *testing.T) {
	if os.Getenv("VERIFY_TORCH") == "" {
		t.Skip("set VERIFY_TORCH=1 to compare with /usr/bin/python3 torch")
	}
	var seeds, sizes []string
	for s := uint64(0); s < 40; s++ {
		seeds = append(seeds, strconv.FormatUint(s*2654435761+s, 10))
	}
	for _, n := range []int{5280, 1, 4, 15, 16, 17, 47, 48, 63, 1000, 4097} {
		sizes = append(sizes, strconv.Itoa(n))
	}
	out, err := exec.Command("/usr/bin/python3", "testdata/gen_randn_golden.py",
		"--seeds", strings.Join(seeds, ","), "--sizes", strings.Join(sizes, ",")).Output()
	require.NoError(t, err)
	checkGolden(t, out)
	committed, err := exec.Command("/usr/bin/python3", "testdata/gen_randn_golden.py").Output()
	require.NoError(t, err)
	file, err := os.ReadFile("testdata/randn_golden.json")
	require.NoError(t, err)
	require.Equal(t, string(file), string(committed), "committed golden differs from a fresh run")
}

func TestFMA32(t *testing.T) {
	// a·b = 1 + 2⁻¹¹ + 2⁻²⁴ is exactly halfway between two float32 values;
	// ±2⁻⁶⁰ vanishes in a float64 sum but must decide the single rounding.
	a := float32(1 + 1.0/(1<<12))
	tiny := float32(math.Ldexp(1, -60))
	up := float32(1 + 1.0/(1<<11) + 1.0/(1<<23))
	down := float32(1 + 1.0/(1<<11))
	require.Equal(t, up, fma32(a, a, tiny))
	require.Equal(t, down, fma32(a, a, -tiny))
	require.Equal(t, down, fma32(a, a, 0)) // exact tie: to even
	require.Equal(t, float32(7), fma32(2, 3, 1))
}

func BenchmarkRandn5280(b *testing.B) {
	dst := make([]float32, 40*132)
	b.ReportAllocs()
	for b.Loop() {
		Randn(dst, 1234)
	}
}
