package arena

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"testing"

	"github.com/gr00tgw/gr00tgw/core/safetensors"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
	"github.com/gr00tgw/gr00tgw/kernels/tile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func plan(t testing.TB, d schedule.Dims, p Policy) *Plan {
	s, err := schedule.Plan(d)
	require.NoError(t, err)
	pl, err := Build(s, p)
	require.NoError(t, err)
	return pl
}

// transposeTiles packs Wᵀ of an [n, k] weight independently of the planner.
func transposeTiles(w []float32, n, k int) []float32 {
	wt := make([]float32, n*k)
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			wt[j*n+i] = w[i*k+j]
		}
	}
	return wt
}

func flat(b []byte) func(int64, int) []byte {
	return func(off int64, n int) []byte { return b[off : off+int64(n)] }
}

func checkSegment(t *testing.T, pl *Plan, src WeightSource, read func(int64, int) []byte, mm *schedule.Matmul) {
	_, w, err := src.Tensor(Prefix + mm.Name + ".weight")
	require.NoError(t, err)
	f := pl.WeightSegment(mm).Format
	want := tile.PackMatrix(f, transposeTiles(w, mm.N, mm.K), mm.K, mm.N, pl.Policy.Tile)
	for kt := 0; kt < mm.Kt(); kt++ {
		for n := 0; n < mm.Nt(); n++ {
			off, size := pl.WeightTileOffset(mm, kt, n)
			require.Equal(t, f.Bytes(), size)
			require.Equal(t, int64(mm.GroupOf(n)), (off/int64(pl.PageSize))%schedule.Banks, "page bank")
			k := (kt*mm.Nt() + n) * size
			require.Truef(t, bytes.Equal(want[k:k+size], read(off, size)), "%s tile (%d,%d)", mm.Name, kt, n)
		}
	}
	_, b, err := src.Tensor(Prefix + mm.Name + ".bias")
	require.NoError(t, err)
	for n := 0; n < mm.Nt(); n++ {
		off, size := pl.BiasOffset(mm, n)
		require.Equal(t, int64(mm.GroupOf(n)), (off/int64(pl.PageSize))%schedule.Banks)
		raw := read(off, size)
		for j := 0; j < 32; j++ {
			var got, want float32
			if 32*n+j < mm.N {
				want = b[32*n+j]
			}
			if pl.Policy.Bias == tile.BF16 {
				got = tile.FromBF16(uint16(raw[2*j]) | uint16(raw[2*j+1])<<8)
				want = tile.FromBF16(tile.ToBF16(want))
			} else {
				got = math.Float32frombits(uint32(raw[4*j]) | uint32(raw[4*j+1])<<8 | uint32(raw[4*j+2])<<16 | uint32(raw[4*j+3])<<24)
			}
			require.Equal(t, want, got)
		}
	}
}

func TestTinyArena(t *testing.T) {
	for _, p := range []Policy{MixedDiT(), BF16(), FP32(), {Name: "bfp4", Weight: tile.Bfp4b, Bias: tile.BF16}} {
		t.Run(p.Name, func(t *testing.T) {
			pl := plan(t, schedule.N17Tiny(), p)
			src := Synthetic{Dims: schedule.N17Tiny(), Seed: 7}
			b, d, err := pl.PackBytes(context.Background(), src)
			require.NoError(t, err)
			require.EqualValues(t, pl.Size, len(b))
			assert.Equal(t, DigestOf(b), d)
			assert.Zero(t, pl.PageSize%DRAMAlign)
			assert.Equal(t, 0, pl.Pages%schedule.Banks)
			for _, mm := range pl.Sched.Matmuls() {
				checkSegment(t, pl, src, flat(b), mm)
			}
			// deterministic
			_, d2, err := pl.PackBytes(context.Background(), src)
			require.NoError(t, err)
			assert.Equal(t, d, d2)
			t.Logf("%s: %d B, page %d, %d pages, digest %s, imbalance %.3f", p.Name, pl.Size, pl.PageSize, pl.Pages, d, pl.Imbalance())
		})
	}
}

