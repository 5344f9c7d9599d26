package arena

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/gr00tgw/gr00tgw/kernels/schedule"
	"github.com/gr00tgw/gr00tgw/kernels/tile"
)

// ShapeError reports a checkpoint tensor whose shape differs from the plan.
type ShapeError struct {
	Name      string
	Got, Want []int
}

// Error implements error.
func (e *ShapeError) Error() string {
	return fmt.Sprintf("arena: tensor[%s]: shape %v, plan needs %v", e.Name, e.Got, e.Want)
}

// PackSegment returns the bytes of sg in buffer order (PagesPerBank rows of
// 8 pages, padding zero), reading its tensors from src.
func (pl *Plan) PackSegment(src WeightSource, sg *Segment) ([]byte, error) {
	out := make([]byte, sg.PagesPerBank*schedule.Banks*pl.PageSize)
	base := pl.PageOffset(sg, 0, 0)
	switch sg.Kind {
	case SegBias:
		for _, mm := range sg.MMs {
			b, err := load(src, Prefix+mm.Name+".bias", []int{mm.N})
			if err != nil {
				return nil, err
			}
			for n := 0; n < mm.Nt(); n++ {
				off, size := pl.BiasOffset(mm, n)
				dst := out[off-base : off-base+int64(size)]
				for j := 0; j < 32; j++ {
					v := float32(0)
					if n*32+j < mm.N {
						v = b[n*32+j]
					}
					putElem(dst, j, sg.Format, v)
				}
			}
		}
	case SegWeight:
		mm := sg.MMs[0]
		w, err := load(src, Prefix+mm.Name+".weight", []int{mm.N, mm.K})
		if err != nil {
			return nil, err
		}
		var wg sync.WaitGroup
		for g := 0; g < schedule.Banks; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				var t [tile.Elems]float32
				for kt := 0; kt < mm.Kt(); kt++ {
					for n := mm.Cols[g][0]; n < mm.Cols[g][1]; n++ {
						transposedTile(t[:], w, mm.N, mm.K, kt, n)
						off, size := pl.WeightTileOffset(mm, kt, n)
						tile.Pack(sg.Format, out[off-base:off-base+int64(size)], t[:], pl.Policy.Tile)
					}
				}
			}(g)
		}
		wg.Wait()
	}
	return out, nil
}

// transposedTile fills t (row-major 32×32) with tile (kt, n) of Wᵀ, where w
// is the nn.Linear weight [N, K]: t[i][j] = w[32n+j][32kt+i], zero past the
// edges.
func transposedTile(t, w []float32, N, K, kt, n int) {
	clear(t)
	for j := 0; j < 32 && n*32+j < N; j++ {
		row := w[(n*32+j)*K:]
		for i := 0; i < 32 && kt*32+i < K; i++ {
			t[i*32+j] = row[kt*32+i]
		}
	}
}

func putElem(dst []byte, j int, f tile.Format, v float32) {
	if f == tile.Float32 {
		u := math.Float32bits(v)
		dst[4*j], dst[4*j+1], dst[4*j+2], dst[4*j+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		return
	}
	b := tile.ToBF16(v)
	dst[2*j], dst[2*j+1] = byte(b), byte(b>>8)
}

func load(src WeightSource, name string, want []int) ([]float32, error) {
	shape, data, err := src.Tensor(name)
	if err != nil {
		return nil, fmt.Errorf("arena: tensor[%s]: %w", name, err)
	}
	if !slices.Equal(shape, want) {
		return nil, &ShapeError{Name: name, Got: shape, Want: want}
	}
	n := 1
	for _, d := range want {
		n *= d
	}
	if len(data) != n {
		return nil, fmt.Errorf("arena: tensor[%s]: %d values for shape %v", name, len(data), shape)
	}
	return data, nil
}

// Pack streams the whole arena, segment by segment in buffer order, to w and
// returns its digest. It holds one segment in memory at a time (the largest,
// an ff projection, is ~10 MB for N1.7) and checks ctx between segments.
func (pl *Plan) Pack(ctx context.Context, src WeightSource, w io.Writer) (Digest, error) {
	h := sha256.New()
	mw := io.MultiWriter(h, w)
	for _, sg := range pl.Segments {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		b, err := pl.PackSegment(src, sg)
		if err != nil {
			return "", err
		}
		if _, err := mw.Write(b); err != nil {
			return "", fmt.Errorf("arena: write segment %s: %w", sg.Name, err)
		}
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return hexSum(sum), nil
}

// PackBytes packs the whole arena into memory.
func (pl *Plan) PackBytes(ctx context.Context, src WeightSource) ([]byte, Digest, error) {
	buf := &fixedWriter{b: make([]byte, 0, pl.Size)}
	d, err := pl.Pack(ctx, src, buf)
	return buf.b, d, err
}

type fixedWriter struct{ b []byte }

func (f *fixedWriter) Write(p []byte) (int, error) { f.b = append(f.b, p...); return len(p), nil }

// DigestOf returns the SHA-256 of packed arena bytes.
func DigestOf(b []byte) Digest { return hexSum(sha256.Sum256(b)) }
