package image

import "testing"

// BenchmarkPatchifyKernels: pixel_values for the four 448×256 frames of a
// DROID request (11 MB) with each kernel, into a reused buffer ("hot": it
// stays in the last-level cache, as in a serving loop that only encodes)
// and after evicting it ("cold": as after a model call). Ordinary stores
// replaced streaming stores after this comparison: equal when cold, ~3×
// faster when hot. Where a level is missing (avx512 on an AVX2-only CPU)
// its row measures the next one down.
func BenchmarkPatchifyKernels(b *testing.B) {
	cfg := DefaultDROIDChain()
	img := &RGB{W: 448, H: 256, Pix: pattern(3, 448, 256, 3, "noise")}
	lut := NewNormLUT(&cfg)
	rows := cfg.PatchifyRows(img.W, img.H) * cfg.RowWidth()
	dst := make([]float32, 4*rows)
	junk := make([]byte, 128<<20)
	defer func() {
		forceScalar, forceNoAVX512Patchify, forceNoAVX2Patchify, forceNoFMANorm = false, false, false, false
	}()
	for _, k := range []struct {
		name                         string
		scalar, noAVX512, noAVX2, ne bool
	}{
		{"avx512", false, false, false, false}, {"avx2", false, true, false, false},
		{"avx2-div", false, true, false, true}, {"sse", false, true, true, false}, {"go", true, false, false, false},
	} {
		for _, cold := range []bool{false, true} {
			name := k.name + "/hot"
			if cold {
				name = k.name + "/cold"
			}
			b.Run(name, func(b *testing.B) {
				forceScalar, forceNoAVX512Patchify, forceNoAVX2Patchify, forceNoFMANorm = k.scalar, k.noAVX512, k.noAVX2, k.ne
				b.ReportAllocs()
				b.SetBytes(int64(len(dst)) * 4)
				for i := 0; i < b.N; i++ {
					if cold {
						b.StopTimer()
						for j := 0; j < len(junk); j += 64 {
							junk[j]++
						}
						b.StartTimer()
					}
					for f := range 4 {
						if _, err := cfg.Patchify(dst[f*rows:(f+1)*rows], img, lut); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
