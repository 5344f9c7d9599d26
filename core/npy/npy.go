// Package npy reads and writes NumPy .npy files (format versions 1.0, 2.0
// and 3.0) holding little-endian, C-order arrays of a small set of dtypes:
// float32, float64, uint8, int32, int64 and bool.
//
// The package exists for golden tests and tools; it is not on a request
// path. Everything is held in memory. Fortran-order and big-endian arrays,
// structured dtypes and object arrays are rejected with an error naming the
// offending header field.
package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// DType names accepted and produced by this package (the NumPy names).
const (
	Float32 = "float32"
	Float64 = "float64"
	Uint8   = "uint8"
	Int32   = "int32"
	Int64   = "int64"
	Bool    = "bool"
)

// MaxHeaderLen bounds the header dictionary read by Read (bytes). NumPy
// itself refuses headers above 10 000 bytes by default; we accept up to
// 1 MiB so that arrays with very many dimensions still load.
const MaxHeaderLen = 1 << 20

// ErrFormat is wrapped by every error describing a malformed file, so callers
// can tell corrupt input (errors.Is(err, ErrFormat)) from I/O failures.
var ErrFormat = errors.New("npy: malformed file")

var magic = []byte("\x93NUMPY")

// descrs maps the header "descr" strings this package understands to DType
// names. '|' and '<' are both accepted for one-byte types, '<' and '=' are
// accepted for the others ('=' means native order, little-endian on every
// platform Go and NumPy share here).
var descrs = map[string]string{
	"<f4": Float32, "=f4": Float32,
	"<f8": Float64, "=f8": Float64,
	"|u1": Uint8, "<u1": Uint8, "=u1": Uint8,
	"<i4": Int32, "=i4": Int32,
	"<i8": Int64, "=i8": Int64,
	"|b1": Bool, "<b1": Bool, "=b1": Bool,
}

var descrOf = map[string]string{
	Float32: "<f4", Float64: "<f8", Uint8: "|u1", Int32: "<i4", Int64: "<i8", Bool: "|b1",
}

// ItemSize returns the byte size of one element of dtype, or 0 when the dtype
// is not one this package supports.
func ItemSize(dtype string) int {
	switch dtype {
	case Float32, Int32:
		return 4
	case Float64, Int64:
		return 8
	case Uint8, Bool:
		return 1
	}
	return 0
}

// Array is one decoded .npy array. Data holds the raw little-endian element
// bytes in C (row-major) order; len(Data) == NumElements()*ItemSize(DType).
// An empty Shape is a scalar (one element). The accessors copy Data into a
// fresh typed slice; Array has no internal synchronisation.
type Array struct {
	DType string // one of Float32, Float64, Uint8, Int32, Int64, Bool
	Shape []int  // dimensions, outermost first
	Data  []byte // raw little-endian element bytes
}

// NumElements returns the product of Shape (1 for a scalar).
func (a *Array) NumElements() int {
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

func (a *Array) check(dtype string) error {
	if a.DType != dtype {
		return fmt.Errorf("npy: array has dtype %s, not %s", a.DType, dtype)
	}
	if len(a.Data) != a.NumElements()*ItemSize(dtype) {
		return fmt.Errorf("npy: array of shape %v has %d data bytes, want %d", a.Shape, len(a.Data), a.NumElements()*ItemSize(dtype))
	}
	return nil
}

// Float32s returns the elements of a float32 array.
func (a *Array) Float32s() ([]float32, error) {
	if err := a.check(Float32); err != nil {
		return nil, err
	}
	out := make([]float32, len(a.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:]))
	}
	return out, nil
}

// Float64s returns the elements of a float64 array.
func (a *Array) Float64s() ([]float64, error) {
	if err := a.check(Float64); err != nil {
		return nil, err
	}
	out := make([]float64, len(a.Data)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(a.Data[8*i:]))
	}
	return out, nil
}

// Uint8s returns the elements of a uint8 array (a copy of Data).
func (a *Array) Uint8s() ([]uint8, error) {
	if err := a.check(Uint8); err != nil {
		return nil, err
	}
	return append([]uint8(nil), a.Data...), nil
}

// Int32s returns the elements of an int32 array.
func (a *Array) Int32s() ([]int32, error) {
	if err := a.check(Int32); err != nil {
		return nil, err
	}
	out := make([]int32, len(a.Data)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(a.Data[4*i:]))
	}
	return out, nil
}

// Int64s returns the elements of an int64 array.
func (a *Array) Int64s() ([]int64, error) {
	if err := a.check(Int64); err != nil {
		return nil, err
	}
	out := make([]int64, len(a.Data)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(a.Data[8*i:]))
	}
	return out, nil
}

// Bools returns the elements of a bool array (any non-zero byte is true).
func (a *Array) Bools() ([]bool, error) {
	if err := a.check(Bool); err != nil {
		return nil, err
	}
	out := make([]bool, len(a.Data))
	for i, b := range a.Data {
		out[i] = b != 0
	}
	return out, nil
}