// Pinned digest of the tiny synthetic mixed_dit arena: any change to the
// layout, the packer or the synthetic source shows here. Regenerate by
// running this test with -v and copying the logged digest, after checking
// why it moved.
func TestTinyArenaDigest(t *testing.T) {
	pl := plan(t, schedule.N17Tiny(), MixedDiT())
	_, d, err := pl.PackBytes(context.Background(), Synthetic{Dims: schedule.N17Tiny(), Seed: 7})
	require.NoError(t, err)
	t.Logf("digest %s size %d", d, pl.Size)
	assert.Equal(t, tinyDigest, string(d))
}

const tinyDigest = "ee97a146e3d3fbda9f6a64d42cf7b8aed99db4bafe2514bfd68d765aca7a4bd1"

func TestRealArenaPlan(t *testing.T) {
	d := schedule.N17()
	pl := plan(t, d, MixedDiT())
	assert.Equal(t, 6528, pl.PageSize)
	assert.Less(t, pl.Imbalance(), 0.01)
	for _, u := range pl.BankUsed {
		assert.Equal(t, pl.BankUsed[0], u)
	}
	// Weight segments carry no padding with the real shapes (bfp8 tiles cost
	// 1088/1024 B per weight); only the per-block bias pages are padded.
	var params, biases, wbytes, bpages int64
	for _, mm := range pl.Sched.Matmuls() {
		params += int64(mm.N * mm.K)
		biases += int64(mm.N)
	}
	for _, sg := range pl.Segments {
		n := int64(sg.PagesPerBank) * schedule.Banks * int64(pl.PageSize)
		if sg.Kind == SegWeight {
			wbytes += n
		} else {
			require.Equal(t, 1, sg.PagesPerBank, sg.Name)
			bpages += n
		}
	}
	assert.Equal(t, params*1088/1024, wbytes)
	assert.Equal(t, pl.Size, wbytes+bpages)
	var used int64
	for _, u := range pl.BankUsed {
		used += u
	}
	assert.Equal(t, params*1088/1024+biases*2, used)
	t.Logf("real mixed_dit arena: %d B (%.3f GB, %.1f MiB) = prologue %d + step %d; %d weights, %d biases; per bank %d; page %d × %d",
		pl.Size, float64(pl.Size)/1e9, float64(pl.Size)/(1<<20), pl.PrologueBytes, pl.StepBytes, params, biases, pl.BankUsed[0], pl.PageSize, pl.Pages)
	bf := plan(t, d, BF16())
	t.Logf("real bf16 arena: %d B, page %d", bf.Size, bf.PageSize)
	noAda := plan(t, d, MixedDiT())
	var ada int64
	for _, sg := range noAda.Segments {
		if sg.Kind == SegWeight && (bytes.HasSuffix([]byte(sg.Name), []byte("norm1.linear")) || sg.Name == "proj_out_1") {
			ada += int64(sg.PagesPerBank) * schedule.Banks * int64(noAda.PageSize)
		}
	}
	t.Logf("AdaLN linears (norm1.linear ×32 + proj_out_1): %d B; arena without them %d B", ada, pl.Size-ada)
}

// On the real shapes, pack a subset (one self block's q and the output
// layer) and check it tile by tile.
func TestRealArenaSubset(t *testing.T) {
	if testing.Short() {
		t.Skip("packs ~10 M real-size weights")
	}
	d := schedule.N17()
	pl := plan(t, d, MixedDiT())
	src := Synthetic{Dims: d, Seed: 3}
	want := map[string]bool{"transformer_blocks.1.attn1.to_q": true, "proj_out_2": true}
	var mms []*schedule.Matmul
	// sparse buffer: only the segments we pack are materialised
	segs := map[*Segment][]byte{}
	for _, sg := range pl.Segments {
		for _, mm := range sg.MMs {
			if want[mm.Name] {
				b, err := pl.PackSegment(src, sg)
				require.NoError(t, err)
				segs[sg] = b
				if sg.Kind == SegWeight {
					mms = append(mms, mm)
				}
			}
		}
	}
	require.Len(t, mms, 2)
	read := func(off int64, n int) []byte {
		for sg, b := range segs {
			if o := pl.PageOffset(sg, 0, 0); off >= o && off+int64(n) <= o+int64(len(b)) {
				return b[off-o : off-o+int64(n)]
			}
		}
		t.Fatalf("offset %d outside the packed segments", off)
		return nil
	}
	for _, mm := range mms {
		checkSegment(t, pl, src, read, mm)
	}
}

