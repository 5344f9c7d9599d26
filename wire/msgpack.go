// Package wire is the one wire codec of the gateway: every front end
// (HTTP's msgpack bodies and responses, frontend/zmq, frontend/openpi) and
// every client decodes and encodes msgpack here. It holds a
// bounds-checked, allocation-limited msgpack decoder that keeps map keys'
// kind (str or bin), a msgpack encoder that writes bin keys as bin and
// structs by their msgpack tags, the three numpy array encodings found in
// the field (Isaac-GR00T N1.7's .npy-in-msgpack, msgpack_numpy's bin-keyed
// maps, openpi's bin-keyed maps) plus .npy itself (its header read by
// core/npy's parser, the one in the tree), and the field error every
// protocol reports (FieldError: a Path and what is wrong, so a protocol
// renames a field by editing its path).
//
// Everything here parses untrusted bytes: every declared length is checked
// against the bytes that are actually there before anything is allocated,
// nesting is bounded, and the number of decoded elements is capped
// (Limits), so a message of n bytes costs O(n) memory whatever it claims.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// ErrMsgpack is wrapped by every msgpack decoding error.
var ErrMsgpack = errors.New("msgpack")

// DecodeError is a msgpack decoding error: what is wrong (Msg) at which
// byte (Offset). It matches ErrMsgpack (errors.Is).
type DecodeError struct {
	Offset int
	Msg    string
	// OverLimit is set when the value is well-formed so far but exceeds
	// MaxElements or MaxValues (a message too large, not a malformed one).
	OverLimit bool
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("%v: offset %d: %s", ErrMsgpack, e.Offset, e.Msg)
}

// Is reports whether target is ErrMsgpack.
func (e *DecodeError) Is(target error) bool { return target == ErrMsgpack }

// Limits bound what Decode builds. Zero fields take the defaults.
type Limits struct {
	// MaxDepth bounds nesting (default 64).
	MaxDepth int
	// MaxElements bounds the array elements plus map entries of the whole
	// value (default 1<<20): each costs a few words of memory however small
	// its encoding, so this caps the decoded tree at tens of MB.
	MaxElements int
	// MaxValues, when > 0, bounds every decoded value, map keys and
	// containers included (the HTTP body's bound, which counts as its JSON
	// parser does); 0: no bound besides MaxElements.
	MaxValues int
	// DuplicateKeys keeps a map's duplicate keys (both entries, in wire
	// order) where Decode otherwise refuses them; for a reader that lets
	// the last one win, as JSON readers do.
	DuplicateKeys bool
}

// DefaultLimits are the limits of a zero Limits.
var DefaultLimits = Limits{MaxDepth: 64, MaxElements: 1 << 20}

// Key is one map key: its text and whether it was msgpack bin (Python
// bytes, b"nd") rather than str.
type Key struct {
	Name string
	Bin  bool
}

// Map is a decoded msgpack map in wire order. Keys are unique (a
// duplicate is a decoding error): a str key and a bin key with the same
// text are different keys, as in Python. Build one for encoding with
// NewMap and Set / SetBin.
type Map struct {
	Keys   []Key
	Values []any
}

// NewMap returns an empty map with room for n entries.
func NewMap(n int) *Map { return &Map{Keys: make([]Key, 0, n), Values: make([]any, 0, n)} }

// Set appends the str key name with value v and returns m.
func (m *Map) Set(name string, v any) *Map {
	m.Keys = append(m.Keys, Key{Name: name})
	m.Values = append(m.Values, v)
	return m
}

// SetBin appends the bin key name with value v and returns m.
func (m *Map) SetBin(name string, v any) *Map {
	m.Keys = append(m.Keys, Key{Name: name, Bin: true})
	m.Values = append(m.Values, v)
	return m
}

// Len is the number of entries.
func (m *Map) Len() int { return len(m.Keys) }

// Get returns the value of the str key name.
func (m *Map) Get(name string) (any, bool) { return m.get(name, false) }

// GetBin returns the value of the bin key name.
func (m *Map) GetBin(name string) (any, bool) { return m.get(name, true) }