// ReadFile reads the .npy file at path. See Read.
func ReadFile(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	defer f.Close()
	a, err := Read(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// Read decodes one .npy array from r. It reads exactly the header and the
// data bytes and nothing after them. Errors describing malformed content
// wrap ErrFormat.
func Read(r io.Reader) (*Array, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, formatErr("reading magic: %v", err)
	}
	if !bytes.Equal(pre[:6], magic) {
		return nil, formatErr("bad magic %q", pre[:6])
	}
	major, minor := pre[6], pre[7]
	var hlen int
	switch major {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, formatErr("reading header length: %v", err)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, formatErr("reading header length: %v", err)
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n > MaxHeaderLen {
			return nil, formatErr("header length %d exceeds %d", n, MaxHeaderLen)
		}
		hlen = int(n)
	default:
		return nil, formatErr("unsupported format version %d.%d", major, minor)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, formatErr("reading %d-byte header: %v", hlen, err)
	}
	dtype, shape, err := parseHeader(string(hdr))
	if err != nil {
		return nil, err
	}
	n, ok := numBytes(shape, ItemSize(dtype))
	if !ok {
		return nil, formatErr("shape %v overflows", shape)
	}
	// Read incrementally so a lying header cannot make us allocate more
	// than the stream actually holds.
	var buf bytes.Buffer
	got, err := io.CopyN(&buf, r, int64(n))
	if err != nil {
		return nil, formatErr("shape %v needs %d data bytes, file has %d: %v", shape, n, got, err)
	}
	return &Array{DType: dtype, Shape: shape, Data: buf.Bytes()}, nil
}

func numBytes(shape []int, item int) (int, bool) {
	n := item
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d != 0 && n > math.MaxInt64/4/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

func formatErr(f string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(f, args...))
}

// parseHeader parses a header read by Read and checks it against the
// dtypes and the C order this package supports.
func parseHeader(h string) (dtype string, shape []int, err error) {
	hd, err := ParseHeader(h)
	if err != nil {
		return "", nil, formatErr("header: %v", err)
	}
	dt, ok := descrs[hd.Descr]
	if !ok {
		return "", nil, formatErr("header: unsupported descr %q (want one of <f4 <f8 |u1 <i4 <i8 |b1)", hd.Descr)
	}
	if hd.Fortran {
		return "", nil, formatErr("header: fortran_order True is not supported")
	}
	return dt, hd.Shape, nil
}

// Header is a .npy header's dictionary.
type Header struct {
	// Descr is the dtype as written, e.g. "<f4" (a str: structured dtypes
	// are refused by ParseHeader).
	Descr string
	// Fortran is fortran_order.
	Fortran bool
	// Shape is the shape tuple; empty for a 0-d array.
	Shape []int
}

// ParseHeader parses a .npy header's Python dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }: exactly the
// keys 'descr' (a str without escapes), 'fortran_order' (True or False)
// and 'shape' (a tuple of non-negative integers of at most 18 digits,
// Python 2's 3L accepted; the header's length bounds their number), in any order, each once,
// with an optional trailing comma and trailing padding (spaces, newlines,
// NULs). It is the one .npy header parser of the tree (Read here, the
// wire codec's ParseNPY). Errors name the key or offset at fault and do
// not wrap ErrFormat: callers say what they were reading.
func ParseHeader(h string) (Header, error) {
	var hd Header
	p := hparser{s: h}
	p.ws()
	if !p.eat('{') {
		return hd, fmt.Errorf("want a dict literal")
	}
	seen := map[string]bool{}
	for {
		p.ws()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return hd, err
		}
		if seen[key] {
			return hd, fmt.Errorf("key %q twice", key)
		}
		seen[key] = true
		p.ws()
		if !p.eat(':') {
			return hd, fmt.Errorf("want ':' after %q", key)
		}
		p.ws()
		switch key {
		case "descr":
			if hd.Descr, err = p.str(); err != nil {
				return hd, fmt.Errorf("descr: %v (structured dtypes are refused)", err)
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				hd.Fortran = true
			case p.word("False"):
			default:
				return hd, fmt.Errorf("fortran_order: want True or False")
			}
		case "shape":
			if hd.Shape, err = p.tuple(); err != nil {
				return hd, fmt.Errorf("shape: %v", err)
			}
		default:
			return hd, fmt.Errorf("unknown key %q", key)
		}
		p.ws()
		if p.eat(',') {
			continue
		}
		p.ws()
		if !p.eat('}') {
			return hd, fmt.Errorf("want ',' or '}' at offset %d", p.i)
		}
		break
	}
	if rest := strings.TrimRight(h[p.i:], " \n\x00"); rest != "" {
		return hd, fmt.Errorf("%d bytes after the dict", len(rest))
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return hd, fmt.Errorf("missing key %q", k)
		}
	}
	return hd, nil
}

