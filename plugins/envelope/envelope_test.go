package envelope

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sample(t testing.TB) []byte {
	var b Builder
	b.Attr("instruction", "pick up the cup").Attr("state_dtype", "float32")
	b.Float32("state", []int64{2, 3}, []float32{1, 2, 3, 4, 5, math.Float32frombits(0x7fc00001)})
	b.Float64("state.eef", []int64{1}, []float64{-0.5})
	b.Descriptor("video.cam", Uint8, []int64{2, 180, 320, 3})
	b.Raw("mask", Bool, []int64{3}, []byte{1, 0, 1})
	out, err := b.Bytes()
	require.NoError(t, err)
	return out
}

func TestRoundTrip(t *testing.T) {
	buf := sample(t)
	require.Equal(t, 0, len(buf)%8)
	var e Envelope
	require.NoError(t, e.Decode(buf))
	v, ok := e.Attr("instruction")
	assert.True(t, ok)
	assert.Equal(t, "pick up the cup", v)
	_, ok = e.Attr("missing")
	assert.False(t, ok)
	require.Len(t, e.Tensors, 4)

	st := e.Tensor("state")
	require.NotNil(t, st)
	assert.Equal(t, []int64{2, 3}, st.Dims)
	f, err := st.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4, 5}, f[:5])
	assert.Equal(t, uint32(0x7fc00001), math.Float32bits(f[5]), "bit-exact NaN payload")
	_, err = st.Float64s()
	assert.ErrorContains(t, err, "envelope: tensor[state]: dtype FP32, want FP64")

	d, err := e.Tensor("state.eef").Float64s()
	require.NoError(t, err)
	assert.Equal(t, []float64{-0.5}, d)

	cam := e.Tensor("video.cam")
	assert.Equal(t, FlagByHandle, cam.Flags)
	assert.Equal(t, int64(2*180*320*3), cam.NumElements())
	assert.Nil(t, cam.Data)
	assert.Equal(t, []byte{1, 0, 1}, e.Tensor("mask").Data)

	for _, tt := range e.Tensors {
		if len(tt.Data) > 0 {
			off := uintptrOf(tt.Data) - uintptrOf(buf)
			assert.Zero(t, off%8, "tensor %s data offset %d aligned", tt.Name, off)
		}
	}

	// Reuse: a second Decode on the same Envelope.
	require.NoError(t, e.Decode(buf))
	assert.Len(t, e.Tensors, 4)
}

func TestBuilderReuseNoAllocs(t *testing.T) {
	var b Builder
	data := make([]float32, 132)
	dims := []int64{132}
	enc := func() {
		b.Reset()
		b.Attr("k", "v")
		b.Float32("state", dims, data)
		if _, err := b.Bytes(); err != nil {
			t.Fatal(err)
		}
	}
	enc()
	assert.Zero(t, testing.AllocsPerRun(100, enc))
	buf, _ := b.Bytes()
	var e Envelope
	require.NoError(t, e.Decode(buf))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = e.Decode(buf) }))
}

func TestBuilderErrors(t *testing.T) {
	var b Builder
	_, err := b.Float32("x", []int64{3}, []float32{1, 2}).Bytes()
	assert.EqualError(t, err, "envelope: tensor[x]: shape [3] FP32 needs 12 bytes, got 8")
	b.Reset()
	_, err = b.Raw("x", DType(99), nil, nil).Bytes()
	assert.EqualError(t, err, "envelope: tensor[x]: unknown dtype 99")
	b.Reset()
	_, err = b.Descriptor("x", Uint8, []int64{1, 2, 3, 4, 5, 6, 7}).Bytes()
	assert.EqualError(t, err, "envelope: tensor[x]: rank 7, limit 6")
}

