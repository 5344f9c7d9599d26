package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bf16bytes(v ...float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], BF16FromFloat32(x))
	}
	return b
}

func writeFile(t *testing.T, dir, name string, infos []TensorInfo, data [][]byte) string {
	t.Helper()
	img, err := Encode(infos, data, map[string]string{"format": "pt"})
	require.NoError(t, err)
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, img, 0o644))
	return p
}

func TestOpenSingleAndWiden(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, SingleFile,
		[]TensorInfo{{Name: "a", DType: F32, Shape: []int{2, 2}}, {Name: "b", DType: BF16, Shape: []int{3}}, {Name: "c", DType: F16, Shape: []int{2}}},
		[][]byte{f32bytes(1, 2, 3, 4), bf16bytes(1.5, -2, 0.1), {0x00, 0x3c, 0x01, 0x00}})
	s, err := Open(dir)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, []string{"a", "b", "c"}, s.Names())
	a, err := s.Float32("a")
	require.NoError(t, err)
	require.Equal(t, []float32{1, 2, 3, 4}, a)
	b, err := s.Float32("b")
	require.NoError(t, err)
	require.Equal(t, []float32{1.5, -2, math.Float32frombits(uint32(BF16FromFloat32(0.1)) << 16)}, b)
	c, err := s.Float32("c")
	require.NoError(t, err)
	require.Equal(t, []float32{1, float32(math.Ldexp(1, -24))}, c)
	info, ok := s.Info("a")
	require.True(t, ok)
	require.Equal(t, []int{2, 2}, info.Shape)
	_, err = s.Float32("zzz")
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
}

func TestOpenSharded(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "model-00001-of-00002.safetensors", []TensorInfo{{Name: "x", DType: F32, Shape: []int{1}}}, [][]byte{f32bytes(7)})
	writeFile(t, dir, "model-00002-of-00002.safetensors", []TensorInfo{{Name: "y", DType: F32, Shape: []int{1}}}, [][]byte{f32bytes(8)})
	idx := Index{WeightMap: map[string]string{"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}}
	b, _ := json.Marshal(idx)
	require.NoError(t, os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644))
	s, err := Open(dir)
	require.NoError(t, err)
	defer s.Close()
	require.Len(t, s.Files(), 2)
	y, err := s.Float32("y")
	require.NoError(t, err)
	require.Equal(t, []float32{8}, y)

	// An index that names a tensor the shard lacks.
	idx.WeightMap["z"] = "model-00002-of-00002.safetensors"
	b, _ = json.Marshal(idx)
	require.NoError(t, os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644))
	_, err = Open(dir)
	require.ErrorContains(t, err, "tensor[z] listed in model-00002-of-00002.safetensors is missing")
}

func TestHeaderErrors(t *testing.T) {
	good, err := Encode([]TensorInfo{{Name: "w", DType: F32, Shape: []int{2}}}, [][]byte{f32bytes(1, 2)}, nil)
	require.NoError(t, err)
	hdr := func(js string, data int) []byte {
		b := make([]byte, 8, 8+len(js)+data)
		binary.LittleEndian.PutUint64(b, uint64(len(js)))
		b = append(b, js...)
		return append(b, make([]byte, data)...)
	}
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "shorter than the 8-byte length prefix"},
		{"huge length", func() []byte { b := make([]byte, 16); binary.LittleEndian.PutUint64(b, 1<<40); return b }(), "exceeds"},
		{"length past end", func() []byte { b := make([]byte, 16); binary.LittleEndian.PutUint64(b, 100); return b }(), "runs past the end"},
		{"not json", hdr("xxxxxxxx", 0), "not a JSON object"},
		{"bad json", hdr(`{"a":`, 0), "header JSON"},
		{"trailing brace", hdr(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}}`, 2), "trailing data after the header"},
		{"trailing brackets", hdr(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}]]]`, 2), "trailing data after the header"},
		{"unknown dtype", hdr(`{"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}}`, 1), `unknown dtype "Q7"`},
		{"missing field", hdr(`{"w":{"dtype":"F32","shape":[1]}}`, 4), "needs dtype, shape and data_offsets"},
		{"extra field", hdr(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, 4), "unknown field"},
		{"size mismatch", hdr(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4), "needs 8 bytes, data_offsets give 4"},
		{"gap", hdr(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "gap before"},
		{"overlap", hdr(`{"v":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "overlap"},
		{"truncated data", good[:len(good)-4], "truncated"},
		{"trailing data", append(append([]byte{}, good...), 0, 0, 0, 0), "cover 8 of 12 data bytes"},
		{"negative dim", hdr(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4), "bad dimension"},
		{"bad metadata", hdr(`{"__metadata__":{"a":1}}`, 0), "__metadata__"},
		{"sub-byte", hdr(`{"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 2), "not a whole number of bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHeader(tc.file, int64(len(tc.file)))
			require.Error(t, err)
			require.ErrorIs(t, err, ErrHeader)
			require.Contains(t, err.Error(), tc.want)
			// The same bytes on disk give the same error, naming the file.
			p := filepath.Join(t.TempDir(), "bad.safetensors")
			require.NoError(t, os.WriteFile(p, tc.file, 0o644))
			_, err = OpenFile(p)
			require.ErrorIs(t, err, ErrHeader)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, strings.Contains(err.Error(), "file["+p+"]"), err.Error())
		})
	}
	h, err := ParseHeader(good, int64(len(good)))
	require.NoError(t, err)
	require.Len(t, h.Tensors, 1)
}

