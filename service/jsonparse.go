package service

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"unsafe"
)

// maxJSONDepth bounds nesting of a request body (the schema needs 4).
const maxJSONDepth = 512

// parseJSON parses exactly one JSON value (RFC 8259, surrounding white
// space allowed) into the tree encoding/json builds with UseNumber:
// map[string]any, []any, string, json.Number, bool and nil. Duplicate keys:
// the last wins, as in encoding/json. The caller checks UTF-8 validity.
//
// Why not encoding/json: a /predict body is ~140 KB of base64 strings, and
// encoding/json scans each byte twice (validity scan, then decode) plus a
// copy through its streaming buffer, ~1.3 ms per DROID request here, two
// thirds of the gateway's budget. Strings without escapes — every base64
// frame — are sliced in one pass here; escaped strings fall back to
// encoding/json's own unquoting, so semantics stay identical
// (FuzzParseJSON checks that against encoding/json).
//
// Allocation is what the body's thousands of numbers cost (the DROID
// noise is 5280 of them): their text is copied into shared chunks
// (numArena) and boxed from shared slabs (numBox), and each array is
// allocated once at its final length from a shared element stack, so a
// number costs no allocation of its own. Strings are still copied one by
// one (few, and the large ones are frames), so no value keeps the body or
// another value's memory alive.
func parseJSON(b []byte) (any, error) {
	p := jsonParser{b: b}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, p.errorf("data after the top-level value")
	}
	return v, nil
}

type jsonParser struct {
	b []byte
	i int
	n int // values parsed (maxBodyValues)
	// stack holds the elements of the arrays being parsed (innermost on
	// top); each array copies its own out when it closes.
	stack []any
	nums  numArena
	box   numBox
}

// numArena stores number texts for json.Number strings: chunks that are
// only appended to and never reallocated, so a string made over a chunk
// stays valid and immutable. Chunks double from 512 bytes to 32 KB.
type numArena struct{ chunk []byte }

// str copies t into the arena and returns it as a string.
func (a *numArena) str(t []byte) string {
	if len(t) > cap(a.chunk)-len(a.chunk) {
		n := min(max(2*cap(a.chunk), 512), 32<<10)
		a.chunk = make([]byte, 0, max(n, len(t)))
	}
	off := len(a.chunk)
	a.chunk = append(a.chunk, t...)
	return unsafe.String(&a.chunk[off], len(t))
}

// numBox boxes json.Numbers as interface values from shared slabs
// (64 to 4096 numbers each) instead of one heap allocation per value, as
// converting a json.Number to any does. A slab entry is written once,
// before its interface value exists, and never again.
type numBox struct{ slab []json.Number }

// eface is the layout of an interface value with methods-free type (any):
// the dynamic type and a pointer to the value, as the runtime and reflect
// lay it out.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

// numberType is the dynamic type word of an any holding a json.Number.
var numberType = func() unsafe.Pointer {
	var v any = json.Number("0")
	return (*eface)(unsafe.Pointer(&v)).typ
}()

// any returns n as an interface value, equal in every respect to any(n).
func (x *numBox) any(n json.Number) any {
	if len(x.slab) == cap(x.slab) {
		x.slab = make([]json.Number, 0, min(max(2*cap(x.slab), 64), 4096))
	}
	x.slab = append(x.slab, n)
	var v any
	*(*eface)(unsafe.Pointer(&v)) = eface{typ: numberType, data: unsafe.Pointer(&x.slab[len(x.slab)-1])}
	return v
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.errorf("unexpected end of input")
	}
	if p.n++; p.n > maxBodyValues {
		return nil, fmt.Errorf("offset %d: %w", p.i, errTooManyValues)
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		n, err := p.number()
		if err != nil {
			return nil, err
		}
		return p.box.any(n), nil
	case c == 't':
		return true, p.lit("true")
	case c == 'f':
		return false, p.lit("false")
	case c == 'n':
		return nil, p.lit("null")
	default:
		return nil, p.errorf("invalid character %q looking for a value", c)
	}
}

func (p *jsonParser) lit(s string) error {
	if !bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		return p.errorf("invalid literal, want %s", s)
	}
	p.i += len(s)
	return nil
}

