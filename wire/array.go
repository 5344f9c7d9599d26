package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gr00tgw/gr00tgw/core/npy"
)

// ErrArray is wrapped by every error about a malformed array encoding.
var ErrArray = errors.New("ndarray")

// Encoding is one way of carrying numpy arrays in msgpack.
type Encoding int

// The array encodings in the field.
const (
	// EncodingNone: no array seen.
	EncodingNone Encoding = iota
	// EncodingNPY is Isaac-GR00T's MsgSerializer of N1.5–N1.7 release:
	// a str-keyed map {"__ndarray_class__": true, "as_npy": <bin: the
	// bytes of np.save(allow_pickle=False)>}.
	EncodingNPY
	// EncodingMsgpackNumpy is msgpack_numpy 0.4.8, Isaac-GR00T's
	// serializer since 2026-05: a bin-keyed map {b"nd": true, b"type":
	// "<f4", b"kind": b"", b"shape": [...], b"data": <raw C-order bytes>};
	// numpy scalars {b"nd": false, b"type", b"data"}.
	EncodingMsgpackNumpy
	// EncodingOpenPI is openpi_client.msgpack_numpy: a bin-keyed map
	// {b"__ndarray__": true, b"data": <bytes>, b"dtype": "<f4", b"shape":
	// [...]}; numpy scalars {b"__npgeneric__": true, b"data", b"dtype"}.
	EncodingOpenPI
)

// String names the encoding as ParseEncoding reads it.
func (e Encoding) String() string {
	switch e {
	case EncodingNPY:
		return "npy"
	case EncodingMsgpackNumpy:
		return "msgpack_numpy"
	case EncodingOpenPI:
		return "openpi"
	}
	return "none"
}

// ParseEncoding reads "npy", "msgpack_numpy" or "openpi".
func ParseEncoding(s string) (Encoding, error) {
	switch s {
	case "npy":
		return EncodingNPY, nil
	case "msgpack_numpy", "msgpack-numpy":
		return EncodingMsgpackNumpy, nil
	case "openpi":
		return EncodingOpenPI, nil
	}
	return EncodingNone, fmt.Errorf("wire: array encoding %q is not npy, msgpack_numpy or openpi", s)
}

// dtypeInfo is one accepted numpy dtype.
type dtypeInfo struct {
	name string // numpy's name: uint8, float32, …
	size int
	kind byte // 'u', 'i', 'f', 'b'
}

// dtypes maps a normalised numpy dtype.str to its facts. Only
// little-endian (or one-byte) numeric and bool dtypes are accepted.
var dtypes = map[string]dtypeInfo{
	"|u1": {"uint8", 1, 'u'}, "|i1": {"int8", 1, 'i'}, "|b1": {"bool", 1, 'b'},
	"<u2": {"uint16", 2, 'u'}, "<i2": {"int16", 2, 'i'}, "<f2": {"float16", 2, 'f'},
	"<u4": {"uint32", 4, 'u'}, "<i4": {"int32", 4, 'i'}, "<f4": {"float32", 4, 'f'},
	"<u8": {"uint64", 8, 'u'}, "<i8": {"int64", 8, 'i'}, "<f8": {"float64", 8, 'f'},
}

// descrOfName maps numpy names to dtype.str.
var descrOfName = map[string]string{}

func init() {
	for d, info := range dtypes {
		descrOfName[info.name] = d
	}
}

// NormalizeDType returns the canonical dtype.str of a numpy dtype string
// ("<f4", "=f4", "f4", "float32" → "<f4"; "<u1", "u1", "uint8" → "|u1"),
// or an error naming it when it is not accepted (big-endian, object,
// structured, complex, strings).
func NormalizeDType(s string) (string, error) {
	d, err := normalizeDType(s)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrArray, err)
	}
	return d, nil
}

func normalizeDType(s string) (string, error) {
	if d, ok := descrOfName[s]; ok {
		return d, nil
	}
	t := s
	order := byte('=')
	if len(t) > 0 && strings.IndexByte("<>=|", t[0]) >= 0 {
		order, t = t[0], t[1:]
	}
	if len(t) != 2 {
		return "", fmt.Errorf("dtype %q is not accepted (want a numeric or bool dtype such as <f4, |u1)", s)
	}
	if t[1] == '1' {
		t = "|" + t
	} else {
		if order == '>' {
			return "", fmt.Errorf("dtype %q is big-endian (want little-endian, e.g. <f4)", s)
		}
		t = "<" + t
	}
	if _, ok := dtypes[t]; !ok {
		return "", fmt.Errorf("dtype %q is not accepted (want a numeric or bool dtype such as <f4, |u1; object, structured, complex and string arrays are refused)", s)
	}
	return t, nil
}

