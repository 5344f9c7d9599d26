package image

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

func caseAPNGs(b *testing.B) [][]byte {
	names, _ := filepath.Glob(filepath.Join(caseADir, "frame_*.png"))
	sort.Strings(names)
	var out [][]byte
	for _, n := range names {
		d, err := os.ReadFile(n)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, d)
	}
	if len(out) != 4 {
		b.Fatalf("want 4 case-A PNGs, got %d", len(out))
	}
	return out
}

// BenchmarkDecodePNG320x180: one case-A PNG into a reused RGB.
func BenchmarkDecodePNG320x180(b *testing.B) {
	data := caseAPNGs(b)[0]
	var f RGB
	b.ReportAllocs()
	defer benchcpu.Report(b, benchcpu.Now())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := Decode(&f, data, DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvalChain320x180: SmallestMaxSize → crop → SmallestMaxSize →
// smart_resize bicubic on one 320×180 frame (no patchify).
func BenchmarkEvalChain320x180(b *testing.B) {
	frames := caseAFrames(b)
	ws, err := NewWorkspace(DefaultDROIDChain())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer benchcpu.Report(b, benchcpu.Now())
	for b.Loop() {
		ev, err := ws.Eval(frames[0])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ws.QwenResize(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPatchify: normalise + flatten one 448×256 frame (448 rows).
func BenchmarkPatchify(b *testing.B) {
	cfg := DefaultDROIDChain()
	img := &RGB{W: 448, H: 256, Pix: pattern(3, 448, 256, 3, "noise")}
	lut := NewNormLUT(&cfg)
	dst := make([]float32, cfg.PatchifyRows(448, 256)*cfg.RowWidth())
	b.ReportAllocs()
	defer benchcpu.Report(b, benchcpu.Now())
	b.SetBytes(int64(len(dst) * 4))
	for b.Loop() {
		if _, err := cfg.Patchify(dst, img, lut); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeRequest4Frames: the host image work of one DROID request —
// decode 4 PNGs and encode them into pixel_values [1792, 1536], one
// goroutine per frame (as the gateway would).
func BenchmarkEncodeRequest4Frames(b *testing.B) {
	pngs := caseAPNGs(b)
	p, err := NewPipeline(DefaultDROIDChain())
	if err != nil {
		b.Fatal(err)
	}
	frames := []*RGB{new(RGB), new(RGB), new(RGB), new(RGB)}
	dst := make([]float32, 4*448*1536)
	done := make(chan error, 4)
	b.ReportAllocs()
	defer benchcpu.Report(b, benchcpu.Now())
	for b.Loop() {
		for i := range frames {
			go func() {
				if err := Decode(frames[i], pngs[i], DefaultLimits); err != nil {
					done <- err
					return
				}
				_, err := p.Encode(frames[i], dst[i*448*1536:(i+1)*448*1536])
				done <- err
			}()
		}
		for range frames {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkResizeArea1080p: the 1920×1080 → 455×256 shrink (generic path).
func BenchmarkResizeArea1080p(b *testing.B) {
	src := pattern(1, 1920, 1080, 3, "soft")
	dst := make([]uint8, 455*256*3)
	var r AreaResizer
	b.ReportAllocs()
	defer benchcpu.Report(b, benchcpu.Now())
	for b.Loop() {
		_ = r.ResizeArea(dst, 455, 256, src, 1920, 1080, 3)
	}
}

// BenchmarkStageAreaUp320x180: the first eval-chain resize (area-mode
// linear, 320×180 → 455×256).
func BenchmarkStageAreaUp320x180(b *testing.B) {
	src := pattern(1, 320, 180, 3, "soft")
	dst := make([]uint8, 455*256*3)
	var r AreaResizer
	b.ReportAllocs()
	defer benchcpu.Report(b, benchcpu.Now())
	for b.Loop() {
		_ = r.ResizeArea(dst, 455, 256, src, 320, 180, 3)
	}
}

// BenchmarkStageBicubic455to448: the Qwen smart_resize step (width only).
func BenchmarkStageBicubic455to448(b *testing.B) {
	src := pattern(1, 455, 256, 3, "soft")
	dst := make([]uint8, 448*256*3)
	var r BicubicResizer
	b.ReportAllocs()
	defer benchcpu.Report(b, benchcpu.Now())
	for b.Loop() {
		_ = r.ResizeBicubic(BicubicTorch, dst, 448, 256, src, 455, 256, 3)
	}
}
