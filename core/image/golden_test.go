package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// goldens.json is produced by testdata/image/gen_goldens.py with Debian's
// OpenCV 4.6 and Pillow 9.4; see testdata/image/README.md.
const goldenPath = "../../testdata/image/goldens.json"

type goldenCase struct {
	SW, SH, DW, DH, CN int
	W, H, EW, EH       int
	Letterbox          bool
	Fixed              bool
	Kind               string
	Seed               uint32
	SHA256             string
	Head               []int
}

type goldenFile struct {
	OpenCV      string       `json:"opencv"`
	PIL         string       `json:"pil"`
	PatternHead []int        `json:"pattern_head"`
	Area        []goldenCase `json:"area"`
	BicubicPIL  []goldenCase `json:"bicubic_pil"`
	Chain       []goldenCase `json:"chain"`
}

func loadGoldens(t testing.TB) *goldenFile {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	var g goldenFile
	require.NoError(t, json.Unmarshal(b, &g))
	return &g
}

// pattern is gen_goldens.py's pattern(): a counter hash (uint32 arithmetic)
// giving a deterministic h×w×cn image; "soft" adds a ramp.
func pattern(seed uint32, w, h, cn int, kind string) []uint8 {
	out := make([]uint8, w*h*cn)
	for i := range out {
		x := uint32(i)*0x9E3779B1 + seed*0x85EBCA77
		x ^= x >> 15
		x *= 0x2C1B3C6D
		x ^= x >> 12
		x *= 0x297A2D39
		x ^= x >> 15
		b := int(x >> 24)
		if kind == "soft" {
			c := i % cn
			px := i / cn
			xx, yy := px%w, px/w
			b = (3*xx + 5*yy + 80*c + (b >> 4)) % 256
		}
		out[i] = uint8(b)
	}
	return out
}

func digest(b []uint8) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func head(b []uint8) []int {
	var h []int
	for i := 0; i < 8 && i < len(b); i++ {
		h = append(h, int(b[i]))
	}
	return h
}

func TestPatternMatchesPython(t *testing.T) {
	g := loadGoldens(t)
	require.Equal(t, g.PatternHead, head(pattern(1, 64, 48, 1, "noise")))
}

// TestAreaGoldens: ResizeArea vs cv2.resize(INTER_AREA), bit-exact, on every
// code path, 1 and 3 channels, noise and smooth inputs.
func TestAreaGoldens(t *testing.T) {
	g := loadGoldens(t)
	require.GreaterOrEqual(t, len(g.Area), 160)
	paths := map[AreaPath]int{}
	var r AreaResizer
	for _, c := range g.Area {
		name := fmt.Sprintf("%dx%d_to_%dx%d_c%d_%s", c.SW, c.SH, c.DW, c.DH, c.CN, c.Kind)
		src := pattern(c.Seed, c.SW, c.SH, c.CN, c.Kind)
		dst := make([]uint8, c.DW*c.DH*c.CN)
		require.NoError(t, r.ResizeArea(dst, c.DW, c.DH, src, c.SW, c.SH, c.CN), name)
		paths[ResizeAreaPath(c.SW, c.SH, c.DW, c.DH)]++
		if digest(dst) != c.SHA256 {
			t.Errorf("%s (%v path): sha256 mismatch; head got %v want %v", name, ResizeAreaPath(c.SW, c.SH, c.DW, c.DH), head(dst), c.Head)
		}
	}
	// Every code path is exercised.
	for _, p := range []AreaPath{AreaFast, AreaGeneric, AreaLinear} {
		require.Greater(t, paths[p], 8, "path %v", p)
	}
	t.Logf("cases per path: %v", paths)
}