// As returns the value of m's str key name as a T; ok is false when the
// key is absent or its value is not a T (v is then T's zero value).
func As[T any](m *Map, name string) (v T, ok bool) {
	x, _ := m.Get(name)
	v, ok = x.(T)
	return v, ok
}

func (m *Map) get(name string, bin bool) (any, bool) {
	for i, k := range m.Keys {
		if k.Name == name && k.Bin == bin {
			return m.Values[i], true
		}
	}
	return nil, false
}

// Decode decodes exactly one msgpack value of b into a tree of nil, bool,
// int64 (every integer that fits; uint64 above math.MaxInt64), float32,
// float64, string, []byte (bin: a sub-slice of b, not a copy — valid while
// b is), []any and *Map. Extension types are rejected. Errors wrap
// ErrMsgpack and give the byte offset.
func Decode(b []byte, lim Limits) (any, error) {
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultLimits.MaxDepth
	}
	if lim.MaxElements <= 0 {
		lim.MaxElements = DefaultLimits.MaxElements
	}
	d := decoder{b: b, budget: lim.MaxElements, maxDepth: lim.MaxDepth, values: lim.MaxValues, dupOK: lim.DuplicateKeys}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.i != len(d.b) {
		return nil, d.errorf("%d bytes after the msgpack value", len(d.b)-d.i)
	}
	return v, nil
}

type decoder struct {
	b        []byte
	i        int
	budget   int
	maxDepth int
	values   int // MaxValues; 0: unbounded
	nvalues  int
	dupOK    bool
}

func (d *decoder) errorf(format string, args ...any) error {
	return &DecodeError{Offset: d.i, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 || n > len(d.b)-d.i {
		return nil, d.errorf("truncated: need %d bytes, %d left", n, len(d.b)-d.i)
	}
	s := d.b[d.i : d.i+n : d.i+n]
	d.i += n
	return s, nil
}

func (d *decoder) uint(size int) (uint64, error) {
	s, err := d.take(size)
	if err != nil {
		return 0, err
	}
	var u uint64
	for _, x := range s {
		u = u<<8 | uint64(x)
	}
	return u, nil
}

func (d *decoder) length(size int) (int, error) {
	u, err := d.uint(size)
	return int(u), err // at most 32 bits: fits int on every 64-bit platform
}

// reserve charges n elements (each needing at least per bytes) against the
// byte and element budgets before anything is allocated.
func (d *decoder) reserve(n, per int, what string) error {
	if n > (len(d.b)-d.i)/per {
		return d.errorf("%s of %d elements in %d bytes", what, n, len(d.b)-d.i)
	}
	if n > d.budget {
		err := d.errorf("%s of %d elements: over the limit of %d elements per message", what, n, d.budget)
		err.(*DecodeError).OverLimit = true
		return err
	}
	d.budget -= n
	return nil
}

func (d *decoder) value(depth int) (any, error) {
	if depth > d.maxDepth {
		return nil, d.errorf("nested deeper than %d", d.maxDepth)
	}
	if d.values > 0 {
		if d.nvalues++; d.nvalues > d.values {
			return nil, &DecodeError{Offset: d.i, Msg: fmt.Sprintf("more than %d values", d.values), OverLimit: true}
		}
	}
	s, err := d.take(1)
	if err != nil {
		return nil, err
	}
	c := s[0]
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c <= 0x8f:
		return d.mapN(int(c&0x0f), depth)
	case c <= 0x9f:
		return d.arrayN(int(c&0x0f), depth)
	case c <= 0xbf:
		return d.str(int(c & 0x1f))
	}
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xc4, 0xc5, 0xc6:
		n, err := d.length(1 << (c - 0xc4))
		if err != nil {
			return nil, err
		}
		return d.take(n)
	case 0xca:
		u, err := d.uint(4)
		return math.Float32frombits(uint32(u)), err
	case 0xcb:
		u, err := d.uint(8)
		return math.Float64frombits(u), err
	case 0xcc, 0xcd, 0xce, 0xcf:
		u, err := d.uint(1 << (c - 0xcc))
		if err != nil {
			return nil, err
		}
		if u > math.MaxInt64 {
			return u, nil
		}
		return int64(u), nil
	case 0xd0, 0xd1, 0xd2, 0xd3:
		size := 1 << (c - 0xd0)
		u, err := d.uint(size)
		if err != nil {
			return nil, err
		}
		shift := 64 - 8*size
		return int64(u<<shift) >> shift, nil
	case 0xd9, 0xda, 0xdb:
		n, err := d.length(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
		return d.str(n)
	case 0xdc, 0xdd:
		n, err := d.length(2 << (c - 0xdc))
		if err != nil {
			return nil, err
		}
		return d.arrayN(n, depth)
	case 0xde, 0xdf:
		n, err := d.length(2 << (c - 0xde))
		if err != nil {
			return nil, err
		}
		return d.mapN(n, depth)
	}
	d.i--
	return nil, d.errorf("unsupported msgpack type 0x%02x (extension types are not accepted)", c)
}