// Decode reads the .npy file held in b without copying: its format
// version (1.0, 2.0 or 3.0), its header (at most maxHeader bytes,
// parsed by ParseHeader) and the data bytes after it, which alias b. The
// data's length is not checked against the header (the caller knows its
// dtypes' sizes). Errors do not wrap ErrFormat, as ParseHeader's.
func Decode(b []byte, maxHeader int) (Header, []byte, error) {
	if len(b) < 10 || !bytes.Equal(b[:6], magic) {
		return Header{}, nil, fmt.Errorf("not a .npy file (no \\x93NUMPY magic)")
	}
	major, minor := b[6], b[7]
	var hlen, off int
	switch major {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return Header{}, nil, fmt.Errorf("truncated before the header length")
		}
		u := binary.LittleEndian.Uint32(b[8:12])
		if u > uint32(maxHeader) {
			return Header{}, nil, fmt.Errorf("header of %d bytes (at most %d)", u, maxHeader)
		}
		hlen, off = int(u), 12
	default:
		return Header{}, nil, fmt.Errorf("format version %d.%d (want 1.0, 2.0 or 3.0)", major, minor)
	}
	if hlen > maxHeader {
		return Header{}, nil, fmt.Errorf("header of %d bytes (at most %d)", hlen, maxHeader)
	}
	if hlen > len(b)-off {
		return Header{}, nil, fmt.Errorf("header of %d bytes, %d left", hlen, len(b)-off)
	}
	hd, err := ParseHeader(string(b[off : off+hlen]))
	if err != nil {
		return Header{}, nil, fmt.Errorf("header: %w", err)
	}
	return hd, b[off+hlen:], nil
}

type hparser struct {
	s string
	i int
}

func (p *hparser) ws() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *hparser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *hparser) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *hparser) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("want a quoted string at offset %d", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at offset %d", p.i)
	}
	s := p.s[p.i+1 : p.i+1+end]
	if strings.IndexByte(s, '\\') >= 0 {
		return "", fmt.Errorf("escape in string at offset %d", p.i)
	}
	p.i += end + 2
	return s, nil
}

func (p *hparser) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, fmt.Errorf("want a tuple")
	}
	shape := []int{}
	for {
		p.ws()
		if p.eat(')') {
			return shape, nil
		}
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(p.s[p.i:j])
		if err != nil || j-p.i > 18 {
			return nil, fmt.Errorf("want a non-negative integer at offset %d", p.i)
		}
		p.i = j
		p.eat('L') // Python 2 era headers wrote long integers as 3L
		shape = append(shape, n)
		p.ws()
		if p.eat(',') {
			continue
		}
		p.ws()
		if !p.eat(')') {
			return nil, fmt.Errorf("want ',' or ')' at offset %d", p.i)
		}
		return shape, nil
	}
}

// WriteFile writes data as a version 1.0 .npy file at path (created or
// truncated, mode 0644). See Write.
func WriteFile(path string, shape []int, data any) error {
	var buf bytes.Buffer
	if err := Write(&buf, shape, data); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	return nil
}

// Write encodes data with the given shape as a .npy stream (version 1.0, or
// 2.0 when the header does not fit 65535 bytes). data must be a []float32,
// []float64, []uint8, []int32, []int64 or []bool whose length equals the
// product of shape.
func Write(w io.Writer, shape []int, data any) error {
	var dtype string
	var raw []byte
	var n int
	switch v := data.(type) {
	case []float32:
		dtype, n = Float32, len(v)
		raw = make([]byte, 4*n)
		for i, x := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		}
	case []float64:
		dtype, n = Float64, len(v)
		raw = make([]byte, 8*n)
		for i, x := range v {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(x))
		}
	case []uint8:
		dtype, n, raw = Uint8, len(v), v
	case []int32:
		dtype, n = Int32, len(v)
		raw = make([]byte, 4*n)
		for i, x := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
		}
	case []int64:
		dtype, n = Int64, len(v)
		raw = make([]byte, 8*n)
		for i, x := range v {
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(x))
		}
	case []bool:
		dtype, n = Bool, len(v)
		raw = make([]byte, n)
		for i, x := range v {
			if x {
				raw[i] = 1
			}
		}
	default:
		return fmt.Errorf("npy: unsupported data type %T", data)
	}
	want := 1
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("npy: negative dimension in shape %v", shape)
		}
		want *= d
	}
	if want != n {
		return fmt.Errorf("npy: shape %v needs %d elements, data has %d", shape, want, n)
	}
	var sb strings.Builder
	sb.WriteString("{'descr': '")
	sb.WriteString(descrOf[dtype])
	sb.WriteString("', 'fortran_order': False, 'shape': ")
	sb.WriteString(ShapeTuple(shape))
	sb.WriteString(", }")
	hdr := sb.String()
	// Pad with spaces so that magic+version+len+header+'\n' is a multiple of 64.
	pre := 10
	major := byte(1)
	if len(hdr)+1+pre > 65535 {
		pre, major = 12, 2
	}
	total := pre + len(hdr) + 1
	pad := (64 - total%64) % 64
	hdr += strings.Repeat(" ", pad) + "\n"
	out := make([]byte, 0, pre+len(hdr))
	out = append(out, magic...)
	out = append(out, major, 0)
	if major == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(hdr)))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(hdr)))
	}
	out = append(out, hdr...)
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	if _, err := w.Write(raw); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	return nil
}

// ShapeTuple formats a shape as Python prints a tuple, as the .npy header
// spells it: (2, 3), (9,), ().
func ShapeTuple(shape []int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}
