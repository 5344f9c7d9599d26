package envelope

import (
	"fmt"
	"math"
	"unsafe"
)

// Builder assembles an envelope. Add attributes and tensors, then call
// Bytes. A Builder may be reused after Reset; it keeps its buffers, so a
// steady-state encode allocates nothing. Tensor data passed to the Add
// methods is referenced until Bytes returns and is copied then.
// A Builder is not safe for concurrent use.
type Builder struct {
	attrs   []Attr
	tensors []pending
	buf     []byte
	err     error
	pad     uint64 // attrs section size quantum (PadAttrs), 0 for none
}

type pending struct {
	name  string
	dtype DType
	flags uint32
	dims  [MaxRank]int64
	rank  int
	data  []byte
}

// Reset clears the builder for reuse, keeping its buffers.
func (b *Builder) Reset() {
	b.attrs = b.attrs[:0]
	for i := range b.tensors {
		b.tensors[i].data = nil
	}
	b.tensors = b.tensors[:0]
	b.err = nil
}

// PadAttrs makes the attribute section a multiple of q bytes (a multiple
// of 8; 0 turns padding off), zero-filled after the last entry. Requests
// whose attributes differ only in value lengths within one multiple then
// share the header and tensor table, which lets a decoder that keeps the
// previous layout (Envelope.Decode) reuse it. The setting survives Reset.
func (b *Builder) PadAttrs(q int) *Builder {
	if q < 0 || q%8 != 0 {
		if b.err == nil {
			b.err = fmt.Errorf("envelope: attrs padding %d is not a multiple of 8", q)
		}
		return b
	}
	b.pad = uint64(q)
	return b
}

// Attr adds a string attribute.
func (b *Builder) Attr(key, value string) *Builder {
	if len(b.attrs) >= MaxAttrs && b.err == nil {
		b.err = fmt.Errorf("envelope: more than %d attrs", MaxAttrs)
	}
	b.attrs = append(b.attrs, Attr{Key: key, Value: value})
	return b
}

// Raw adds a tensor of the given dtype and dims whose little-endian bytes
// are data. The length of data must match dims and dtype.
func (b *Builder) Raw(name string, dt DType, dims []int64, data []byte) *Builder {
	b.add(name, dt, 0, dims, data)
	return b
}

// Float32 adds an FP32 tensor. data is not copied until Bytes.
func (b *Builder) Float32(name string, dims []int64, data []float32) *Builder {
	b.add(name, FP32, 0, dims, f32bytes(data))
	return b
}

// Float64 adds an FP64 tensor. data is not copied until Bytes.
func (b *Builder) Float64(name string, dims []int64, data []float64) *Builder {
	b.add(name, FP64, 0, dims, f64bytes(data))
	return b
}

// Descriptor adds a by-handle tensor: dtype and dims only, no data.
func (b *Builder) Descriptor(name string, dt DType, dims []int64) *Builder {
	b.add(name, dt, FlagByHandle, dims, nil)
	return b
}

func (b *Builder) add(name string, dt DType, flags uint32, dims []int64, data []byte) {
	if b.err != nil {
		return
	}
	switch {
	case len(b.tensors) >= MaxTensors:
		b.err = fmt.Errorf("envelope: more than %d tensors", MaxTensors)
		return
	case len(dims) > MaxRank:
		b.err = fmt.Errorf("envelope: tensor[%s]: rank %d, limit %d", name, len(dims), MaxRank)
		return
	case dt.Size() == 0:
		b.err = fmt.Errorf("envelope: tensor[%s]: unknown dtype %d", name, uint8(dt))
		return
	case len(name) > math.MaxUint16:
		b.err = fmt.Errorf("envelope: tensor name of %d bytes", len(name))
		return
	}
	p := pending{name: name, dtype: dt, flags: flags, rank: len(dims), data: data}
	n := int64(1)
	for i, d := range dims {
		if d < 0 {
			b.err = fmt.Errorf("envelope: tensor[%s]: dim[%d] = %d", name, i, d)
			return
		}
		p.dims[i] = d
		n *= d
	}
	if flags&FlagByHandle == 0 && int64(len(data)) != n*int64(dt.Size()) {
		// Format a copy: handing dims itself to fmt would make every
		// caller's dims slice escape to the heap.
		b.err = fmt.Errorf("envelope: tensor[%s]: shape %v %s needs %d bytes, got %d", name, append([]int64(nil), dims...), dt, n*int64(dt.Size()), len(data))
		return
	}
	b.tensors = append(b.tensors, p)
}

