package service

import (
	"encoding/binary"
	"fmt"
	"math"
)

// parseMsgpack decodes exactly one msgpack value into the generic tree the
// request schema walks: map[string]any, []any, string, []byte (bin),
// int64, uint64, float32, float64, bool and nil. Extension types and
// non-string map keys are rejected.
//
// Why not msgpack.Decoder.DecodeInterface: it sizes slices from the
// declared length, so an 8-byte body declaring a 2³²-element array asks
// for ~100 GB and kills the process (found by FuzzDecodeMsgpack). Here
// every declared length is checked against the bytes left (each element
// needs at least one byte) before anything is allocated.
func parseMsgpack(b []byte) (any, error) {
	p := mpParser{b: b}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if p.i != len(p.b) {
		return nil, fmt.Errorf("offset %d: data after the msgpack value", p.i)
	}
	return v, nil
}

type mpParser struct {
	b []byte
	i int
	n int // values parsed (maxBodyValues)
}

func (p *mpParser) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

// take returns the next n bytes.
func (p *mpParser) take(n int) ([]byte, error) {
	if n < 0 || n > len(p.b)-p.i {
		return nil, p.errorf("truncated: need %d bytes, %d left", n, len(p.b)-p.i)
	}
	s := p.b[p.i : p.i+n]
	p.i += n
	return s, nil
}

// length reads a big-endian unsigned length of size bytes.
func (p *mpParser) length(size int) (int, error) {
	s, err := p.take(size)
	if err != nil {
		return 0, err
	}
	switch size {
	case 1:
		return int(s[0]), nil
	case 2:
		return int(binary.BigEndian.Uint16(s)), nil
	default:
		return int(binary.BigEndian.Uint32(s)), nil
	}
}

func (p *mpParser) value(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nested too deeply")
	}
	if p.n++; p.n > maxBodyValues {
		return nil, fmt.Errorf("offset %d: %w", p.i, errTooManyValues)
	}
	s, err := p.take(1)
	if err != nil {
		return nil, err
	}
	c := s[0]
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c >= 0x80 && c <= 0x8f:
		return p.mapN(int(c&0x0f), depth)
	case c >= 0x90 && c <= 0x9f:
		return p.arrayN(int(c&0x0f), depth)
	case c >= 0xa0 && c <= 0xbf:
		return p.str(int(c & 0x1f))
	}
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xc4, 0xc5, 0xc6:
		n, err := p.length(1 << (c - 0xc4))
		if err != nil {
			return nil, err
		}
		raw, err := p.take(n)
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), raw...), nil
	case 0xca:
		s, err := p.take(4)
		if err != nil {
			return nil, err
		}
		return math.Float32frombits(binary.BigEndian.Uint32(s)), nil
	case 0xcb:
		s, err := p.take(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(s)), nil
	case 0xcc, 0xcd, 0xce, 0xcf:
		s, err := p.take(1 << (c - 0xcc))
		if err != nil {
			return nil, err
		}
		var u uint64
		for _, x := range s {
			u = u<<8 | uint64(x)
		}
		return u, nil
	case 0xd0, 0xd1, 0xd2, 0xd3:
		size := 1 << (c - 0xd0)
		s, err := p.take(size)
		if err != nil {
			return nil, err
		}
		var u uint64
		for _, x := range s {
			u = u<<8 | uint64(x)
		}
		shift := 64 - 8*size
		return int64(u<<shift) >> shift, nil // sign-extend
	case 0xd9, 0xda, 0xdb:
		n, err := p.length(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
		return p.str(n)
	case 0xdc, 0xdd:
		n, err := p.length(2 << (c - 0xdc))
		if err != nil {
			return nil, err
		}
		return p.arrayN(n, depth)
	case 0xde, 0xdf:
		n, err := p.length(2 << (c - 0xde))
		if err != nil {
			return nil, err
		}
		return p.mapN(n, depth)
	}
	p.i--
	return nil, p.errorf("unsupported msgpack type 0x%02x (extension types are not accepted)", c)
}

func (p *mpParser) str(n int) (string, error) {
	s, err := p.take(n)
	if err != nil {
		return "", err
	}
	return string(s), nil
}

func (p *mpParser) arrayN(n, depth int) (any, error) {
	if n > len(p.b)-p.i {
		return nil, p.errorf("array of %d elements in %d bytes", n, len(p.b)-p.i)
	}
	a := make([]any, n)
	for k := range a {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a[k] = v
	}
	return a, nil
}

func (p *mpParser) mapN(n, depth int) (any, error) {
	if 2*n > len(p.b)-p.i {
		return nil, p.errorf("map of %d entries in %d bytes", n, len(p.b)-p.i)
	}
	m := make(map[string]any, n)
	for range n {
		k, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			return nil, p.errorf("map key of type %s, want string", typeName(k))
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[ks] = v
	}
	return m, nil
}