func TestOpenMissing(t *testing.T) {
	_, err := Open(t.TempDir())
	require.True(t, errors.Is(err, ErrNotFound), err)
}

// TestBF16ViewAndRelease: BF16 yields the bits Float32 widens (a view, no
// copy), other dtypes report ok = false, and Release leaves every view
// readable (the pages fault in again from the file).
func TestBF16ViewAndRelease(t *testing.T) {
	p := filepath.Join("..", "..", "testdata", "n17-tiny", "model.safetensors")
	s, err := Open(p)
	require.NoError(t, err)
	defer s.Close()
	names := s.Names()
	views := map[string][]uint16{}
	for _, n := range names {
		h, ok, err := s.BF16(n)
		require.NoError(t, err)
		require.True(t, ok, n)
		views[n] = h
	}
	for _, n := range names {
		require.NoError(t, s.Release(n))
	}
	for _, n := range names {
		f, err := s.Float32(n)
		require.NoError(t, err)
		require.Len(t, views[n], len(f), n)
		for i, v := range f {
			if math.Float32bits(v) != uint32(views[n][i])<<16 {
				t.Fatalf("%s[%d]: view %#04x, Float32 %v", n, i, views[n][i], v)
			}
		}
	}
	_, _, err = s.BF16("zzz")
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, s.Release("zzz"))

	dir := t.TempDir()
	writeFile(t, dir, SingleFile, []TensorInfo{{Name: "a", DType: F32, Shape: []int{2}}}, [][]byte{f32bytes(1, 2)})
	s2, err := Open(dir)
	require.NoError(t, err)
	defer s2.Close()
	h, ok, err := s2.BF16("a")
	require.NoError(t, err)
	require.False(t, ok)
	require.Nil(t, h)
}

func TestBF16RoundTrip(t *testing.T) {
	cases := map[float32]uint16{1: 0x3f80, -2: 0xc000, float32(math.Inf(1)): 0x7f80, 0: 0}
	for f, want := range cases {
		require.Equal(t, want, BF16FromFloat32(f), "%v", f)
	}
	// ties round to even: 1 + 2^-8 lies halfway between 1 and 1+2^-7.
	require.Equal(t, uint16(0x3f80), BF16FromFloat32(1+1.0/256))
	require.Equal(t, uint16(0x7fc0), BF16FromFloat32(float32(math.NaN())))
}

func TestTinyCheckpoint(t *testing.T) {
	p := filepath.Join("..", "..", "testdata", "n17-tiny", "model.safetensors")
	_, err := os.Stat(p)
	require.NoError(t, err, "the committed tiny checkpoint")
	s, err := Open(p)
	require.NoError(t, err)
	defer s.Close()
	require.Len(t, s.Names(), 290)
	info, ok := s.Info("backbone.model.model.visual.patch_embed.proj.weight")
	require.True(t, ok)
	require.Equal(t, BF16, info.DType)
	require.Equal(t, []int{32, 3, 2, 16, 16}, info.Shape)
}

func FuzzParseHeader(f *testing.F) {
	good, _ := Encode([]TensorInfo{{Name: "w", DType: BF16, Shape: []int{2, 3}}}, [][]byte{make([]byte, 12)}, map[string]string{"k": "v"})
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte(`{"a":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b, int64(len(b)))
		if err != nil {
			return
		}
		// A header that validates covers the data buffer exactly.
		var pos int64
		for _, ti := range h.Tensors {
			if ti.Begin != pos || ti.End < ti.Begin {
				t.Fatalf("accepted bad layout %+v", h.Tensors)
			}
			pos = ti.End
		}
		if h.DataStart+pos != int64(len(b)) {
			t.Fatalf("accepted header not covering the file")
		}
	})
}