// Err returns the first error recorded by an Add method (too many
// tensors or attributes, a bad shape), which Bytes and AppendTo return.
func (b *Builder) Err() error { return b.err }

// Size returns the encoded size of what has been added so far.
func (b *Builder) Size() int {
	_, _, total := b.layout()
	return int(total)
}

func (b *Builder) layout() (attrsLen, tableLen, total uint64) {
	if len(b.attrs) > 0 {
		attrsLen = 4
		for _, a := range b.attrs {
			attrsLen += 8 + uint64(len(a.Key)) + uint64(len(a.Value))
		}
		if b.pad > 0 {
			attrsLen = (attrsLen + b.pad - 1) / b.pad * b.pad
		}
	}
	for i := range b.tensors {
		t := &b.tensors[i]
		tableLen += align8(24 + 8*uint64(t.rank) + uint64(len(t.name)))
	}
	total = align8(HeaderSize+attrsLen) + tableLen
	for i := range b.tensors {
		total = align8(total) + uint64(len(b.tensors[i].data))
	}
	return attrsLen, tableLen, align8(total)
}

// Bytes encodes the envelope into the builder's internal buffer and
// returns it; the result is valid until the next Reset or Bytes call.
func (b *Builder) Bytes() ([]byte, error) {
	out, err := b.AppendTo(b.buf[:0])
	if err == nil {
		b.buf = out[:0]
	}
	return out, err
}

// AppendTo encodes the envelope at the end of dst and returns the extended
// slice. Offsets are aligned relative to the envelope start, so for the
// in-memory alignment guarantee the envelope must start 8-byte aligned.
func (b *Builder) AppendTo(dst []byte) ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	attrsLen, tableLen, total := b.layout()
	if total > math.MaxUint32 {
		return nil, fmt.Errorf("envelope: %d bytes exceed the u32 size field", total)
	}
	start := len(dst)
	need := start + int(total)
	if cap(dst) < need {
		nb := make([]byte, need, need+need/4)
		copy(nb, dst)
		dst = nb
	} else {
		dst = dst[:need]
	}
	out := dst[start:]
	// Every byte is written below; only padding is zeroed explicitly
	// (clearing the whole buffer costs a loop per 8 bytes in wasm guests).
	copy(out, Magic)
	le.PutUint16(out[4:], Version)
	le.PutUint16(out[6:], uint16(len(b.tensors)))
	le.PutUint32(out[8:], uint32(attrsLen))
	le.PutUint32(out[12:], uint32(tableLen))
	le.PutUint32(out[16:], uint32(total))
	le.PutUint32(out[20:], 0)
	off := uint64(HeaderSize)
	if len(b.attrs) > 0 {
		le.PutUint32(out[off:], uint32(len(b.attrs)))
		off += 4
		for _, a := range b.attrs {
			le.PutUint16(out[off:], uint16(len(a.Key)))
			le.PutUint16(out[off+2:], 0)
			le.PutUint32(out[off+4:], uint32(len(a.Value)))
			off += 8
			off += uint64(copy(out[off:], a.Key))
			off += uint64(copy(out[off:], a.Value))
		}
	}
	tab := align8(HeaderSize + attrsLen)
	clear(out[off:tab])
	data := tab + tableLen
	for i := range b.tensors {
		t := &b.tensors[i]
		clear(out[data:align8(data)])
		data = align8(data)
		le.PutUint16(out[tab:], uint16(len(t.name)))
		out[tab+2] = byte(t.dtype)
		out[tab+3] = byte(t.rank)
		le.PutUint32(out[tab+4:], t.flags)
		if len(t.data) > 0 {
			le.PutUint64(out[tab+8:], data)
		} else {
			le.PutUint64(out[tab+8:], 0)
		}
		le.PutUint64(out[tab+16:], uint64(len(t.data)))
		for r := 0; r < t.rank; r++ {
			le.PutUint64(out[tab+24+8*uint64(r):], uint64(t.dims[r]))
		}
		nameEnd := tab + 24 + 8*uint64(t.rank) + uint64(copy(out[tab+24+8*uint64(t.rank):], t.name))
		tab += align8(24 + 8*uint64(t.rank) + uint64(len(t.name)))
		clear(out[nameEnd:tab])
		copy(out[data:], t.data)
		data += uint64(len(t.data))
	}
	clear(out[data:])
	return dst, nil
}

// f32bytes views a float32 slice as little-endian bytes. Every platform Go
// supports for this project (amd64, arm64, wasm) is little-endian; the
// init check in endian.go enforces it.
func f32bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func f64bytes(v []float64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}