// TestBicubicPillowGoldens: the Pillow variant is bit-exact vs PIL
// Image.resize(BICUBIC); the torch variant stays within ±1 of it on smooth
// inputs (noise inputs are reported, see rationale).
func TestBicubicPillowGoldens(t *testing.T) {
	g := loadGoldens(t)
	var r BicubicResizer
	for _, c := range g.BicubicPIL {
		name := fmt.Sprintf("%dx%d_to_%dx%d_c%d_%s", c.SW, c.SH, c.DW, c.DH, c.CN, c.Kind)
		src := pattern(c.Seed, c.SW, c.SH, c.CN, c.Kind)
		pil := make([]uint8, c.DW*c.DH*c.CN)
		require.NoError(t, r.ResizeBicubic(BicubicPillow, pil, c.DW, c.DH, src, c.SW, c.SH, c.CN))
		if digest(pil) != c.SHA256 {
			t.Errorf("%s: pillow variant sha256 mismatch; head got %v want %v", name, head(pil), c.Head)
			continue
		}
		tor := make([]uint8, len(pil))
		require.NoError(t, r.ResizeBicubic(BicubicTorch, tor, c.DW, c.DH, src, c.SW, c.SH, c.CN))
		n1, maxd := 0, 0
		for i := range pil {
			d := int(pil[i]) - int(tor[i])
			d = max(d, -d)
			if d > 0 {
				n1++
			}
			maxd = max(maxd, d)
		}
		frac := float64(n1) / float64(len(pil))
		t.Logf("%s: torch vs PIL differ on %d/%d (%.4f%%), max %d", name, n1, len(pil), 100*frac, maxd)
		if c.Kind == "soft" {
			require.LessOrEqual(t, maxd, 1, name)
		}
	}
}

// TestChainGoldens: Workspace.Eval vs the cv2 eval chain on 320×180,
// 1280×720, 1920×1080 and other inputs (with and without letterbox, and the
// fixed Resize(256,256) recipe).
func TestChainGoldens(t *testing.T) {
	g := loadGoldens(t)
	for _, c := range g.Chain {
		name := fmt.Sprintf("%dx%d_lb%v_fixed%v_%s", c.W, c.H, c.Letterbox, c.Fixed, c.Kind)
		cfg := DefaultDROIDChain()
		cfg.LetterBox = c.Letterbox
		if c.Fixed {
			cfg.ShortestEdge, cfg.CropFraction = 0, 230.0/256
		}
		ws, err := NewWorkspace(cfg)
		require.NoError(t, err)
		src := &RGB{W: c.W, H: c.H, Pix: pattern(c.Seed, c.W, c.H, 3, c.Kind)}
		ev, err := ws.Eval(src)
		require.NoError(t, err, name)
		require.Equal(t, [2]int{c.EW, c.EH}, [2]int{ev.W, ev.H}, name)
		if digest(ev.Pix) != c.SHA256 {
			t.Errorf("%s: sha256 mismatch; head got %v want %v", name, head(ev.Pix), c.Head)
		}
		sz, err := cfg.Sizes(c.W, c.H)
		require.NoError(t, err)
		require.Equal(t, Size{c.EW, c.EH}, sz.Eval, name)
	}
}

// TestPyRef re-runs gen_goldens.py against the live Python stack and
// requires byte-identical output. Opt-in: VERIFY_PYREF=1.
func TestPyRef(t *testing.T) {
	if os.Getenv("VERIFY_PYREF") != "1" {
		t.Skip("set VERIFY_PYREF=1 to re-verify against /usr/bin/python3 (cv2 4.6, PIL)")
	}
	cmd := exec.Command("/usr/bin/python3", "../../testdata/image/gen_goldens.py")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	want, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	require.Equal(t, string(want), string(out), "regenerated goldens differ from the committed file")
}