// MaxDims bounds an array's rank.
const MaxDims = 32

// Array is one numpy array: its canonical dtype.str (see NormalizeDType),
// its shape (empty: a 0-d scalar) and its raw little-endian C-order
// element bytes. Decoded arrays alias the message they came from.
type Array struct {
	DType string
	Shape []int
	Data  []byte
}

// NewArray checks dtype and shape against len(data) and returns the array.
func NewArray(dtype string, shape []int, data []byte) (*Array, error) {
	d, err := NormalizeDType(dtype)
	if err != nil {
		return nil, err
	}
	n, err := elements(shape)
	if err != nil {
		return nil, err
	}
	if size := dtypes[d].size; n > math.MaxInt/size || n*size != len(data) {
		return nil, fmt.Errorf("%w: %d data bytes for %s %s (want %d)", ErrArray, len(data), dtypes[d].name, ShapeString(shape), n*size)
	}
	return &Array{DType: d, Shape: append([]int(nil), shape...), Data: data}, nil
}

// elements is the product of shape, checked for overflow.
func elements(shape []int) (int, error) {
	if len(shape) > MaxDims {
		return 0, fmt.Errorf("%w: %d dimensions (at most %d)", ErrArray, len(shape), MaxDims)
	}
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("%w: shape %s has a negative dimension", ErrArray, ShapeString(shape))
		}
		if d != 0 && n > math.MaxInt32/d {
			return 0, fmt.Errorf("%w: shape %s has more than 2^31 elements", ErrArray, ShapeString(shape))
		}
		n *= d
	}
	return n, nil
}

// Float32Array builds a float32 array of shape from vals (len must match).
func Float32Array(shape []int, vals []float32) *Array {
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return &Array{DType: "<f4", Shape: append([]int(nil), shape...), Data: data}
}

// Uint8Array builds a uint8 array of shape over pix (not copied).
func Uint8Array(shape []int, pix []byte) *Array {
	return &Array{DType: "|u1", Shape: append([]int(nil), shape...), Data: pix}
}

// Name is the numpy name of the dtype (uint8, float32, …).
func (a *Array) Name() string { return dtypes[a.DType].name }

// ItemSize is the byte size of one element.
func (a *Array) ItemSize() int { return dtypes[a.DType].size }

// Len is the number of elements.
func (a *Array) Len() int {
	if s := a.ItemSize(); s > 0 {
		return len(a.Data) / s
	}
	return 0
}

// String describes the array as "float32 (1, 1, 180, 320, 3)".
func (a *Array) String() string { return a.Name() + " " + ShapeString(a.Shape) }

// ShapeString formats a shape as Python prints a tuple: (2, 3), (9,), ().
func ShapeString(shape []int) string { return npy.ShapeTuple(shape) }

// Float64s returns the elements of a numeric or bool array as float64
// (exact for every accepted dtype but the 64-bit integers beyond 2^53).
func (a *Array) Float64s() []float64 {
	n := a.Len()
	out := make([]float64, n)
	d := a.Data
	for i := range out {
		switch a.DType {
		case "|u1":
			out[i] = float64(d[i])
		case "|i1":
			out[i] = float64(int8(d[i]))
		case "|b1":
			if d[i] != 0 {
				out[i] = 1
			}
		case "<u2":
			out[i] = float64(binary.LittleEndian.Uint16(d[2*i:]))
		case "<i2":
			out[i] = float64(int16(binary.LittleEndian.Uint16(d[2*i:])))
		case "<f2":
			out[i] = float64(halfToFloat32(binary.LittleEndian.Uint16(d[2*i:])))
		case "<u4":
			out[i] = float64(binary.LittleEndian.Uint32(d[4*i:]))
		case "<i4":
			out[i] = float64(int32(binary.LittleEndian.Uint32(d[4*i:])))
		case "<f4":
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:])))
		case "<u8":
			out[i] = float64(binary.LittleEndian.Uint64(d[8*i:]))
		case "<i8":
			out[i] = float64(int64(binary.LittleEndian.Uint64(d[8*i:])))
		case "<f8":
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
		}
	}
	return out
}