func (p *jsonParser) object(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nested too deeply")
	}
	p.i++ // {
	m := map[string]any{}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, nil
	}
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, p.errorf("want a string key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.errorf("want ':' after a key")
		}
		p.i++
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.errorf("unexpected end of input in an object")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, nil
		default:
			return nil, p.errorf("want ',' or '}' in an object")
		}
	}
}

func (p *jsonParser) array(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nested too deeply")
	}
	p.i++ // [
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return []any{}, nil
	}
	base := len(p.stack)
	for {
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.stack = append(p.stack, v)
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.errorf("unexpected end of input in an array")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			a := make([]any, len(p.stack)-base)
			copy(a, p.stack[base:])
			// The popped entries are not cleared: they die with the parser.
			p.stack = p.stack[:base]
			return a, nil
		default:
			return nil, p.errorf("want ',' or ']' in an array")
		}
	}
}

// str parses a string starting at the opening quote.
func (p *jsonParser) str() (string, error) {
	start := p.i + 1
	end := bytes.IndexByte(p.b[start:], '"')
	if end < 0 {
		return "", p.errorf("unterminated string")
	}
	end += start
	seg := p.b[start:end]
	if plainString(seg) {
		p.i = end + 1
		return string(seg), nil
	}
	// Slow path: find the real closing quote, honouring escapes, then let
	// encoding/json unquote (and reject control characters and bad escapes).
	i := start
	for {
		if i >= len(p.b) {
			return "", p.errorf("unterminated string")
		}
		c := p.b[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '"' {
			break
		}
		i++
	}
	var s string
	if err := json.Unmarshal(p.b[p.i:i+1], &s); err != nil {
		return "", p.errorf("invalid string: %v", err)
	}
	p.i = i + 1
	return s, nil
}

// number parses a JSON number (grammar-checked) as json.Number.
func (p *jsonParser) number() (json.Number, error) {
	start := p.i
	b := p.b
	i := p.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		p.i = i
		return "", p.errorf("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		i = digits(b, i)
		if i == d {
			p.i = i
			return "", p.errorf("invalid number: no digits after '.'")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		i = digits(b, i)
		if i == d {
			p.i = i
			return "", p.errorf("invalid number: no exponent digits")
		}
	}
	p.i = i
	return json.Number(p.nums.str(b[start:i])), nil
}

// digits returns the index of the first byte at or after i in b that is
// not an ASCII digit (len(b) if none), eight bytes at a time: byte c is a
// digit exactly when c & 0xf0 == 0x30 and (c + 6) & 0xf0 == 0x30. The
// per-byte + 6 may carry out of a byte ≥ 0xfa, but only into bytes above
// the first non-digit, whose flags are not read.
func digits(b []byte, i int) int {
	const ones, highs, lows, nib = 0x0101010101010101, 0x8080808080808080, 0x7f7f7f7f7f7f7f7f, 0xf0f0f0f0f0f0f0f0
	for i+8 <= len(b) {
		w := binary.LittleEndian.Uint64(b[i:])
		nd := (w&nib ^ 0x30*ones) | ((w+6*ones)&nib ^ 0x30*ones) // non-zero bytes: non-digits
		if nd == 0 {
			i += 8
			continue
		}
		m := ((nd&lows + lows) | nd) & highs // 0x80 in every non-zero byte
		return i + bits.TrailingZeros64(m)/8
	}
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// plainString reports whether s holds no backslash and no control
// character (< 0x20), eight bytes at a time: a word has a byte below 0x20
// exactly when (w − 0x20…20) & ^w & 0x80…80 ≠ 0, and a backslash exactly
// when w ^ 0x5c…5c has a zero byte (a borrow only starts at a byte that
// matches, so neither test has false positives for the word as a whole).
func plainString(s []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(s) >= 32 { // four words per branch
		var acc uint64
		for k := 0; k < 32; k += 8 {
			w := binary.LittleEndian.Uint64(s[k:])
			x := w ^ (0x5c * ones)
			acc |= (w-0x20*ones)&^w | (x-ones)&^x
		}
		if acc&highs != 0 {
			return false
		}
		s = s[32:]
	}
	for len(s) >= 8 {
		w := binary.LittleEndian.Uint64(s)
		x := w ^ (0x5c * ones)
		if ((w-0x20*ones)&^w|(x-ones)&^x)&highs != 0 {
			return false
		}
		s = s[8:]
	}
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return true
}