type badSource struct{ Synthetic }

func (b badSource) Tensor(name string) ([]int, []float32, error) {
	if name == Prefix+"transformer_blocks.0.attn1.to_q.weight" {
		return []int{3, 3}, make([]float32, 9), nil
	}
	return b.Synthetic.Tensor(name)
}

func TestPackErrors(t *testing.T) {
	pl := plan(t, schedule.N17Tiny(), MixedDiT())
	_, _, err := pl.PackBytes(context.Background(), badSource{Synthetic{Dims: schedule.N17Tiny()}})
	var se *ShapeError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, []int{3, 3}, se.Got)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = pl.PackBytes(ctx, Synthetic{Dims: schedule.N17Tiny()})
	assert.ErrorIs(t, err, context.Canceled)

	_, err = PolicyByName("int4")
	assert.Error(t, err)
}

// The mixed_dit arena of the n17-tiny golden checkpoint (testdata/n17-tiny)
// has a pinned digest; `gr00tgw arena --weights
// testdata/n17-tiny` prints the same one.
func TestTinyCheckpointDigest(t *testing.T) {
	set, err := safetensors.Open("../../testdata/n17-tiny")
	require.NoError(t, err, "the committed tiny checkpoint")
	defer set.Close()
	pl := plan(t, schedule.N17Tiny(), MixedDiT())
	_, d, err := pl.PackBytes(context.Background(), FromSafetensors(set))
	require.NoError(t, err)
	assert.Equal(t, Digest("c22cb34db3f050c759a40558d75d17c8dc5d1e977b8367425759fb1865216062"), d)
	_, _, err = FromSafetensors(set).Tensor("nope")
	assert.ErrorIs(t, err, safetensors.ErrNotFound)
}

func BenchmarkPackTinyArena(b *testing.B) {
	pl := plan(b, schedule.N17Tiny(), MixedDiT())
	src := Synthetic{Dims: schedule.N17Tiny(), Seed: 1}
	b.ReportAllocs()
	b.SetBytes(pl.Size)
	for i := 0; i < b.N; i++ {
		if _, err := pl.Pack(context.Background(), src, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

func TestReadCache(t *testing.T) {
	pl := plan(t, schedule.N17Tiny(), MixedDiT())
	b, d, err := pl.PackBytes(context.Background(), Synthetic{Dims: schedule.N17Tiny(), Seed: 7})
	require.NoError(t, err)
	dir := t.TempDir()
	path := dir + "/a.arena"
	require.NoError(t, os.WriteFile(path, b, 0o644))
	got, gd, err := ReadCache(path, pl)
	require.NoError(t, err)
	assert.Equal(t, d, gd)
	assert.Equal(t, b, got)
	meta := `{"arena":{"digest_sha256":"` + string(d) + `","policy":"mixed_dit"}}`
	require.NoError(t, os.WriteFile(path+".json", []byte(meta), 0o644))
	_, _, err = ReadCache(path, pl)
	require.NoError(t, err)
	b[100] ^= 1
	require.NoError(t, os.WriteFile(path, b, 0o644))
	_, _, err = ReadCache(path, pl)
	assert.ErrorIs(t, err, ErrStaleCache)
	require.NoError(t, os.WriteFile(path, b[:10], 0o644))
	_, _, err = ReadCache(path, pl)
	assert.ErrorIs(t, err, ErrStaleCache)
}
