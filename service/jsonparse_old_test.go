package service

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// maxJSONDepthOld is maxJSONDepth of the old parser.
const maxJSONDepthOld = 512

// parseJSONOld is parseJSON as it was before the allocation-free number
// path (commit 912ef03): one heap string and one interface box per
// number, arrays grown by append, byte loops for the plain-string check
// and the digits. Kept for BenchmarkDecodeJSONDemo's old/new Comparison
// and as a second reference in the tests.
func parseJSONOld(b []byte) (any, error) {
	p := jsonParserOld{b: b}
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

type jsonParserOld struct {
	b []byte
	i int
}

func (p *jsonParserOld) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *jsonParserOld) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParserOld) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
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

func (p *jsonParserOld) lit(s string) error {
	if !bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		return p.errorf("invalid literal, want %s", s)
	}
	p.i += len(s)
	return nil
}

func (p *jsonParserOld) object(depth int) (any, error) {
	if depth > maxJSONDepthOld {
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

func (p *jsonParserOld) array(depth int) (any, error) {
	if depth > maxJSONDepthOld {
		return nil, p.errorf("nested too deeply")
	}
	p.i++ // [
	a := []any{}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.errorf("unexpected end of input in an array")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, nil
		default:
			return nil, p.errorf("want ',' or ']' in an array")
		}
	}
}

// str parses a string starting at the opening quote.
func (p *jsonParserOld) str() (string, error) {
	start := p.i + 1
	end := bytes.IndexByte(p.b[start:], '"')
	if end < 0 {
		return "", p.errorf("unterminated string")
	}
	end += start
	seg := p.b[start:end]
	plain := true
	for _, c := range seg {
		if c < 0x20 || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
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
func (p *jsonParserOld) number() (json.Number, error) {
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
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		p.i = i
		return "", p.errorf("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
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
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			p.i = i
			return "", p.errorf("invalid number: no exponent digits")
		}
	}
	p.i = i
	return json.Number(b[start:i]), nil
}
