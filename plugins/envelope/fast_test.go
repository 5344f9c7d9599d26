package envelope

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// checkFastMatchesChecked: decodeFast accepts only what decodeChecked
// accepts, with the same result.
func checkFastMatchesChecked(t *testing.T, buf []byte) bool {
	t.Helper()
	var fast, checked Envelope
	ok := fast.decodeFast(buf)
	err := checked.decodeChecked(buf)
	if !ok {
		return false
	}
	require.NoError(t, err, "decodeFast accepted what decodeChecked rejects")
	require.Equal(t, checked.Attrs, fast.Attrs)
	require.Equal(t, len(checked.Tensors), len(fast.Tensors))
	for i := range checked.Tensors {
		c, f := &checked.Tensors[i], &fast.Tensors[i]
		require.Equal(t, c.Name, f.Name)
		require.Equal(t, c.DType, f.DType)
		require.Equal(t, c.Flags, f.Flags)
		require.Equal(t, c.Dims, f.Dims)
		require.Equal(t, c.Data, f.Data)
		if len(c.Data) > 0 {
			require.Same(t, &c.Data[0], &f.Data[0], "data aliases the buffer")
		}
	}
	return true
}

// TestDecodeFastMatchesChecked mutates valid envelopes (single bytes and
// single header/table fields) and compares the two decoders.
func TestDecodeFastMatchesChecked(t *testing.T) {
	base := sample(t)
	require.True(t, checkFastMatchesChecked(t, base), "a valid envelope takes the fast path")
	rng := rand.New(rand.NewPCG(7, 8))
	accepted := 0
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		buf := append([]byte(nil), base...)
		switch rng.IntN(3) {
		case 0:
			buf[rng.IntN(len(buf))] = byte(rng.Uint32())
		case 1: // a small change to one 8-byte aligned word
			i := rng.IntN(len(buf)/8) * 8
			v := binary.LittleEndian.Uint64(buf[i:])
			binary.LittleEndian.PutUint64(buf[i:], v+uint64(rng.IntN(17))-8)
		default:
			buf = buf[:rng.IntN(len(buf)+1)]
		}
		if checkFastMatchesChecked(t, buf) {
			accepted++
		}
	}
	t.Logf("%d of %d mutations accepted (same result on both paths)", accepted, n)
}

// FuzzDecodeFast: the fast path never accepts more than the checked one.
func FuzzDecodeFast(f *testing.F) {
	f.Add(sample(f))
	var b Builder
	empty, _ := b.Bytes()
	f.Add(empty)
	f.Fuzz(func(t *testing.T, buf []byte) { checkFastMatchesChecked(t, buf) })
}

// TestDecodeReuse: an Envelope decoding one buffer again and again (as a
// guest decodes the host's input buffer) gives exactly what a fresh
// Envelope gives, whether the attributes, the data, the table or nothing
// changed in between, and reports Reused only when the table was kept.
func TestDecodeReuse(t *testing.T) {
	build := func(instr string, vals []float32, name string) []byte {
		var b Builder
		b.Attr("request_id", "r").Attr("instruction", instr)
		b.Float32(name, []int64{int64(len(vals))}, vals)
		b.Descriptor("video.cam", Uint8, []int64{2, 4, 4, 3})
		out, err := b.Bytes()
		require.NoError(t, err)
		return out
	}
	msgs := []struct {
		buf    []byte
		reused bool
	}{
		{build("pick", []float32{1, 2, 3}, "state"), false},
		{build("pick", []float32{4, 5, 6}, "state"), true},   // data changed
		{build("drop", []float32{4, 5, 6}, "state"), true},   // same-length attr changed
		{build("drop!", []float32{4, 5, 6}, "state"), false}, // attrs length changed: header differs
		{build("drop!", []float32{4, 5, 6}, "stats"), false}, // table changed
		{build("drop!", []float32{4, 5, 6, 7}, "stats"), false},
		{build("drop!", []float32{4, 5, 6, 7}, "stats"), true},
	}
	buf := make([]byte, 4096)
	var e Envelope
	for i, m := range msgs {
		in := buf[:len(m.buf)]
		copy(in, m.buf)
		require.NoError(t, e.Decode(in), "msg %d", i)
		var fresh Envelope
		require.NoError(t, fresh.Decode(in))
		require.Equal(t, fresh.Attrs, e.Attrs, "msg %d", i)
		require.Equal(t, fresh.Tensors, e.Tensors, "msg %d", i)
		require.Equal(t, m.reused, e.Reused(), "msg %d", i)
	}
	// A malformed buffer after a good one fails and forgets the layout.
	in := buf[:len(msgs[0].buf)]
	copy(in, msgs[0].buf)
	require.NoError(t, e.Decode(in))
	in[24] = 0xFF // attrs count
	require.Error(t, e.Decode(in))
	copy(in, msgs[0].buf)
	require.NoError(t, e.Decode(in))
	require.False(t, e.Reused())
	// Another buffer with the same bytes is decoded in full.
	other := append([]byte(nil), in...)
	require.NoError(t, e.Decode(other))
	require.False(t, e.Reused())
	d := uintptr(unsafe.Pointer(&e.Tensors[0].Data[0]))
	require.True(t, d >= uintptr(unsafe.Pointer(&other[0])) && d < uintptr(unsafe.Pointer(&other[0]))+uintptr(len(other)), "data aliases the new buffer")
}