// TestAreaSIMDMatchesScalar: the SIMD vertical kernel (amd64) and the
// scalar formula give identical bytes on random enlarge/mixed sizes, and
// the scalar path alone also reproduces every cv2 golden.
func TestAreaSIMDMatchesScalar(t *testing.T) {
	defer func() { forceScalar = false }()
	var r AreaResizer
	for i := 0; i < 200; i++ {
		x := uint32(i)*2654435761 + 12345
		sw, sh := int(x%97)+1, int((x>>8)%61)+1
		dw, dh := int((x>>16)%150)+1, int((x>>24)%90)+1
		cn := []int{1, 3, 4}[i%3]
		src := pattern(x, sw, sh, cn, "noise")
		a := make([]uint8, dw*dh*cn)
		b := make([]uint8, dw*dh*cn)
		forceScalar = false
		require.NoError(t, r.ResizeArea(a, dw, dh, src, sw, sh, cn))
		forceScalar = true
		require.NoError(t, r.ResizeArea(b, dw, dh, src, sw, sh, cn))
		require.Equal(t, b, a, "%dx%d -> %dx%d c%d", sw, sh, dw, dh, cn)
	}
	forceScalar = true
	g := loadGoldens(t)
	for _, c := range g.Area {
		src := pattern(c.Seed, c.SW, c.SH, c.CN, c.Kind)
		dst := make([]uint8, c.DW*c.DH*c.CN)
		require.NoError(t, r.ResizeArea(dst, c.DW, c.DH, src, c.SW, c.SH, c.CN))
		require.Equal(t, c.SHA256, digest(dst), "scalar %dx%d -> %dx%d c%d", c.SW, c.SH, c.DW, c.DH, c.CN)
	}
}

// TestBicubicSIMDMatchesScalar: the SIMD horizontal bicubic kernel (amd64)
// equals the scalar loops on random sizes (down- and upscales, tiny sizes
// where padding or the buffer-end guard falls back to scalar).
func TestBicubicSIMDMatchesScalar(t *testing.T) {
	defer func() { forceScalar = false }()
	var r BicubicResizer
	for i := 0; i < 300; i++ {
		x := uint32(i)*2246822519 + 777
		sw, sh := int(x%300)+1, int((x>>9)%40)+1
		dw, dh := int((x>>17)%200)+1, sh
		if i%4 == 0 {
			dh = int((x>>25)%40) + 1
		}
		src := pattern(x, sw, sh, 3, "noise")
		a := make([]uint8, dw*dh*3)
		b := make([]uint8, dw*dh*3)
		forceScalar = false
		require.NoError(t, r.ResizeBicubic(BicubicTorch, a, dw, dh, src, sw, sh, 3))
		forceScalar = true
		require.NoError(t, r.ResizeBicubic(BicubicTorch, b, dw, dh, src, sw, sh, 3))
		require.Equal(t, b, a, "%dx%d -> %dx%d", sw, sh, dw, dh)
	}
}

// TestBicubicSIMD3PairsMatchesScalar covers the SSSE3 kernel for exactly 3
// tap pairs (the 455→448 smart_resize step) on sizes that select it, with
// noise and smooth content, against the scalar reference.
func TestBicubicSIMD3PairsMatchesScalar(t *testing.T) {
	defer func() { forceScalar = false }()
	var r BicubicResizer
	hit := 0
	for i, sz := range [][2]int{{455, 448}, {460, 448}, {300, 290}, {129, 126}, {64, 61}, {40, 37}, {455, 400}, {512, 455}} {
		sw, dw, sh := sz[0], sz[1], 7+i
		for _, kind := range []string{"noise", "soft"} {
			src := pattern(uint32(sw*31+i), sw, sh, 3, kind)
			a := make([]uint8, dw*sh*3)
			b := make([]uint8, dw*sh*3)
			forceScalar = false
			require.NoError(t, r.ResizeBicubic(BicubicTorch, a, dw, sh, src, sw, sh, 3))
			if r.h.npairs == 3 {
				hit++
			}
			forceScalar = true
			require.NoError(t, r.ResizeBicubic(BicubicTorch, b, dw, sh, src, sw, sh, 3))
			require.Equal(t, b, a, "%s %dx%d -> %dx%d", kind, sw, sh, dw, sh)
		}
	}
	require.NotZero(t, hit, "no size selected the 3-pair kernel")
	t.Logf("3-pair cases: %d", hit)
}