// Float32s returns the elements of a float32 array.
func (a *Array) Float32s() ([]float32, error) {
	if a.DType != "<f4" {
		return nil, fmt.Errorf("%w: %s, want float32", ErrArray, a)
	}
	out := make([]float32, a.Len())
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:]))
	}
	return out, nil
}

// halfToFloat32 converts an IEEE 754 binary16 to float32.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(mant) / 1024 / 16384
		if sign != 0 {
			return -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// scalar is the Go value of a 0-d array (a numpy scalar).
func (a *Array) scalar() any {
	switch dtypes[a.DType].kind {
	case 'b':
		return a.Data[0] != 0
	case 'f':
		return a.Float64s()[0]
	case 'u':
		if a.DType == "<u8" {
			u := binary.LittleEndian.Uint64(a.Data)
			if u > math.MaxInt64 {
				return u
			}
			return int64(u)
		}
	}
	return int64(a.Float64s()[0])
}

// Resolve walks a Decode result and replaces every array marker map by its
// *Array (numpy scalars by their Go value: bool, int64, float64), in all
// three encodings. It returns the new tree and the encoding of the first
// array met (EncodingNone when there is none). root names the top of the
// tree in error messages, which give the path of the bad array
// ("data.observation.video.wrist_image_left: .npy header: ...").
func Resolve(v any, root string) (any, Encoding, error) {
	r := resolver{path: []string{root}}
	out, err := r.walk(v)
	return out, r.first, err
}

type resolver struct {
	path  []string
	first Encoding
}

func (r *resolver) where() string { return strings.Join(r.path, "") }

func (r *resolver) fail(err error) error {
	return fmt.Errorf("%s: %w", r.where(), err)
}

func (r *resolver) walk(v any) (any, error) {
	switch x := v.(type) {
	case []any:
		for i, y := range x {
			r.path = append(r.path, "["+strconv.Itoa(i)+"]")
			z, err := r.walk(y)
			r.path = r.path[:len(r.path)-1]
			if err != nil {
				return nil, err
			}
			x[i] = z
		}
		return x, nil
	case *Map:
		a, enc, err := decodeMarker(x)
		if err != nil {
			return nil, r.fail(err)
		}
		if enc != EncodingNone {
			if r.first == EncodingNone {
				r.first = enc
			}
			return a, nil
		}
		for i, k := range x.Keys {
			r.path = append(r.path, "."+k.Name)
			z, err := r.walk(x.Values[i])
			r.path = r.path[:len(r.path)-1]
			if err != nil {
				return nil, err
			}
			x.Values[i] = z
		}
		return x, nil
	}
	return v, nil
}

// decodeMarker recognises one array marker map; EncodingNone when m is
// none. It returns *Array for arrays and the Go value for numpy scalars.
func decodeMarker(m *Map) (any, Encoding, error) {
	if flag, ok := m.Get("__ndarray_class__"); ok {
		if flag != true {
			return nil, EncodingNPY, fmt.Errorf("%w: __ndarray_class__ is %v, want true", ErrArray, flag)
		}
		raw, ok := m.Get("as_npy")
		b, isBin := raw.([]byte)
		if !ok || !isBin {
			return nil, EncodingNPY, fmt.Errorf("%w: as_npy: want bin (the bytes of np.save), got %s", ErrArray, TypeName(raw))
		}
		a, err := ParseNPY(b)
		return a, EncodingNPY, err
	}
	if flag, ok := m.GetBin("nd"); ok {
		return decodeMsgpackNumpy(m, flag)
	}
	if flag, ok := m.GetBin("__ndarray__"); ok {
		if flag != true {
			return nil, EncodingOpenPI, fmt.Errorf("%w: __ndarray__ is %v, want true", ErrArray, flag)
		}
		dt, err := dtypeField(m, "dtype")
		if err != nil {
			return nil, EncodingOpenPI, err
		}
		shape, err := shapeField(m)
		if err != nil {
			return nil, EncodingOpenPI, err
		}
		data, err := dataField(m)
		if err != nil {
			return nil, EncodingOpenPI, err
		}
		a, err := NewArray(dt, shape, data)
		return a, EncodingOpenPI, err
	}
	if flag, ok := m.GetBin("__npgeneric__"); ok {
		if flag != true {
			return nil, EncodingOpenPI, fmt.Errorf("%w: __npgeneric__ is %v, want true", ErrArray, flag)
		}
		if _, err := dtypeField(m, "dtype"); err != nil {
			return nil, EncodingOpenPI, err
		}
		v, _ := m.GetBin("data")
		switch v.(type) {
		case bool, int64, uint64, float32, float64:
			return v, EncodingOpenPI, nil
		}
		return nil, EncodingOpenPI, fmt.Errorf("%w: __npgeneric__ data: want a number or bool, got %s", ErrArray, TypeName(v))
	}
	return nil, EncodingNone, nil
}

func decodeMsgpackNumpy(m *Map, flag any) (any, Encoding, error) {
	const enc = EncodingMsgpackNumpy
	nd, ok := flag.(bool)
	if !ok {
		return nil, enc, fmt.Errorf("%w: nd is %s, want true or false", ErrArray, TypeName(flag))
	}
	dt, err := dtypeField(m, "type")
	if err != nil {
		return nil, enc, err
	}
	data, err := dataField(m)
	if err != nil {
		return nil, enc, err
	}
	if !nd { // a numpy scalar: one element's bytes
		a, err := NewArray(dt, nil, data)
		if err != nil {
			return nil, enc, err
		}
		return a.scalar(), enc, nil
	}
	if k, ok := m.GetBin("kind"); ok {
		var s string
		switch x := k.(type) {
		case []byte:
			s = string(x)
		case string:
			s = x
		default:
			return nil, enc, fmt.Errorf("%w: kind: want bin, got %s", ErrArray, TypeName(k))
		}
		if s != "" {
			return nil, enc, fmt.Errorf("%w: kind %q: structured (V) and object (O, pickle) arrays are refused", ErrArray, s)
		}
	}
	shape, err := shapeField(m)
	if err != nil {
		return nil, enc, err
	}
	a, err := NewArray(dt, shape, data)
	return a, enc, err
}

func dtypeField(m *Map, key string) (string, error) {
	v, ok := m.GetBin(key)
	if !ok {
		return "", fmt.Errorf("%w: missing %s", ErrArray, key)
	}
	switch x := v.(type) {
	case string:
		return NormalizeDType(x)
	case []byte:
		return NormalizeDType(string(x))
	}
	return "", fmt.Errorf("%w: %s: want str, got %s", ErrArray, key, TypeName(v))
}

func shapeField(m *Map) ([]int, error) {
	v, ok := m.GetBin("shape")
	if !ok {
		return nil, fmt.Errorf("%w: missing shape", ErrArray)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: shape: want an array of integers, got %s", ErrArray, TypeName(v))
	}
	if len(list) > MaxDims {
		return nil, fmt.Errorf("%w: %d dimensions (at most %d)", ErrArray, len(list), MaxDims)
	}
	shape := make([]int, len(list))
	for i, x := range list {
		n, ok := x.(int64)
		if !ok || n < 0 || n > math.MaxInt32 {
			return nil, fmt.Errorf("%w: shape[%d]: want a non-negative integer, got %v", ErrArray, i, x)
		}
		shape[i] = int(n)
	}
	return shape, nil
}

func dataField(m *Map) ([]byte, error) {
	v, ok := m.GetBin("data")
	if !ok {
		return nil, fmt.Errorf("%w: missing data", ErrArray)
	}
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("%w: data: want bin, got %s", ErrArray, TypeName(v))
	}
	return b, nil
}