func (d *decoder) str(n int) (string, error) {
	s, err := d.take(n)
	if err != nil {
		return "", err
	}
	return string(s), nil
}

func (d *decoder) arrayN(n, depth int) (any, error) {
	if err := d.reserve(n, 1, "array"); err != nil {
		return nil, err
	}
	a := make([]any, n)
	for k := range a {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a[k] = v
	}
	return a, nil
}

// smallMap is the largest map whose duplicate-key check is a scan.
const smallMap = 16

func (d *decoder) mapN(n, depth int) (any, error) {
	if err := d.reserve(n, 2, "map"); err != nil {
		return nil, err
	}
	m := &Map{Keys: make([]Key, n), Values: make([]any, n)}
	// Small maps (every real observation) scan their keys; a large one
	// keeps a set, so a message of 2²⁰ distinct keys decodes in linear
	// time (a scan made it quadratic: minutes of CPU for a 5 MB frame).
	var seen map[Key]struct{}
	if n > smallMap && !d.dupOK {
		seen = make(map[Key]struct{})
	}
	for k := range n {
		at := d.i
		kv, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		var key Key
		switch x := kv.(type) {
		case string:
			key = Key{Name: x}
		case []byte:
			key = Key{Name: string(x), Bin: true}
		default:
			d.i = at
			return nil, d.errorf("map key of type %s, want str or bin", TypeName(kv))
		}
		dup := false
		switch {
		case d.dupOK:
		case seen != nil:
			_, dup = seen[key]
			seen[key] = struct{}{}
		default:
			dup = slices.Contains(m.Keys[:k], key)
		}
		if dup {
			d.i = at
			return nil, d.errorf("duplicate map key %q", key.Name)
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m.Keys[k], m.Values[k] = key, v
	}
	return m, nil
}

// TypeName names a decoded value's msgpack type for error messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "bool"
	case int64, uint64, int:
		return "int"
	case float32, float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bin"
	case []any:
		return "array"
	case *Map:
		return "map"
	case *Array:
		return "ndarray"
	}
	return fmt.Sprintf("%T", v)
}

// Encoder appends msgpack to a buffer. Arrays (*Array) are written in its
// Arrays encoding. The zero value writes arrays as EncodingNPY.
type Encoder struct {
	buf []byte
	// Arrays is how *Array values are written.
	Arrays Encoding
}

// Marshal encodes v with arrays in enc (see Encoder.Encode).
func Marshal(v any, enc Encoding) ([]byte, error) {
	e := Encoder{Arrays: enc}
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return e.Bytes(), nil
}

// Bytes returns the encoded bytes.
func (e *Encoder) Bytes() []byte { return e.buf }

