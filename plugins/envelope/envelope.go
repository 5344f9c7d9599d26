// Package envelope implements GWT1, the compact little-endian tensor
// envelope that carries pre/post inputs and outputs across the gwabi v1
// boundary (see plugins/ABI.md §4).
//
// Layout (all integers little-endian, offsets from the envelope start):
//
//	header  24 bytes: magic "GWT1", u16 version (1), u16 n_tensors,
//	        u32 attrs_len, u32 table_len, u32 total_len, u32 reserved (0)
//	attrs   attrs_len bytes at offset 24: u32 count, then per attribute
//	        u16 key_len, u16 0, u32 value_len, key bytes, value bytes;
//	        zero-padded to a multiple of 8
//	table   table_len bytes (multiple of 8), one entry per tensor:
//	        u16 name_len, u8 dtype, u8 rank, u32 flags, u64 data_off,
//	        u64 data_len, i64 dims[rank], name bytes, zero-padded to 8
//	data    each tensor's bytes at an 8-byte aligned data_off, row-major
//
// The package has no dependencies beyond the standard library's
// encoding/binary, math and unsafe (and plugins/internal/wasmstr, which
// uses only unsafe and unicode/utf8), so guests built with GOOS=wasip1
// (or TinyGo) can use it. Decoding is zero-copy: tensors and attributes alias
// the decoded buffer.
package envelope

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/gr00tgw/gr00tgw/plugins/internal/wasmstr"
)

// Magic is the first four bytes of every envelope.
const Magic = "GWT1"

// Version is the envelope format version written in the header.
const Version = 1

// HeaderSize is the fixed header size in bytes.
const HeaderSize = 24

// Limits enforced by Decode.
const (
	MaxTensors = 64
	MaxRank    = 6
	MaxAttrs   = 64
)

// DType is a tensor element type (OIP datatype names).
type DType uint8

// Element types.
const (
	Bool  DType = 1
	Uint8 DType = 2
	Int32 DType = 3
	Int64 DType = 4
	FP16  DType = 5
	BF16  DType = 6
	FP32  DType = 7
	FP64  DType = 8
)

// Size returns the element size in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case Bool, Uint8:
		return 1
	case FP16, BF16:
		return 2
	case Int32, FP32:
		return 4
	case Int64, FP64:
		return 8
	}
	return 0
}

