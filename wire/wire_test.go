package wire

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/internal/pytest"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

func TestDecodeValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		hex  string
		want any
	}{
		{"fixint", "05", int64(5)},
		{"negative fixint", "ff", int64(-1)},
		{"uint64 max", "cf ffffffffffffffff", uint64(math.MaxUint64)},
		{"uint32", "ce 00010000", int64(65536)},
		{"int16", "d1 ff00", int64(-256)},
		{"float32", "ca 3fc00000", float32(1.5)},
		{"float64", "cb 3ff8000000000000", 1.5},
		{"str", "a3 616263", "abc"},
		{"bin", "c4 02 0102", []byte{1, 2}},
		{"nil true false", "93 c0 c3 c2", []any{nil, true, false}},
		{"str and bin keys", "82 a2 6e64 01 c4 02 6e64 02", &Map{Keys: []Key{{"nd", false}, {"nd", true}}, Values: []any{int64(1), int64(2)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(unhex(t, tc.hex), Limits{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	deep := strings.Repeat("91", 100) + "c0"
	for _, tc := range []struct {
		name, hex, want string
		lim             Limits
	}{
		{"empty", "", "truncated", Limits{}},
		{"truncated str", "a5 6162", "truncated: need 5 bytes, 2 left", Limits{}},
		{"array32 of 2^32-1 in 5 bytes", "dd ffffffff", "array of 4294967295 elements in 0 bytes", Limits{}},
		{"map32 of 2^32-1", "df ffffffff", "map of 4294967295 elements", Limits{}},
		{"bin32 of 4 GB", "c6 ffffffff 00", "truncated: need 4294967295 bytes", Limits{}},
		{"extension", "d4 01 00", "extension types are not accepted", Limits{}},
		{"int key", "81 01 02", "map key of type int, want str or bin", Limits{}},
		{"duplicate key", "82 a1 61 01 a1 61 02", `duplicate map key "a"`, Limits{}},
		{"trailing", "c0 c0", "1 bytes after the msgpack value", Limits{}},
		{"too deep", deep, "nested deeper than 64", Limits{}},
		{"element budget", "93 01 02 03", "over the limit of 2 elements", Limits{MaxElements: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(unhex(t, tc.hex), tc.lim)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrMsgpack))
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	m := NewMap(4).Set("a", int64(-70000)).SetBin("b", []byte("x")).Set("c", []any{true, nil, 1.25, float32(2.5), "s"}).
		Set("d", []any{int64(math.MaxInt64), uint64(math.MaxUint64), int64(math.MinInt64), int64(-33), int64(200)})
	b, err := Marshal(m, EncodingNPY)
	require.NoError(t, err)
	got, err := Decode(b, Limits{})
	require.NoError(t, err)
	assert.Equal(t, m, got)

	long := strings.Repeat("x", 70000)
	b, err = Marshal(map[string]any{"z": long, "a": make([]byte, 300), "m": make([]any, 20)}, EncodingNPY)
	require.NoError(t, err)
	got, err = Decode(b, Limits{})
	require.NoError(t, err)
	gm := got.(*Map)
	assert.Equal(t, []Key{{"a", false}, {"m", false}, {"z", false}}, gm.Keys, "map[string]any keys sorted")
	assert.Equal(t, long, gm.Values[2])
}

func TestNPYRoundTrip(t *testing.T) {
	for _, a := range []*Array{
		Float32Array([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		Uint8Array([]int{1, 2, 2, 1, 3}, make([]byte, 12)),
		Float32Array(nil, []float32{7}),
		Float32Array([]int{9}, make([]float32, 9)),
	} {
		b := AppendNPY(nil, a)
		assert.Zero(t, (len(b)-len(a.Data))%64, "header padded to 64")
		got, err := ParseNPY(b)
		require.NoError(t, err)
		assert.Equal(t, a.DType, got.DType)
		assert.Equal(t, len(a.Shape), len(got.Shape))
		assert.Equal(t, a.Data, got.Data)
	}
}

func npyWith(header string, data []byte) []byte {
	h := header + "\n"
	b := []byte(npyMagic + "\x01\x00")
	b = append(b, byte(len(h)), byte(len(h)>>8))
	b = append(b, h...)
	return append(b, data...)
}

func TestNPYErrors(t *testing.T) {
	ok := "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"no magic", []byte("PK\x03\x04 not npy"), "no \\x93NUMPY magic"},
		{"version 4", append([]byte(npyMagic+"\x04\x00"), 0, 0, 0, 0), "format version 4.0"},
		{"header past the end", append([]byte(npyMagic+"\x01\x00"), 0xff, 0x00), "header of 255 bytes, 0 left"},
		{"v2 huge header", append([]byte(npyMagic+"\x02\x00"), 0xff, 0xff, 0xff, 0x7f), "header of 2147483647 bytes (at most 10000)"},
		{"fortran", npyWith("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", make([]byte, 8)), "fortran_order True"},
		{"object", npyWith("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", make([]byte, 16)), `dtype "|O" is not accepted`},
		{"big endian", npyWith("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", make([]byte, 8)), "big-endian"},
		{"structured", npyWith("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", make([]byte, 8)), "structured dtypes are refused"},
		{"short data", npyWith(ok, make([]byte, 7)), "7 data bytes for float32 (2,) (want 8)"},
		{"trailing data", npyWith(ok, make([]byte, 9)), "9 data bytes"},
		{"missing shape", npyWith("{'descr': '<f4', 'fortran_order': False}", nil), `missing key "shape"`},
		{"unknown key", npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", nil), `unknown key "x"`},
		{"negative dim", npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", nil), "want a non-negative integer"},
		{"overflowing shape", npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }", nil), "more than 2^31 elements"},
		{"garbage after dict", npyWith(ok+" junk", make([]byte, 8)), "bytes after the dict"},
		{"not a dict", npyWith("[1, 2]", nil), "want a dict literal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNPY(tc.b)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrArray), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	a, err := ParseNPY(npyWith(ok, make([]byte, 8)))
	require.NoError(t, err)
	assert.Equal(t, "float32 (2,)", a.String())
}

func TestArrayEncodingsRoundTrip(t *testing.T) {
	a := Float32Array([]int{1, 2, 3}, []float32{1, -2, 3.5, 0, math.MaxFloat32, -0})
	for _, enc := range []Encoding{EncodingNPY, EncodingMsgpackNumpy, EncodingOpenPI} {
		t.Run(enc.String(), func(t *testing.T) {
			b, err := Marshal(NewMap(1).Set("x", a), enc)
			require.NoError(t, err)
			v, err := Decode(b, Limits{})
			require.NoError(t, err)
			r, got, err := Resolve(v, "data")
			require.NoError(t, err)
			assert.Equal(t, enc, got)
			x, _ := r.(*Map).Get("x")
			require.IsType(t, &Array{}, x)
			assert.Equal(t, a.Shape, x.(*Array).Shape)
			assert.Equal(t, a.Data, x.(*Array).Data)
			e2, err := ParseEncoding(enc.String())
			require.NoError(t, err)
			assert.Equal(t, enc, e2)
		})
	}
}

func TestResolveErrors(t *testing.T) {
	mnp := func(mut func(m *Map) *Map) *Map {
		m := NewMap(5).SetBin("nd", true).SetBin("type", "<f4").SetBin("kind", []byte{}).SetBin("shape", []any{int64(2)}).SetBin("data", make([]byte, 8))
		return mut(m)
	}
	set := func(m *Map, key string, v any) *Map {
		for i, k := range m.Keys {
			if k.Name == key {
				m.Values[i] = v
			}
		}
		return m
	}
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"npy not bin", NewMap(2).Set("__ndarray_class__", true).Set("as_npy", "x"), "as_npy: want bin"},
		{"npy bad header", NewMap(2).Set("__ndarray_class__", true).Set("as_npy", []byte("\x93NUMPY\x01\x00\x05\x00{bad}")), ".npy: header"},
		{"mnp object kind", mnp(func(m *Map) *Map { return set(m, "kind", []byte("O")) }), `kind "O"`},
		{"mnp bad type", mnp(func(m *Map) *Map { return set(m, "type", "<c16") }), `dtype "<c16" is not accepted`},
		{"mnp short data", mnp(func(m *Map) *Map { return set(m, "data", make([]byte, 7)) }), "7 data bytes for float32 (2,) (want 8)"},
		{"mnp shape not ints", mnp(func(m *Map) *Map { return set(m, "shape", []any{"2"}) }), "shape[0]: want a non-negative integer"},
		{"mnp nd not bool", mnp(func(m *Map) *Map { return set(m, "nd", int64(1)) }), "nd is int, want true or false"},
		{"openpi missing shape", NewMap(3).SetBin("__ndarray__", true).SetBin("data", []byte{}).SetBin("dtype", "<f4"), "missing shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Resolve(NewMap(1).Set("obs", []any{tc.v}), "data")
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrArray), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "data.obs[0]: "), err.Error())
		})
	}
	// numpy scalars become plain values.
	s := NewMap(3).SetBin("nd", false).SetBin("type", "<f8").SetBin("data", []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f})
	v, enc, err := Resolve(s, "x")
	require.NoError(t, err)
	assert.Equal(t, 1.5, v)
	assert.Equal(t, EncodingMsgpackNumpy, enc)
}

func TestNormalizeDType(t *testing.T) {
	for in, want := range map[string]string{"<f4": "<f4", "=f4": "<f4", "f4": "<f4", "float32": "<f4", "|u1": "|u1", "<u1": "|u1", "uint8": "|u1", "|b1": "|b1"} {
		got, err := NormalizeDType(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{">f4", "|O", "<U5", "<c8", "", "float128", "<V8"} {
		_, err := NormalizeDType(bad)
		assert.Error(t, err, bad)
	}
}

// TestPythonInterop decodes what Python's msgpack + numpy write in all
// three encodings (Isaac-GR00T N1.7 release, msgpack_numpy 0.4.8's wire
// form, openpi_client's), and has Python decode what Encoder writes, with
// the reference decoders' own rules.
func TestPythonInterop(t *testing.T) {
	py := pytest.Find(t, "msgpack", "numpy")
	out := pytest.Run(t, py, nil, "-c", `
import io, sys, msgpack, numpy as np
a = np.arange(6, dtype=np.float32).reshape(1, 2, 3) - 2.5
u = (np.arange(24, dtype=np.uint8) * 7).reshape(2, 2, 2, 3)
def npy(x):
    b = io.BytesIO(); np.save(b, x, allow_pickle=False)
    return {"__ndarray_class__": True, "as_npy": b.getvalue()}
def mnp(x):  # msgpack_numpy 0.4.8 encode
    return {b"nd": True, b"type": x.dtype.str, b"kind": b"", b"shape": x.shape, b"data": x.data}
def opi(x):  # openpi_client.msgpack_numpy.pack_array
    return {b"__ndarray__": True, b"data": x.tobytes(), b"dtype": x.dtype.str, b"shape": x.shape}
msgs = [msgpack.packb({"a": f(a), "u": f(u), "s": np.float32(1.5).item()}) for f in (npy, mnp, opi)]
sys.stdout.buffer.write(b"".join(len(m).to_bytes(4, "little") + m for m in msgs))
`)
	for _, enc := range []Encoding{EncodingNPY, EncodingMsgpackNumpy, EncodingOpenPI} {
		require.GreaterOrEqual(t, len(out), 4)
		n := int(out[0]) | int(out[1])<<8 | int(out[2])<<16 | int(out[3])<<24
		msg := out[4 : 4+n]
		out = out[4+n:]
		v, err := Decode(msg, Limits{})
		require.NoError(t, err, enc.String())
		r, got, err := Resolve(v, "msg")
		require.NoError(t, err, enc.String())
		assert.Equal(t, enc, got)
		m := r.(*Map)
		av, _ := m.Get("a")
		a := av.(*Array)
		assert.Equal(t, "float32 (1, 2, 3)", a.String(), enc.String())
		f, err := a.Float32s()
		require.NoError(t, err)
		assert.Equal(t, []float32{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}, f)
		uv, _ := m.Get("u")
		u := uv.(*Array)
		assert.Equal(t, "uint8 (2, 2, 2, 3)", u.String())
		assert.Equal(t, byte(7*23), u.Data[23])
	}

	// Go → Python, with each ecosystem's decoder.
	a := Float32Array([]int{2, 1, 2}, []float32{0.25, -1, 3, 1e-8})
	var in []byte
	for _, enc := range []Encoding{EncodingNPY, EncodingMsgpackNumpy, EncodingOpenPI} {
		b, err := Marshal(NewMap(2).Set("x", a).Set("enc", enc.String()), enc)
		require.NoError(t, err)
		in = append(in, byte(len(b)), byte(len(b)>>8), byte(len(b)>>16), byte(len(b)>>24))
		in = append(in, b...)
	}
	res := pytest.Run(t, py, in, "-c", `
import io, sys, msgpack, numpy as np
def dec_npy(o):
    if "__ndarray_class__" in o: return np.load(io.BytesIO(o["as_npy"]), allow_pickle=False)
    return o
def dec_mnp(o):
    if b"nd" in o and o[b"nd"] is True:
        return np.ndarray(buffer=o[b"data"], dtype=np.dtype(o[b"type"]), shape=o[b"shape"])
    return o
def dec_opi(o):
    if b"__ndarray__" in o: return np.ndarray(buffer=o[b"data"], dtype=np.dtype(o[b"dtype"]), shape=o[b"shape"])
    return o
data = sys.stdin.buffer.read()
for hook in (dec_npy, dec_mnp, dec_opi):
    n = int.from_bytes(data[:4], "little"); m = data[4:4+n]; data = data[4+n:]
    o = msgpack.unpackb(m, object_hook=hook, raw=False)
    x = o["x"]
    assert isinstance(x, np.ndarray) and x.dtype == np.float32 and x.shape == (2, 1, 2), (o["enc"], x)
    print(o["enc"], x.ravel().tolist())
`)
	assert.Equal(t, "npy [0.25, -1.0, 3.0, 9.99999993922529e-09]\nmsgpack_numpy [0.25, -1.0, 3.0, 9.99999993922529e-09]\nopenpi [0.25, -1.0, 3.0, 9.99999993922529e-09]\n", string(res))
}

// FuzzDecode: Decode and Resolve never panic and never allocate beyond
// the input's size (the element budget and the byte checks); a value that
// decodes re-encodes to bytes that decode and re-encode identically.
func FuzzDecode(f *testing.F) {
	a := Float32Array([]int{2}, []float32{1, 2})
	for _, enc := range []Encoding{EncodingNPY, EncodingMsgpackNumpy, EncodingOpenPI} {
		b, _ := Marshal(NewMap(2).Set("endpoint", "get_action").Set("data", NewMap(1).Set("x", a)), enc)
		f.Add(b)
	}
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xc6, 0x7f, 0xff, 0xff, 0xff, 0x00})
	f.Add([]byte{0x81, 0xc4, 0x02, 'n', 'd', 0xc3})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Decode(b, Limits{MaxElements: 1 << 12})
		if err != nil {
			return
		}
		enc, err := Marshal(v, EncodingNPY)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		w, err := Decode(enc, Limits{MaxElements: 1 << 12})
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		again, err := Marshal(w, EncodingNPY)
		if err != nil || string(again) != string(enc) {
			t.Fatalf("re-encoding differs (NaN-safe byte comparison): %v", err)
		}
		_, _, _ = Resolve(v, "msg")
	})
}

// FuzzParseNPY: ParseNPY never panics, and a parsed array's data length
// always matches its dtype and shape.
func FuzzParseNPY(f *testing.F) {
	f.Add(AppendNPY(nil, Float32Array([]int{2, 2}, []float32{1, 2, 3, 4})))
	f.Add(AppendNPY(nil, Uint8Array([]int{1, 2, 3}, make([]byte, 6))))
	f.Add(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }", nil))
	f.Add([]byte(npyMagic + "\x03\x00\xff\xff\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseNPY(b)
		if err != nil {
			return
		}
		n, err := elements(a.Shape)
		if err != nil || n*a.ItemSize() != len(a.Data) {
			t.Fatalf("parsed %s with %d data bytes", a, len(a.Data))
		}
		_ = a.Float64s()
	})
}

// bigMap is a map32 of n nil values under the distinct 3-byte str keys
// 0…n−1, then the str keys extra (each with a nil value) if any.
func bigMap(n int, extra ...string) []byte {
	b := []byte{0xdf}
	b = binary.BigEndian.AppendUint32(b, uint32(n+len(extra)))
	for i := range n {
		b = append(b, 0xa3, byte(i>>16), byte(i>>8), byte(i), 0xc0)
	}
	for _, k := range extra {
		b = append(b, 0xa0|byte(len(k)))
		b = append(b, k...)
		b = append(b, 0xc0)
	}
	return b
}

// TestDecodeLargeMap: a map of 2¹⁷ distinct keys decodes (in linear time:
// the old pairwise duplicate check took minutes of CPU here, a remote
// denial of service before the API key was checked), keeps its order, and
// a duplicate past the small-map scan is still rejected by name; str and
// bin keys of the same bytes stay distinct.
func TestDecodeLargeMap(t *testing.T) {
	const n = 1 << 17
	v, err := Decode(bigMap(n), Limits{})
	require.NoError(t, err)
	m := v.(*Map)
	require.Len(t, m.Keys, n)
	assert.Equal(t, Key{Name: "\x00\x00\x2a"}, m.Keys[42])

	_, err = Decode(bigMap(n, "\x02\x00\x07"), Limits{})
	require.NoError(t, err) // 0x020007 is past n: distinct
	_, err = Decode(bigMap(n, "\x00\x10\x07"), Limits{})
	require.ErrorIs(t, err, ErrMsgpack)
	assert.Contains(t, err.Error(), `duplicate map key "\x00\x10\a"`)

	for _, size := range []int{smallMap, smallMap + 1} {
		b := bigMap(size - 1)
		b = append(b, 0xc4, 3, 0, 0, 1, 0xc0) // bin key 00 00 01: not str key 1
		b[4]++
		_, err := Decode(b, Limits{})
		require.NoError(t, err, "size %d", size)
	}
}

// TestEncodeStruct: structs are maps of their msgpack-tagged fields in
// declaration order; omitempty leaves empty fields out; "-" and
// unexported fields are skipped; nil pointers, slices and maps are nil.
func TestEncodeStruct(t *testing.T) {
	type inner struct {
		N int `msgpack:"n"`
	}
	type outer struct {
		B     string         `msgpack:"b"`
		A     []string       `msgpack:"a"`
		Opt   string         `msgpack:"opt,omitempty"`
		Skip  int            `msgpack:"-"`
		hid   int            //nolint:unused // unexported: skipped
		Plain float32        // no tag: the Go name
		In    *inner         `msgpack:"in"`
		M     map[string]int `msgpack:"m"`
		Arr   [2]uint8       `msgpack:"arr"`
	}
	for _, tc := range []struct {
		name string
		v    any
		want *Map
	}{
		{"zero", outer{}, NewMap(6).Set("b", "").Set("a", nil).Set("Plain", float32(0)).Set("in", nil).Set("m", nil).
			Set("arr", []any{int64(0), int64(0)})},
		{"set", &outer{B: "x", A: []string{}, Opt: "o", Skip: 1, hid: 2, Plain: 1.5, In: &inner{N: -3}, M: map[string]int{"z": 1, "a": 300}, Arr: [2]uint8{1, 255}},
			NewMap(7).Set("b", "x").Set("a", []any{}).Set("opt", "o").Set("Plain", float32(1.5)).Set("in", NewMap(1).Set("n", int64(-3))).
				Set("m", NewMap(2).Set("a", int64(300)).Set("z", int64(1))).Set("arr", []any{int64(1), int64(255)})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Marshal(tc.v, EncodingNPY)
			require.NoError(t, err)
			got, err := Decode(b, Limits{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := Marshal(map[int]int{1: 2}, EncodingNPY)
	assert.ErrorContains(t, err, "map keys must be strings")
	_, err = Marshal(struct{ C chan int }{}, EncodingNPY)
	assert.ErrorContains(t, err, "C: wire: cannot encode chan int")
}

// TestDecodeValueLimitAndDuplicates: MaxValues counts every value (keys
// and containers too) and reports OverLimit; DuplicateKeys keeps both
// entries where Decode otherwise refuses them; errors are DecodeErrors
// matching ErrMsgpack.
func TestDecodeValueLimitAndDuplicates(t *testing.T) {
	body := []byte{0x81, 0xa1, 'a', 0x93, 0xc0, 0xc0, 0xc0} // {"a": [nil, nil, nil]}: 6 values
	_, err := Decode(body, Limits{MaxValues: 6})
	require.NoError(t, err)
	_, err = Decode(body, Limits{MaxValues: 5})
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	assert.True(t, de.OverLimit)
	assert.Equal(t, "more than 5 values", de.Msg)
	assert.ErrorIs(t, err, ErrMsgpack)
	_, err = Decode(body, Limits{MaxElements: 3})
	require.ErrorAs(t, err, &de)
	assert.True(t, de.OverLimit, "MaxElements is a limit too")

	dup := []byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02}
	_, err = Decode(dup, Limits{})
	require.ErrorAs(t, err, &de)
	assert.False(t, de.OverLimit)
	assert.Equal(t, `msgpack: offset 4: duplicate map key "a"`, err.Error())
	v, err := Decode(dup, Limits{DuplicateKeys: true})
	require.NoError(t, err)
	assert.Equal(t, NewMap(2).Set("a", int64(1)).Set("a", int64(2)), v)
}

func TestAs(t *testing.T) {
	m := NewMap(3).Set("s", "x").Set("f", 1.5).SetBin("b", "bin")
	for _, c := range []struct {
		name   string
		got    any
		ok     bool
		want   any
		wantOK bool
	}{
		{"string", first(As[string](m, "s")), second(As[string](m, "s")), "x", true},
		{"float64", first(As[float64](m, "f")), second(As[float64](m, "f")), 1.5, true},
		{"wrong type", first(As[string](m, "f")), second(As[string](m, "f")), "", false},
		{"absent", first(As[float64](m, "nope")), second(As[float64](m, "nope")), 0.0, false},
		{"bin key is not a str key", first(As[string](m, "b")), second(As[string](m, "b")), "", false},
	} {
		if c.got != c.want || c.ok != c.wantOK {
			t.Errorf("%s: As = %v, %v; want %v, %v", c.name, c.got, c.ok, c.want, c.wantOK)
		}
	}
}

func first[T any](v T, _ bool) any    { return v }
func second[T any](_ T, ok bool) bool { return ok }