// Encode appends v: nil, bool, every Go integer type, float32, float64,
// string (str), []byte (bin), []any, []string, []int, []float64 (as
// float64s), map[string]any (str keys, sorted), *Map (its order and key
// kinds) and *Array; and, through reflection, structs (see encodeStruct),
// pointers (nil: nil), other slices and arrays, and other maps with
// string keys (sorted). Integers take their shortest form.
func (e *Encoder) Encode(v any) error {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, 0xc0)
	case bool:
		if x {
			e.buf = append(e.buf, 0xc3)
		} else {
			e.buf = append(e.buf, 0xc2)
		}
	case int:
		e.Int(int64(x))
	case int8:
		e.Int(int64(x))
	case int16:
		e.Int(int64(x))
	case int32:
		e.Int(int64(x))
	case int64:
		e.Int(x)
	case uint8:
		e.Uint(uint64(x))
	case uint16:
		e.Uint(uint64(x))
	case uint32:
		e.Uint(uint64(x))
	case uint64:
		e.Uint(x)
	case uint:
		e.Uint(uint64(x))
	case float32:
		e.buf = append(e.buf, 0xca)
		e.buf = binary.BigEndian.AppendUint32(e.buf, math.Float32bits(x))
	case float64:
		e.Float64(x)
	case string:
		e.Str(x)
	case []byte:
		e.Bin(x)
	case []any:
		e.ArrayHeader(len(x))
		for _, y := range x {
			if err := e.Encode(y); err != nil {
				return err
			}
		}
	case []string:
		e.ArrayHeader(len(x))
		for _, y := range x {
			e.Str(y)
		}
	case []int:
		e.ArrayHeader(len(x))
		for _, y := range x {
			e.Int(int64(y))
		}
	case []float64:
		e.ArrayHeader(len(x))
		for _, y := range x {
			e.Float64(y)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		e.MapHeader(len(x))
		for _, k := range keys {
			e.Str(k)
			if err := e.Encode(x[k]); err != nil {
				return err
			}
		}
	case *Map:
		e.MapHeader(x.Len())
		for i, k := range x.Keys {
			if k.Bin {
				e.Bin([]byte(k.Name))
			} else {
				e.Str(k.Name)
			}
			if err := e.Encode(x.Values[i]); err != nil {
				return err
			}
		}
	case *Array:
		return e.encodeArray(x)
	default:
		return e.encodeValue(reflect.ValueOf(v))
	}
	return nil
}

// Int appends a signed integer in its shortest form.
func (e *Encoder) Int(x int64) {
	switch {
	case x >= 0:
		e.Uint(uint64(x))
	case x >= -32:
		e.buf = append(e.buf, byte(int8(x)))
	case x >= math.MinInt8:
		e.buf = append(e.buf, 0xd0, byte(int8(x)))
	case x >= math.MinInt16:
		e.buf = append(e.buf, 0xd1)
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(int16(x)))
	case x >= math.MinInt32:
		e.buf = append(e.buf, 0xd2)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(int32(x)))
	default:
		e.buf = append(e.buf, 0xd3)
		e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(x))
	}
}

// Uint appends an unsigned integer in its shortest form.
func (e *Encoder) Uint(x uint64) {
	switch {
	case x <= 0x7f:
		e.buf = append(e.buf, byte(x))
	case x <= math.MaxUint8:
		e.buf = append(e.buf, 0xcc, byte(x))
	case x <= math.MaxUint16:
		e.buf = append(e.buf, 0xcd)
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(x))
	case x <= math.MaxUint32:
		e.buf = append(e.buf, 0xce)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(x))
	default:
		e.buf = append(e.buf, 0xcf)
		e.buf = binary.BigEndian.AppendUint64(e.buf, x)
	}
}

// Float64 appends a float64.
func (e *Encoder) Float64(x float64) {
	e.buf = append(e.buf, 0xcb)
	e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(x))
}

// Str appends a str.
func (e *Encoder) Str(s string) {
	n := len(s)
	switch {
	case n <= 31:
		e.buf = append(e.buf, 0xa0|byte(n))
	case n <= math.MaxUint8:
		e.buf = append(e.buf, 0xd9, byte(n))
	case n <= math.MaxUint16:
		e.buf = append(e.buf, 0xda)
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(n))
	default:
		e.buf = append(e.buf, 0xdb)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
	}
	e.buf = append(e.buf, s...)
}

// Bin appends a bin.
func (e *Encoder) Bin(b []byte) {
	n := len(b)
	switch {
	case n <= math.MaxUint8:
		e.buf = append(e.buf, 0xc4, byte(n))
	case n <= math.MaxUint16:
		e.buf = append(e.buf, 0xc5)
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(n))
	default:
		e.buf = append(e.buf, 0xc6)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
	}
	e.buf = append(e.buf, b...)
}