// String returns the OIP name of d.
func (d DType) String() string {
	if int(d) < len(dtypeNames) && dtypeNames[d] != "" {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// dtypeNames is indexed by DType; 0 is not a type.
var dtypeNames = [...]string{Bool: "BOOL", Uint8: "UINT8", Int32: "INT32", Int64: "INT64", FP16: "FP16", BF16: "BF16", FP32: "FP32", FP64: "FP64"}

// FlagByHandle marks a descriptor-only tensor: dims and dtype are set, no
// data is carried (data_off = data_len = 0). Images cross the boundary this
// way in ABI v1.
const FlagByHandle uint32 = 1

// ErrMalformed is wrapped by every Decode error.
var ErrMalformed = errors.New("envelope: malformed")

// Tensor is one decoded tensor. Data aliases the decoded buffer.
type Tensor struct {
	Name  string
	DType DType
	Flags uint32
	Dims  []int64
	Data  []byte
}

// NumElements returns the product of Dims (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Float32s returns the tensor's FP32 data. It aliases the buffer when the
// data is 4-byte aligned (always the case for buffers from gw_alloc or Go
// allocations) and copies otherwise.
func (t *Tensor) Float32s() ([]float32, error) {
	if t.DType != FP32 {
		return nil, fmt.Errorf("envelope: tensor[%s]: dtype %s, want FP32", t.Name, t.DType)
	}
	n := len(t.Data) / 4
	if n == 0 {
		return []float32{}, nil
	}
	if uintptr(unsafe.Pointer(&t.Data[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&t.Data[0])), n), nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// Float64s returns the tensor's FP64 data, aliasing when 8-byte aligned.
func (t *Tensor) Float64s() ([]float64, error) {
	if t.DType != FP64 {
		return nil, fmt.Errorf("envelope: tensor[%s]: dtype %s, want FP64", t.Name, t.DType)
	}
	n := len(t.Data) / 8
	if n == 0 {
		return []float64{}, nil
	}
	if uintptr(unsafe.Pointer(&t.Data[0]))%8 == 0 {
		return unsafe.Slice((*float64)(unsafe.Pointer(&t.Data[0])), n), nil
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return out, nil
}

// Attr is one key/value attribute; both alias the decoded buffer.
type Attr struct {
	Key   string
	Value string
}

// Envelope is a decoded envelope. The zero value is ready for Decode, and
// an Envelope may be reused across Decode calls to avoid allocations.
type Envelope struct {
	Attrs   []Attr
	Tensors []Tensor
	dims    []int64 // backing store for every tensor's Dims, reused

	// The last successful Decode's buffer (address and length) and a copy
	// of its header and tensor table: a buffer that matches all three
	// decodes to the same Tensors, so only the attributes are read again.
	lastBuf *byte
	lastLen int
	layout  []byte
	reused  bool
}

// Reused reports whether the last Decode kept the Tensors of the Decode
// before it: the same buffer (address and length) carried a byte-identical
// header and tensor table, so every Tensor field, Data included, is what a
// full decode would give. Only Attrs were decoded again. A caller that
// derived values from Tensors may keep them when Reused is true.
func (e *Envelope) Reused() bool { return e.reused }

// Attr returns the value of attribute key and whether it is present.
func (e *Envelope) Attr(key string) (string, bool) {
	for i := range e.Attrs {
		if wasmstr.Equal(e.Attrs[i].Key, key) {
			return e.Attrs[i].Value, true
		}
	}
	return "", false
}

// Tensor returns the tensor named name, or nil.
func (e *Envelope) Tensor(name string) *Tensor {
	for i := range e.Tensors {
		if wasmstr.Equal(e.Tensors[i].Name, name) {
			return &e.Tensors[i]
		}
	}
	return nil
}

var le = binary.LittleEndian

// Decode parses buf into e, replacing its contents (slices from an earlier
// Decode on e, such as Tensor.Dims, are reused). Every offset, length,
// dtype and rank is checked against buf; strings and tensor data alias buf
// (unsafe.String), so buf must not be modified while e is in use.
//
// A well-formed envelope takes decodeFast, which makes the same checks
// but folds each entry's into one branch (a wasm guest pays for every
// branch); anything it does not accept is decoded again by decodeChecked,
// which reports the first problem. When buf is the previous call's buffer
// with the same header and table (a plugin host reuses one input buffer,
// and a stage's requests share their layout), the tensors are kept and
// only the attributes are decoded (see Reused). Callers must not modify
// Tensors or their Dims.
func (e *Envelope) Decode(buf []byte) error {
	// Reuse when buf is the remembered buffer with the same header and
	// table bytes (written out here, not a call: one call fewer per
	// request in a wasm guest).
	if e.lastBuf != nil && len(buf) == e.lastLen && &buf[0] == e.lastBuf {
		l := e.layout
		h, k := (*[HeaderSize]byte)(buf), (*[HeaderSize]byte)(l)
		attrsLen := uint64(le.Uint32(buf[8:]))
		tableStart := align8(HeaderSize + attrsLen)
		if (le.Uint64(h[0:])^le.Uint64(k[0:]))|(le.Uint64(h[8:])^le.Uint64(k[8:]))|(le.Uint64(h[16:])^le.Uint64(k[16:])) == 0 &&
			sameBytes(buf[tableStart:tableStart+uint64(len(l)-HeaderSize)], l[HeaderSize:]) {
			e.Attrs = e.Attrs[:0]
			if e.decodeAttrs(buf[HeaderSize:HeaderSize+attrsLen]) == nil {
				e.reused = true
				return nil
			}
		}
	}
	e.reused, e.lastBuf = false, nil
	if e.decodeFast(buf) {
		e.remember(buf)
		return nil
	}
	if err := e.decodeChecked(buf); err != nil {
		return err
	}
	e.remember(buf)
	return nil
}

// remember records buf as the last successfully decoded buffer.
func (e *Envelope) remember(buf []byte) {
	tableStart := align8(HeaderSize + uint64(le.Uint32(buf[8:])))
	tableEnd := tableStart + uint64(le.Uint32(buf[12:]))
	e.layout = append(append(e.layout[:0], buf[:HeaderSize]...), buf[tableStart:tableEnd]...)
	e.lastBuf, e.lastLen = &buf[0], len(buf)
}

// sameBytes compares equal-length a and b 64 bytes per step (few loop
// iterations: in a wasm guest every back-edge costs). The XORs need their
// parentheses: ^ and | share a precedence level in Go.
func sameBytes(a, b []byte) bool {
	n := len(a)
	if n != len(b) {
		return false
	}
	i := 0
	for ; i+64 <= n; i += 64 {
		x := (*[64]byte)(a[i:])
		y := (*[64]byte)(b[i:])
		if (le.Uint64(x[0:])^le.Uint64(y[0:]))|(le.Uint64(x[8:])^le.Uint64(y[8:]))|
			(le.Uint64(x[16:])^le.Uint64(y[16:]))|(le.Uint64(x[24:])^le.Uint64(y[24:]))|
			(le.Uint64(x[32:])^le.Uint64(y[32:]))|(le.Uint64(x[40:])^le.Uint64(y[40:]))|
			(le.Uint64(x[48:])^le.Uint64(y[48:]))|(le.Uint64(x[56:])^le.Uint64(y[56:])) != 0 {
			return false
		}
	}
	if i+32 <= n {
		x := (*[32]byte)(a[i:])
		y := (*[32]byte)(b[i:])
		if (le.Uint64(x[0:])^le.Uint64(y[0:]))|(le.Uint64(x[8:])^le.Uint64(y[8:]))|
			(le.Uint64(x[16:])^le.Uint64(y[16:]))|(le.Uint64(x[24:])^le.Uint64(y[24:])) != 0 {
			return false
		}
		i += 32
	}
	for ; i+8 <= n; i += 8 {
		if le.Uint64(a[i:]) != le.Uint64(b[i:]) {
			return false
		}
	}
	for ; i < n; i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// b2u is 1 for true: the compiler turns it into a zero-extension, so the
// conditions below are combined without branches.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// decodeFast is decodeChecked for well-formed input: it accepts exactly
// what decodeChecked accepts with the same result, or returns false
// (leaving e to be overwritten by decodeChecked).
func (e *Envelope) decodeFast(buf []byte) bool {
	e.Attrs = e.Attrs[:0]
	e.Tensors = e.Tensors[:0]
	e.dims = e.dims[:0]
	size := uint64(len(buf))
	if size < HeaderSize {
		return false
	}
	h := (*[HeaderSize]byte)(buf)
	nt := uint64(le.Uint16(h[6:]))
	attrsLen := uint64(le.Uint32(h[8:]))
	tableLen := uint64(le.Uint32(h[12:]))
	total := uint64(le.Uint32(h[16:]))
	attrsEnd := HeaderSize + attrsLen
	tableStart := align8(attrsEnd)
	tableEnd := tableStart + tableLen
	if b2u(le.Uint32(h[:]) != magicLE)|b2u(le.Uint16(h[4:]) != Version)|b2u(total != size)|
		b2u(nt > MaxTensors)|b2u(tableEnd > total) != 0 {
		return false
	}
	if attrsLen > 0 {
		a := buf[HeaderSize:attrsEnd]
		if len(a) < 4 {
			return false
		}
		n := uint64(le.Uint32(a))
		if n > MaxAttrs {
			return false
		}
		off, end := uint64(4), uint64(len(a))
		for i := uint64(0); i < n; i++ {
			if off+8 > end {
				return false
			}
			kl := uint64(le.Uint16(a[off:]))
			stop := off + 8 + kl + uint64(le.Uint32(a[off+4:]))
			if stop > end {
				return false
			}
			e.Attrs = append(e.Attrs, Attr{Key: unsafeString(a[off+8 : off+8+kl]), Value: unsafeString(a[off+8+kl : stop])})
			off = stop
		}
	}
	off := tableStart
	for i := uint64(0); i < nt; i++ {
		if off+24 > tableEnd {
			return false
		}
		ent := (*[24]byte)(buf[off:])
		nameLen := uint64(le.Uint16(ent[0:]))
		dt := DType(ent[2])
		rank := uint64(ent[3])
		flags := le.Uint32(ent[4:])
		dataOff := le.Uint64(ent[8:])
		dataLen := le.Uint64(ent[16:])
		dimsEnd := off + 24 + 8*rank
		nameEnd := dimsEnd + nameLen
		if b2u(rank > MaxRank)|b2u(nameEnd > tableEnd)|b2u(dt.Size() == 0) != 0 {
			return false
		}
		if cap(e.dims)-len(e.dims) < int(rank) {
			// Grow without moving earlier tensors' Dims (they keep the old array).
			e.dims = make([]int64, 0, max(2*cap(e.dims), MaxTensors*2))
		}
		start := len(e.dims)
		e.dims = e.dims[:start+int(rank)]
		dims := e.dims[start : start+int(rank) : start+int(rank)]
		n, bad := uint64(1), uint64(0)
		for r := range dims {
			d := int64(le.Uint64(buf[off+24+8*uint64(r):]))
			dims[r] = d
			n *= uint64(d)
			bad |= b2u(d < 0) | b2u(d > 1<<31) | b2u(n > 1<<32)
		}
		t := Tensor{Name: unsafeString(buf[dimsEnd:nameEnd]), DType: dt, Flags: flags, Dims: dims}
		if flags&FlagByHandle != 0 {
			bad |= b2u(dataLen != 0)
		} else {
			end := dataOff + dataLen
			bad |= b2u(dataLen != n*uint64(dt.Size()))
			if dataLen > 0 {
				bad |= b2u(dataOff%8 != 0) | b2u(dataOff < tableEnd) | b2u(end > total) | b2u(end < dataOff)
				if bad != 0 {
					return false
				}
				t.Data = buf[dataOff:end:end]
			}
		}
		if bad != 0 {
			return false
		}
		e.Tensors = append(e.Tensors, t)
		off = align8(nameEnd)
	}
	return true
}

// magicLE is Magic as a little-endian u32.
var magicLE = le.Uint32([]byte(Magic))

// decodeChecked is Decode checking one condition at a time, for the error.
func (e *Envelope) decodeChecked(buf []byte) error {
	e.Attrs = e.Attrs[:0]
	e.Tensors = e.Tensors[:0]
	e.dims = e.dims[:0]
	if len(buf) < HeaderSize {
		return fmt.Errorf("%w: %d bytes, header needs %d", ErrMalformed, len(buf), HeaderSize)
	}
	if string(buf[:4]) != Magic {
		return fmt.Errorf("%w: magic %q, want %q", ErrMalformed, buf[:4], Magic)
	}
	if v := le.Uint16(buf[4:]); v != Version {
		return fmt.Errorf("%w: version %d, want %d", ErrMalformed, v, Version)
	}
	nt := int(le.Uint16(buf[6:]))
	attrsLen := uint64(le.Uint32(buf[8:]))
	tableLen := uint64(le.Uint32(buf[12:]))
	total := uint64(le.Uint32(buf[16:]))
	if total != uint64(len(buf)) {
		return fmt.Errorf("%w: total_len %d, buffer has %d bytes", ErrMalformed, total, len(buf))
	}
	if nt > MaxTensors {
		return fmt.Errorf("%w: %d tensors, limit %d", ErrMalformed, nt, MaxTensors)
	}
	attrsEnd := HeaderSize + attrsLen
	tableStart := align8(attrsEnd)
	tableEnd := tableStart + tableLen
	if tableEnd > total {
		return fmt.Errorf("%w: attrs %d + table %d bytes overrun %d", ErrMalformed, attrsLen, tableLen, total)
	}
	if err := e.decodeAttrs(buf[HeaderSize:attrsEnd]); err != nil {
		return err
	}
	off := tableStart
	for i := 0; i < nt; i++ {
		if off+24 > tableEnd {
			return fmt.Errorf("%w: tensor[%d]: table entry overruns table", ErrMalformed, i)
		}
		nameLen := uint64(le.Uint16(buf[off:]))
		dt := DType(buf[off+2])
		rank := uint64(buf[off+3])
		flags := le.Uint32(buf[off+4:])
		dataOff := le.Uint64(buf[off+8:])
		dataLen := le.Uint64(buf[off+16:])
		if rank > MaxRank {
			return fmt.Errorf("%w: tensor[%d]: rank %d, limit %d", ErrMalformed, i, rank, MaxRank)
		}
		dimsEnd := off + 24 + 8*rank
		nameEnd := dimsEnd + nameLen
		if nameEnd > tableEnd {
			return fmt.Errorf("%w: tensor[%d]: entry overruns table", ErrMalformed, i)
		}
		name := unsafeString(buf[dimsEnd:nameEnd])
		if dt.Size() == 0 {
			return fmt.Errorf("%w: tensor[%s]: unknown dtype %d", ErrMalformed, name, uint8(dt))
		}
		t := Tensor{Name: name, DType: dt, Flags: flags}
		if cap(e.dims)-len(e.dims) < int(rank) {
			// Grow without moving earlier tensors' Dims (they keep the old array).
			e.dims = make([]int64, 0, max(2*cap(e.dims), MaxTensors*2))
		}
		start := len(e.dims)
		e.dims = e.dims[:start+int(rank)]
		t.Dims = e.dims[start : start+int(rank) : start+int(rank)]
		n := uint64(1)
		for r := uint64(0); r < rank; r++ {
			d := int64(le.Uint64(buf[off+24+8*r:]))
			if d < 0 || d > 1<<31 {
				return fmt.Errorf("%w: tensor[%s]: dim[%d] = %d", ErrMalformed, name, r, d)
			}
			t.Dims[r] = d
			n *= uint64(d)
			if n > 1<<32 {
				return fmt.Errorf("%w: tensor[%s]: too many elements", ErrMalformed, name)
			}
		}
		if flags&FlagByHandle != 0 {
			if dataLen != 0 {
				return fmt.Errorf("%w: tensor[%s]: by-handle tensor carries %d data bytes", ErrMalformed, name, dataLen)
			}
		} else {
			if want := n * uint64(dt.Size()); dataLen != want {
				return fmt.Errorf("%w: tensor[%s]: shape %v %s needs %d bytes, entry says %d", ErrMalformed, name, t.Dims, dt, want, dataLen)
			}
			if dataLen > 0 {
				if dataOff%8 != 0 || dataOff < tableEnd || dataOff+dataLen > total || dataOff+dataLen < dataOff {
					return fmt.Errorf("%w: tensor[%s]: data [%d, +%d) outside data section [%d, %d) or unaligned", ErrMalformed, name, dataOff, dataLen, tableEnd, total)
				}
				t.Data = buf[dataOff : dataOff+dataLen : dataOff+dataLen]
			}
		}
		e.Tensors = append(e.Tensors, t)
		off = align8(nameEnd)
	}
	return nil
}

func (e *Envelope) decodeAttrs(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) < 4 {
		return fmt.Errorf("%w: attrs: %d bytes", ErrMalformed, len(b))
	}
	n := int(le.Uint32(b))
	if n > MaxAttrs {
		return fmt.Errorf("%w: %d attrs, limit %d", ErrMalformed, n, MaxAttrs)
	}
	// Assigned by index into the reused slice (append re-checks the
	// capacity per element, and every check is a branch in a wasm guest).
	attrs := e.Attrs[:0]
	if cap(attrs) < n {
		attrs = make([]Attr, 0, n)
	}
	attrs = attrs[:n]
	off := uint64(4)
	for i := range attrs {
		if off+8 > uint64(len(b)) {
			return fmt.Errorf("%w: attr[%d]: entry overruns attrs", ErrMalformed, i)
		}
		kl := uint64(le.Uint16(b[off:]))
		vl := uint64(le.Uint32(b[off+4:]))
		end := off + 8 + kl + vl
		if end > uint64(len(b)) {
			return fmt.Errorf("%w: attr[%d]: entry overruns attrs", ErrMalformed, i)
		}
		attrs[i] = Attr{Key: unsafeString(b[off+8 : off+8+kl]), Value: unsafeString(b[off+8+kl : end])}
		off = end
	}
	e.Attrs = attrs
	return nil
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }
