package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// MaxNPYHeader bounds a .npy header (bytes). NumPy's own np.load refuses
// headers over 10 000 bytes by default (max_header_size).
const MaxNPYHeader = 10000

// ParseNPY decodes the bytes of a .npy file (format 1.0, 2.0 or 3.0, as
// np.save writes it with allow_pickle=False): a little-endian or one-byte
// numeric or bool dtype, C order. The returned array's Data aliases b.
// Every error wraps ErrArray and names the header field at fault.
func ParseNPY(b []byte) (*Array, error) {
	fail := func(format string, args ...any) (*Array, error) {
		return nil, fmt.Errorf("%w: .npy: %s", ErrArray, fmt.Sprintf(format, args...))
	}
	if len(b) < 10 || string(b[:6]) != npyMagic {
		return fail("not a .npy file (no \\x93NUMPY magic)")
	}
	major, minor := b[6], b[7]
	var hlen, off int
	switch major {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return fail("truncated before the header length")
		}
		u := binary.LittleEndian.Uint32(b[8:12])
		if u > MaxNPYHeader {
			return fail("header of %d bytes (at most %d)", u, MaxNPYHeader)
		}
		hlen, off = int(u), 12
	default:
		return fail("format version %d.%d (want 1.0, 2.0 or 3.0)", major, minor)
	}
	if hlen > MaxNPYHeader {
		return fail("header of %d bytes (at most %d)", hlen, MaxNPYHeader)
	}
	if hlen > len(b)-off {
		return fail("header of %d bytes, %d left", hlen, len(b)-off)
	}
	descr, fortran, shape, err := parseNPYHeader(string(b[off : off+hlen]))
	if err != nil {
		return fail("header: %v", err)
	}
	if fortran {
		return fail("header: fortran_order True (want C order)")
	}
	d, err := normalizeDType(descr)
	if err != nil {
		return fail("header: descr: %v", err)
	}
	n, err := elements(shape)
	if err != nil {
		return fail("header: shape: %v", err)
	}
	data := b[off+hlen:]
	if size := dtypes[d].size; len(data) != n*size {
		return fail("%d data bytes for %s %s (want %d)", len(data), dtypes[d].name, ShapeString(shape), n*size)
	}
	return &Array{DType: d, Shape: shape, Data: data}, nil
}

// parseNPYHeader reads the header's Python dict literal: exactly the keys
// 'descr' (a str), 'fortran_order' (True/False) and 'shape' (a tuple of
// integers), in any order, with optional trailing comma and padding.
func parseNPYHeader(h string) (descr string, fortran bool, shape []int, err error) {
	p := hparser{s: h}
	p.ws()
	if !p.eat('{') {
		return "", false, nil, fmt.Errorf("want a dict literal")
	}
	seen := map[string]bool{}
	for {
		p.ws()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return "", false, nil, err
		}
		if seen[key] {
			return "", false, nil, fmt.Errorf("key %q twice", key)
		}
		seen[key] = true
		p.ws()
		if !p.eat(':') {
			return "", false, nil, fmt.Errorf("want ':' after %q", key)
		}
		p.ws()
		switch key {
		case "descr":
			if descr, err = p.str(); err != nil {
				return "", false, nil, fmt.Errorf("descr: %v (structured dtypes are refused)", err)
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				fortran = true
			case p.word("False"):
			default:
				return "", false, nil, fmt.Errorf("fortran_order: want True or False")
			}
		case "shape":
			if shape, err = p.tuple(); err != nil {
				return "", false, nil, fmt.Errorf("shape: %v", err)
			}
		default:
			return "", false, nil, fmt.Errorf("unknown key %q", key)
		}
		p.ws()
		if p.eat(',') {
			continue
		}
		p.ws()
		if !p.eat('}') {
			return "", false, nil, fmt.Errorf("want ',' or '}' at offset %d", p.i)
		}
		break
	}
	if rest := strings.TrimRight(h[p.i:], " \n\x00"); rest != "" {
		return "", false, nil, fmt.Errorf("%d bytes after the dict", len(rest))
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return "", false, nil, fmt.Errorf("missing key %q", k)
		}
	}
	return descr, fortran, shape, nil
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
		if len(shape) == MaxDims {
			return nil, fmt.Errorf("more than %d dimensions", MaxDims)
		}
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		// Python 2 era headers wrote long integers as 3L.
		n, err := strconv.Atoi(p.s[p.i:j])
		if err != nil || j-p.i > 10 {
			return nil, fmt.Errorf("want a non-negative integer at offset %d", p.i)
		}
		p.i = j
		p.eat('L')
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

// AppendNPY appends a as a .npy file (format 1.0, the header padded to a
// multiple of 64 bytes, as NumPy writes it) to dst.
func AppendNPY(dst []byte, a *Array) []byte {
	var h bytes.Buffer
	fmt.Fprintf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", a.DType, ShapeString(a.Shape))
	total := 10 + h.Len() + 1
	pad := (64 - total%64) % 64
	hl := h.Len() + pad + 1
	dst = append(dst, npyMagic...)
	dst = append(dst, 1, 0)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(hl))
	dst = append(dst, h.Bytes()...)
	for range pad {
		dst = append(dst, ' ')
	}
	dst = append(dst, '\n')
	return append(dst, a.Data...)
}