// ArrayHeader appends the header of an array of n elements.
func (e *Encoder) ArrayHeader(n int) {
	switch {
	case n <= 15:
		e.buf = append(e.buf, 0x90|byte(n))
	case n <= math.MaxUint16:
		e.buf = append(e.buf, 0xdc)
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(n))
	default:
		e.buf = append(e.buf, 0xdd)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
	}
}

// MapHeader appends the header of a map of n entries.
func (e *Encoder) MapHeader(n int) {
	switch {
	case n <= 15:
		e.buf = append(e.buf, 0x80|byte(n))
	case n <= math.MaxUint16:
		e.buf = append(e.buf, 0xde)
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(n))
	default:
		e.buf = append(e.buf, 0xdf)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
	}
}

// encodeValue appends what Encode's type switch does not list.
func (e *Encoder) encodeValue(rv reflect.Value) error {
	switch rv.Kind() {
	case reflect.Invalid:
		e.buf = append(e.buf, 0xc0)
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			e.buf = append(e.buf, 0xc0)
			return nil
		}
		return e.Encode(rv.Elem().Interface())
	case reflect.Struct:
		return e.encodeStruct(rv)
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("wire: cannot encode %s: map keys must be strings", rv.Type())
		}
		if rv.IsNil() {
			e.buf = append(e.buf, 0xc0)
			return nil
		}
		keys := rv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		e.MapHeader(len(keys))
		for _, k := range keys {
			e.Str(k.String())
			if err := e.encodeElem(rv.MapIndex(k)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if rv.IsNil() {
			e.buf = append(e.buf, 0xc0)
			return nil
		}
		fallthrough
	case reflect.Array:
		e.ArrayHeader(rv.Len())
		for i := range rv.Len() {
			if err := e.encodeElem(rv.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Bool:
		return e.Encode(rv.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.Int(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.Uint(rv.Uint())
	case reflect.Float32:
		return e.Encode(float32(rv.Float()))
	case reflect.Float64:
		e.Float64(rv.Float())
	case reflect.String:
		e.Str(rv.String())
	default:
		return fmt.Errorf("wire: cannot encode %s", rv.Type())
	}
	return nil
}

// encodeElem appends a struct field, map value or element reached by
// reflection: a nil slice or map is nil there (Encode's typed cases write
// a nil []string as an empty array).
func (e *Encoder) encodeElem(v reflect.Value) error {
	if (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.IsNil() {
		e.buf = append(e.buf, 0xc0)
		return nil
	}
	return e.Encode(v.Interface())
}

// structField is one encoded field of a struct type.
type structField struct {
	name      string
	index     int
	omitEmpty bool
}

var structFields sync.Map // reflect.Type → []structField

// fieldsOf lists t's exported fields as its `msgpack` tags name them
// ("name,omitempty"; "-" skips a field; no tag: the Go name), in
// declaration order.
func fieldsOf(t reflect.Type) []structField {
	if fs, ok := structFields.Load(t); ok {
		return fs.([]structField)
	}
	var fs []structField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("msgpack")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fs = append(fs, structField{name: name, index: i, omitEmpty: opts == "omitempty"})
	}
	structFields.Store(t, fs)
	return fs
}

// encodeStruct appends a struct as a map of its fields in declaration
// order, keyed by their msgpack tags; an omitempty field is left out
// when it is empty (false, 0, "", a nil pointer, an empty slice or map),
// as vmihailenco/msgpack did for the HTTP responses.
func (e *Encoder) encodeStruct(rv reflect.Value) error {
	fs := fieldsOf(rv.Type())
	n := 0
	for _, f := range fs {
		if !f.omitEmpty || !isEmpty(rv.Field(f.index)) {
			n++
		}
	}
	e.MapHeader(n)
	for _, f := range fs {
		fv := rv.Field(f.index)
		if f.omitEmpty && isEmpty(fv) {
			continue
		}
		e.Str(f.name)
		if err := e.encodeElem(fv); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Struct:
		return false
	}
	return v.IsZero()
}