func TestDecodeErrors(t *testing.T) {
	good := sample(t)
	mut := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	le := binary.LittleEndian
	tests := []struct {
		name string
		buf  []byte
		want string
	}{
		{"short", good[:10], "envelope: malformed: 10 bytes, header needs 24"},
		{"magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), `magic "XWT1"`},
		{"version", mut(func(b []byte) []byte { le.PutUint16(b[4:], 9); return b }), "version 9, want 1"},
		{"total", good[:len(good)-8], "total_len"},
		{"tensors", mut(func(b []byte) []byte { le.PutUint16(b[6:], 65); return b }), "65 tensors, limit 64"},
		{"table overrun", mut(func(b []byte) []byte { le.PutUint32(b[12:], 1<<20); return b }), "overrun"},
		{"attrs overrun", mut(func(b []byte) []byte { le.PutUint32(b[24:], 3); le.PutUint32(b[28:], 1); return b }), "attr["},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Envelope
			err := e.Decode(tt.buf)
			require.ErrorIs(t, err, ErrMalformed)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// FuzzDecode: Decode never panics and every tensor it accepts lies inside
// the buffer with a consistent size.
func FuzzDecode(f *testing.F) {
	f.Add(sample(f))
	var b Builder
	empty, _ := b.Bytes()
	f.Add(empty)
	f.Fuzz(func(t *testing.T, buf []byte) {
		var e Envelope
		if err := e.Decode(buf); err != nil {
			return
		}
		for _, tt := range e.Tensors {
			if tt.Flags&FlagByHandle == 0 && int64(len(tt.Data)) != tt.NumElements()*int64(tt.DType.Size()) {
				t.Fatalf("tensor %s: %d bytes for %v", tt.Name, len(tt.Data), tt.Dims)
			}
		}
	})
}

// TestAppendToDirtyBuffer: padding and reserved bytes are zeroed even when
// the destination's spare capacity holds garbage.
func TestAppendToDirtyBuffer(t *testing.T) {
	clean := sample(t)
	dirty := make([]byte, 3, 3+len(clean)+64)
	full := dirty[:cap(dirty)]
	for i := range full {
		full[i] = 0xAB
	}
	var b Builder
	b.Attr("instruction", "pick up the cup").Attr("state_dtype", "float32")
	b.Float32("state", []int64{2, 3}, []float32{1, 2, 3, 4, 5, math.Float32frombits(0x7fc00001)})
	b.Float64("state.eef", []int64{1}, []float64{-0.5})
	b.Descriptor("video.cam", Uint8, []int64{2, 180, 320, 3})
	b.Raw("mask", Bool, []int64{3}, []byte{1, 0, 1})
	out, err := b.AppendTo(dirty)
	require.NoError(t, err)
	require.Equal(t, clean, out[3:])
}

// TestPadAttrsKeepsLayout: with the attribute section padded, requests
// whose attribute values differ in length (within one multiple) share the
// header and tensor table, decode to their own attributes, and the second
// decode on the same buffer reuses the first one's layout.
func TestPadAttrsKeepsLayout(t *testing.T) {
	enc := func(instr string) []byte {
		var b Builder
		b.PadAttrs(256)
		b.Attr("embodiment", "droid").Attr("instruction", instr)
		b.Float64("state.x", []int64{2}, []float64{1, 2})
		out, err := b.Bytes()
		require.NoError(t, err)
		return append([]byte(nil), out...)
	}
	short, long := enc("go"), enc(strings.Repeat("pick the cup ", 12))
	require.Equal(t, len(short), len(long))
	attrsLen := binary.LittleEndian.Uint32(short[8:])
	assert.Equal(t, uint32(256), attrsLen)
	tableStart := HeaderSize + int(attrsLen)
	assert.Equal(t, short[:HeaderSize], long[:HeaderSize], "header")
	assert.Equal(t, short[tableStart:tableStart+int(binary.LittleEndian.Uint32(short[12:]))],
		long[tableStart:tableStart+int(binary.LittleEndian.Uint32(long[12:]))], "table")

	buf := make([]byte, len(short))
	var e Envelope
	for i, msg := range [][]byte{short, long, short} {
		copy(buf, msg)
		require.NoError(t, e.Decode(buf))
		assert.Equal(t, i > 0, e.Reused(), "decode %d", i)
		v, _ := e.Attr("instruction")
		want := "go"
		if i == 1 {
			want = strings.Repeat("pick the cup ", 12)
		}
		assert.Equal(t, want, v)
		x, err := e.Tensor("state.x").Float64s()
		require.NoError(t, err)
		assert.Equal(t, []float64{1, 2}, x)
	}

	var b Builder
	_, err := b.PadAttrs(12).Attr("a", "b").Bytes()
	assert.ErrorContains(t, err, "multiple of 8")
}

func TestDTypeString(t *testing.T) {
	want := map[DType]string{0: "DType(0)", Bool: "BOOL", Uint8: "UINT8", Int32: "INT32", Int64: "INT64",
		FP16: "FP16", BF16: "BF16", FP32: "FP32", FP64: "FP64", 9: "DType(9)", 255: "DType(255)"}
	for d, name := range want {
		assert.Equal(t, name, d.String())
	}
}