func (e *Encoder) encodeArray(a *Array) error {
	if _, ok := dtypes[a.DType]; !ok {
		return fmt.Errorf("wire: array dtype %q", a.DType)
	}
	switch e.Arrays {
	case EncodingMsgpackNumpy:
		e.MapHeader(5)
		e.Bin([]byte("nd"))
		e.buf = append(e.buf, 0xc3)
		e.Bin([]byte("type"))
		e.Str(a.DType)
		e.Bin([]byte("kind"))
		e.Bin(nil)
		e.Bin([]byte("shape"))
		e.Encode(a.Shape) //nolint:errcheck // []int never fails
		e.Bin([]byte("data"))
		e.Bin(a.Data)
	case EncodingOpenPI:
		e.MapHeader(4)
		e.Bin([]byte("__ndarray__"))
		e.buf = append(e.buf, 0xc3)
		e.Bin([]byte("data"))
		e.Bin(a.Data)
		e.Bin([]byte("dtype"))
		e.Str(a.DType)
		e.Bin([]byte("shape"))
		e.Encode(a.Shape) //nolint:errcheck // []int never fails
	default: // EncodingNPY, and arrays in a message that had none
		e.MapHeader(2)
		e.Str("__ndarray_class__")
		e.buf = append(e.buf, 0xc3)
		e.Str("as_npy")
		e.Bin(AppendNPY(nil, a))
	}
	return nil
}
