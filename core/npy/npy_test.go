package npy

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fixtures in testdata were written by NumPy (testdata/gen_npy.py).
func TestReadNumPyFixtures(t *testing.T) {
	t.Run("float32", func(t *testing.T) {
		a, err := ReadFile("testdata/f32_2x3.npy")
		require.NoError(t, err)
		require.Equal(t, Float32, a.DType)
		require.Equal(t, []int{2, 3}, a.Shape)
		v, err := a.Float32s()
		require.NoError(t, err)
		for i, x := range v {
			require.Equal(t, float32(i)/3, x)
		}
		_, err = a.Float64s()
		require.ErrorContains(t, err, "dtype float32, not float64")
	})
	t.Run("float64", func(t *testing.T) {
		a, err := ReadFile("testdata/f64_4.npy")
		require.NoError(t, err)
		v, err := a.Float64s()
		require.NoError(t, err)
		require.Equal(t, []float64{1.5, -2.25, math.Pi, 1e300}, v)
	})
	t.Run("uint8", func(t *testing.T) {
		a, err := ReadFile("testdata/u8_2x2x3.npy")
		require.NoError(t, err)
		require.Equal(t, []int{2, 2, 3}, a.Shape)
		v, err := a.Uint8s()
		require.NoError(t, err)
		for i, x := range v {
			require.Equal(t, uint8(i*20), x)
		}
	})
	t.Run("int32", func(t *testing.T) {
		a, err := ReadFile("testdata/i32_3.npy")
		require.NoError(t, err)
		v, err := a.Int32s()
		require.NoError(t, err)
		require.Equal(t, []int32{-1, 0, math.MaxInt32}, v)
	})
	t.Run("int64", func(t *testing.T) {
		a, err := ReadFile("testdata/i64_2x1.npy")
		require.NoError(t, err)
		require.Equal(t, []int{2, 1}, a.Shape)
		v, err := a.Int64s()
		require.NoError(t, err)
		require.Equal(t, []int64{math.MinInt64, 42}, v)
	})
	t.Run("bool", func(t *testing.T) {
		a, err := ReadFile("testdata/bool_3.npy")
		require.NoError(t, err)
		v, err := a.Bools()
		require.NoError(t, err)
		require.Equal(t, []bool{true, false, true}, v)
	})
	t.Run("scalar", func(t *testing.T) {
		a, err := ReadFile("testdata/f32_scalar.npy")
		require.NoError(t, err)
		require.Equal(t, []int{}, a.Shape)
		v, err := a.Float32s()
		require.NoError(t, err)
		require.Equal(t, []float32{7.25}, v)
	})
	t.Run("empty", func(t *testing.T) {
		a, err := ReadFile("testdata/f32_empty_0x4.npy")
		require.NoError(t, err)
		require.Equal(t, []int{0, 4}, a.Shape)
		require.Empty(t, a.Data)
	})
	t.Run("version2", func(t *testing.T) {
		a, err := ReadFile("testdata/f32_v2.npy")
		require.NoError(t, err)
		v, err := a.Float32s()
		require.NoError(t, err)
		require.Equal(t, []float32{0, 1, 2}, v)
	})
	t.Run("fortran rejected", func(t *testing.T) {
		_, err := ReadFile("testdata/f32_fortran.npy")
		require.ErrorIs(t, err, ErrFormat)
		require.ErrorContains(t, err, "fortran_order True")
	})
	t.Run("big-endian rejected", func(t *testing.T) {
		_, err := ReadFile("testdata/f32_bigendian.npy")
		require.ErrorIs(t, err, ErrFormat)
		require.ErrorContains(t, err, `descr ">f4"`)
	})
}

// Write must produce the same bytes NumPy does for the same array.
func TestWriteMatchesNumPy(t *testing.T) {
	cases := []struct {
		file  string
		shape []int
		data  any
	}{
		{"f32_2x3.npy", []int{2, 3}, []float32{0, 1.0 / 3, 2.0 / 3, 1, 4.0 / 3, 5.0 / 3}},
		{"f64_4.npy", []int{4}, []float64{1.5, -2.25, math.Pi, 1e300}},
		{"u8_2x2x3.npy", []int{2, 2, 3}, []uint8{0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 220}},
		{"i32_3.npy", []int{3}, []int32{-1, 0, math.MaxInt32}},
		{"i64_2x1.npy", []int{2, 1}, []int64{math.MinInt64, 42}},
		{"bool_3.npy", []int{3}, []bool{true, false, true}},
		{"f32_scalar.npy", []int{}, []float32{7.25}},
		{"f32_empty_0x4.npy", []int{0, 4}, []float32{}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", c.file))
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, Write(&buf, c.shape, c.data))
			require.Equal(t, want, buf.Bytes())
		})
	}
}

func TestWriteFileRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.npy")
	big := make([]int, 20000) // header > 65535 bytes forces format 2.0
	for i := range big {
		big[i] = 1
	}
	require.NoError(t, WriteFile(p, big, []int64{-7}))
	a, err := ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, big, a.Shape)
	v, err := a.Int64s()
	require.NoError(t, err)
	require.Equal(t, []int64{-7}, v)

	require.ErrorContains(t, WriteFile(p, []int{2, 2}, []float32{1}), "needs 4 elements, data has 1")
	require.ErrorContains(t, WriteFile(p, []int{1}, []string{"x"}), "unsupported data type []string")
}

func TestReadErrors(t *testing.T) {
	good, err := os.ReadFile("testdata/i32_3.npy")
	require.NoError(t, err)
	hdr := func(h string) []byte {
		b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
		return append(b, h...)
	}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "reading magic"},
		{"magic", []byte("\x93NUMPZ\x01\x00\x00\x00"), "bad magic"},
		{"version", []byte("\x93NUMPY\x04\x00\x00\x00"), "unsupported format version 4.0"},
		{"short header", []byte("\x93NUMPY\x01\x00\x10\x00{}"), "reading 16-byte header"},
		{"truncated data", good[:len(good)-1], "needs 12 data bytes, file has 11"},
		{"not dict", hdr("[1]"), "want a dict literal"},
		{"missing shape", hdr("{'descr': '<f4', 'fortran_order': False}"), "missing key"},
		{"unknown key", hdr("{'descr': '<f4', 'x': 1}"), `unknown key "x"`},
		{"object", hdr("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}"), `unsupported descr "|O"`},
		{"bad shape", hdr("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}"), "shape: want a tuple"},
		{"neg dim", hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"), "want a non-negative integer"},
		{"overflow", hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"), "overflows"},
		{"unterminated", hdr("{'descr"), "unterminated string"},
		{"trailing", hdr("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x"), "bytes after the dict"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(c.in))
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrFormat), "%v", err)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// FuzzParseHeader: the one .npy header parser never panics, and a header
// it accepts holds what it promises (non-negative dims, a descr without
// escapes) and parses the same
// when written back.
func FuzzParseHeader(f *testing.F) {
	f.Add("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }     \n")
	f.Add("{'descr': '|u1', 'fortran_order': True, 'shape': (3L,)}")
	f.Add("{'shape': (), 'descr': \"<f8\", 'fortran_order': False}\x00")
	f.Fuzz(func(t *testing.T, h string) {
		hd, err := ParseHeader(h)
		if err != nil {
			return
		}
		if strings.Contains(hd.Descr, "\\") {
			t.Fatalf("%q: accepted %+v", h, hd)
		}
		shape := make([]string, len(hd.Shape))
		for i, d := range hd.Shape {
			if d < 0 {
				t.Fatalf("%q: negative dim in %v", h, hd.Shape)
			}
			shape[i] = strconv.Itoa(d) + ","
		}
		order := "False"
		if hd.Fortran {
			order = "True"
		}
		q := "'"
		if strings.Contains(hd.Descr, q) {
			q = `"`
		}
		again, err := ParseHeader(fmt.Sprintf("{'descr': %s%s%s, 'fortran_order': %s, 'shape': (%s)}", q, hd.Descr, q, order, strings.Join(shape, " ")))
		if err != nil || !reflect.DeepEqual(again, hd) {
			t.Fatalf("%q: %+v written back parses as %+v, %v", h, hd, again, err)
		}
	})
}

func FuzzRead(f *testing.F) {
	for _, name := range []string{"f32_2x3.npy", "u8_2x2x3.npy", "f32_v2.npy", "f32_scalar.npy", "bool_3.npy"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(a.Data) != a.NumElements()*ItemSize(a.DType) {
			t.Fatalf("data %d bytes for shape %v dtype %s", len(a.Data), a.Shape, a.DType)
		}
		var buf bytes.Buffer
		var data any
		switch a.DType {
		case Float32:
			data, _ = a.Float32s()
		case Float64:
			data, _ = a.Float64s()
		case Uint8:
			data, _ = a.Uint8s()
		case Int32:
			data, _ = a.Int32s()
		case Int64:
			data, _ = a.Int64s()
		case Bool:
			data, _ = a.Bools()
		}
		if err := Write(&buf, a.Shape, data); err != nil {
			t.Fatal(err)
		}
		b2, err := Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if a.DType != Bool && !bytes.Equal(a.Data, b2.Data) {
			t.Fatal("round trip changed data")
		}
	})
}
