package image

import (
	"testing"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

// kernelLevel is one selectable set of resize kernels (see kernelLevels).
type kernelLevel struct {
	name string
	set  func() (restore func())
}

// BenchmarkResizeKernels runs each DROID resize step at every kernel level
// in one binary: scalar Go, the previous SSE2/SSSE3 kernels ("sse-old"),
// and the AVX2 and AVX-512 group kernels.
func BenchmarkResizeKernels(b *testing.B) {
	up := pattern(1, 320, 180, 3, "soft")
	r1 := pattern(2, 455, 256, 3, "soft")
	dst := make([]uint8, 455*256*3)
	for _, l := range kernelLevels() {
		b.Run("areaUp320x180/"+l.name, func(b *testing.B) {
			defer l.set()()
			var r AreaResizer
			b.ReportAllocs()
			defer benchcpu.Report(b, benchcpu.Now())
			for b.Loop() {
				_ = r.ResizeArea(dst, 455, 256, up, 320, 180, 3)
			}
		})
		b.Run("areaCropView432x243/"+l.name, func(b *testing.B) {
			defer l.set()()
			var r AreaResizer
			view := r1[(6*455+11)*3:]
			b.ReportAllocs()
			defer benchcpu.Report(b, benchcpu.Now())
			for b.Loop() {
				_ = r.resizeArea(dst, 455, 256, view, 455*3, 432, 243, 3)
			}
		})
		b.Run("bicubic455to448/"+l.name, func(b *testing.B) {
			defer l.set()()
			var r BicubicResizer
			b.ReportAllocs()
			defer benchcpu.Report(b, benchcpu.Now())
			for b.Loop() {
				_ = r.ResizeBicubic(BicubicTorch, dst, 448, 256, r1, 455, 256, 3)
			}
		})
	}
}

// evalQwenOld is the chain as it was before the group kernels: one
// AreaResizer for both resizes (tables rebuilt every call), the crop
// copied out, the SSE2/SSSE3 kernels (callers select them).
type evalQwenOld struct {
	area           AreaResizer
	bic            BicubicResizer
	r1, crop, eval RGB
	resized        RGB
}

func (o *evalQwenOld) run(src *RGB) *RGB {
	o.r1.setSize(455, 256)
	_ = o.area.ResizeArea(o.r1.Pix, 455, 256, src.Pix, src.W, src.H, 3)
	o.crop.setSize(432, 243)
	for y := 0; y < 243; y++ {
		copy(o.crop.Pix[y*432*3:(y+1)*432*3], o.r1.Pix[((6+y)*455+11)*3:])
	}
	o.eval.setSize(455, 256)
	_ = o.area.ResizeArea(o.eval.Pix, 455, 256, o.crop.Pix, 432, 243, 3)
	o.resized.setSize(448, 256)
	_ = o.bic.ResizeBicubic(BicubicTorch, o.resized.Pix, 448, 256, o.eval.Pix, 455, 256, 3)
	return &o.resized
}

// BenchmarkEvalQwenOldVsNew: Eval + QwenResize of one case-A 320×180
// frame, the previous chain (evalQwenOld with the SSE kernels) against
// the Workspace at every kernel level.
func BenchmarkEvalQwenOldVsNew(b *testing.B) {
	frames := caseAFrames(b)
	b.Run("old", func(b *testing.B) {
		for _, l := range kernelLevels() {
			if l.name == "sse-old" {
				defer l.set()()
			}
		}
		var o evalQwenOld
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		for b.Loop() {
			o.run(frames[0])
		}
	})
	for _, l := range kernelLevels() {
		b.Run("new/"+l.name, func(b *testing.B) {
			defer l.set()()
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
		})
	}
}

// TestEvalQwenOldMatchesNew keeps the benchmark's old chain honest.
func TestEvalQwenOldMatchesNew(t *testing.T) {
	frames := caseAFrames(t)
	ws, err := NewWorkspace(DefaultDROIDChain())
	if err != nil {
		t.Fatal(err)
	}
	var o evalQwenOld
	for _, f := range frames {
		ev, err := ws.Eval(f)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := ws.QwenResize(ev)
		if err != nil {
			t.Fatal(err)
		}
		old := o.run(f)
		if string(old.Pix) != string(rs.Pix) {
			t.Fatal("old and new chains differ")
		}
	}
}
