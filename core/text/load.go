package text

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// LoadFile reads a Hugging Face tokenizer.json from path; see Load.
func LoadFile(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("text: %w", err)
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("text: tokenizer.json: larger than %d bytes (file %s)", MaxFileSize, path)
	}
	data, err := os.ReadFile(path) // sized read: no growth copies
	if err != nil {
		return nil, fmt.Errorf("text: %w", err)
	}
	t, err := LoadBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return t, nil
}

// MaxFileSize bounds the tokenizer.json that Load accepts (Qwen3's is 11 MB).
const MaxFileSize = 256 << 20

// Load reads a Hugging Face tokenizer.json (format version 1.0) from r and
// returns a ready tokenizer. Only the shape used by Qwen2/Qwen2.5/Qwen3(-VL)
// is accepted: normalizer NFC (or null), pre-tokenizer
// Sequence[Split(QwenPattern, Isolated), ByteLevel(use_regex=false)], model BPE without dropout, byte fallback,
// continuing-subword prefix or end-of-word suffix. Anything else is rejected
// with an error naming the field, rather than tokenized differently.
//
// The vocab and merges are decoded by a purpose-built scanner straight into
// the lookup tables (no generic JSON tree; about 10x faster than
// encoding/json tokens); the small sections go through encoding/json.
// Merges are accepted both as "a b" strings and as ["a","b"] pairs. The
// post_processor and decoder sections are skipped (Encode never adds
// BOS/EOS). r is read to EOF (at most MaxFileSize bytes).
func Load(r io.Reader) (*Tokenizer, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("text: tokenizer.json: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("text: tokenizer.json: larger than %d bytes", MaxFileSize)
	}
	return LoadBytes(data)
}

// LoadBytes is Load on an in-memory document (for example a go:embed'ed
// tokenizer.json). data is only read during the call and not retained.
func LoadBytes(data []byte) (*Tokenizer, error) {
	l := loader{sc: scanner{b: data}, t: &Tokenizer{}}
	if err := l.document(); err != nil {
		return nil, fmt.Errorf("text: tokenizer.json: %w", err)
	}
	if err := l.t.finish(); err != nil {
		return nil, fmt.Errorf("text: tokenizer.json: %w", err)
	}
	return l.t, nil
}

// scanner is a minimal JSON reader over a byte slice.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at EOF).
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return s.errorf("want %q", c)
	}
	s.i++
	return nil
}

// more reports whether a list continues: it consumes a ',' and returns true,
// or sees the closing byte (not consumed) and returns false.
func (s *scanner) more(closing byte, first bool) (bool, error) {
	c := s.peek()
	if c == closing {
		return false, nil
	}
	if first {
		return true, nil
	}
	if c != ',' {
		return false, s.errorf("want ',' or %q", closing)
	}
	s.i++
	return true, nil
}

// str reads a JSON string.
func (s *scanner) str() (string, error) {
	b, err := s.strBytes()
	return string(b), err
}

// strBytes reads a JSON string; without escapes the result aliases the
// input (no allocation).
func (s *scanner) strBytes() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			v := s.b[start:s.i]
			s.i++
			if !utf8.Valid(v) {
				return nil, s.errorf("invalid UTF-8 in string")
			}
			return v, nil
		}
		if c == '\\' {
			return s.strSlow(start)
		}
		if c < 0x20 {
			return nil, s.errorf("control byte in string")
		}
		s.i++
	}
	return nil, s.errorf("unterminated string")
}

func (s *scanner) strSlow(start int) ([]byte, error) {
	out := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(out) {
				return nil, s.errorf("invalid UTF-8 in string")
			}
			return out, nil
		case c < 0x20:
			return nil, s.errorf("control byte in string")
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			break
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return nil, err
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					s.i += 2
					if r2, err = s.hex4(); err != nil {
						return nil, err
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, s.errorf("bad escape \\%c", e)
		}
	}
	return nil, s.errorf("unterminated string")
}

func (s *scanner) hex4() (rune, error) {
	if s.i+4 > len(s.b) {
		return 0, s.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, s.errorf("bad \\u escape")
	}
	s.i += 4
	return rune(v), nil
}

// int reads a non-negative integer that fits in int32.
func (s *scanner) int() (int32, error) {
	s.ws()
	start := s.i
	var v int64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		v = v*10 + int64(s.b[s.i]-'0')
		if v > 1<<31-1 {
			return 0, s.errorf("integer overflow")
		}
		s.i++
	}
	if s.i == start {
		return 0, s.errorf("want a non-negative integer")
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, s.errorf("want an integer")
	}
	return int32(v), nil
}

// value skips one JSON value and returns its bytes.
func (s *scanner) value() ([]byte, error) {
	s.ws()
	start := s.i
	depth := 0
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case '"':
			if _, err := s.rawString(); err != nil {
				return nil, err
			}
			if depth == 0 {
				return s.b[start:s.i], nil
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, s.errorf("unbalanced %q", c)
			}
			if depth == 0 {
				s.i++
				return s.b[start:s.i], nil
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				if s.i == start {
					return nil, s.errorf("want a value")
				}
				return s.b[start:s.i], nil
			}
		}
		s.i++
	}
	if depth == 0 && s.i > start {
		return s.b[start:s.i], nil
	}
	return nil, s.errorf("truncated value")
}

// rawString skips a string starting at the opening quote.
func (s *scanner) rawString() ([]byte, error) {
	start := s.i
	s.i++
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return s.b[start:s.i], nil
		}
		s.i++
	}
	return nil, s.errorf("unterminated string")
}

// decodeValue unmarshals the next value with encoding/json.
func (s *scanner) decodeValue(v any) error {
	raw, err := s.value()
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

type loader struct {
	sc scanner
	t  *Tokenizer
	// pending holds merges seen before the vocab (key order is free in JSON).
	pending [][2]string
	sawBPE  bool
	sawPre  bool
}

// object calls field for each key of the object at the cursor.
func (s *scanner) object(field func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	for first := true; ; first = false {
		ok, err := s.more('}', first)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		k, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(k); err != nil {
			return err
		}
	}
	return s.expect('}')
}

// members is object with the error of a member's field prefixed by its
// key ("model: vocab: …").
func (s *scanner) members(field func(key string) error) error {
	return s.object(func(k string) error {
		if err := field(k); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
}

func (l *loader) document() error {
	err := l.sc.members(func(k string) error {
		var err error
		switch k {
		case "added_tokens":
			var added []AddedToken
			err = l.sc.decodeValue(&added)
			l.t.added = added
		case "normalizer":
			var n *struct {
				Type string `json:"type"`
			}
			if err = l.sc.decodeValue(&n); err != nil {
				break
			}
			switch {
			case n == nil:
				l.t.nfc = false
			case n.Type == "NFC":
				l.t.nfc = true
			default:
				err = fmt.Errorf("[%s]: unsupported (want NFC or null)", n.Type)
			}
		case "pre_tokenizer":
			var p preTokenizerJSON
			if err = l.sc.decodeValue(&p); err == nil {
				err = p.check()
			}
			l.sawPre = true
		case "model":
			err = l.model()
		default: // version, truncation, padding, post_processor, decoder
			_, err = l.sc.value()
		}
		return err
	})
	if err != nil {
		return err
	}
	if l.sc.peek() != 0 {
		return l.sc.errorf("trailing data")
	}
	if !l.sawBPE {
		return errors.New("model: missing or not BPE")
	}
	if !l.sawPre {
		return errors.New("pre_tokenizer: missing")
	}
	return nil
}

type preTokenizerJSON struct {
	Type          string             `json:"type"`
	PreTokenizers []preTokenizerJSON `json:"pretokenizers"`
	Pattern       *struct {
		Regex *string `json:"Regex"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

func (p *preTokenizerJSON) checkSplit() error {
	if p.Type != "Split" || p.Pattern == nil || p.Pattern.Regex == nil {
		return fmt.Errorf("[%s]: want Split with a Regex pattern", p.Type)
	}
	if *p.Pattern.Regex != QwenPattern {
		return fmt.Errorf("pre_tokenizer Split: pattern %q is not the Qwen pattern", *p.Pattern.Regex)
	}
	if p.Behavior != "Isolated" || p.Invert {
		return fmt.Errorf("pre_tokenizer Split: behavior %q invert %v unsupported (want Isolated, false)", p.Behavior, p.Invert)
	}
	return nil
}

func (p *preTokenizerJSON) check() error {
	if p.Type != "Sequence" || len(p.PreTokenizers) != 2 {
		return fmt.Errorf("[%s]: unsupported (want Sequence[Split, ByteLevel])", p.Type)
	}
	if err := p.PreTokenizers[0].checkSplit(); err != nil {
		return err
	}
	b := p.PreTokenizers[1]
	if b.Type != "ByteLevel" || b.AddPrefixSpace || (b.UseRegex != nil && *b.UseRegex) {
		return fmt.Errorf("[%s]: unsupported second step (want ByteLevel without prefix space or regex)", b.Type)
	}
	return nil
}

func (l *loader) model() error {
	err := l.sc.members(func(k string) error {
		var err error
		switch k {
		case "type":
			var s string
			if err = l.sc.decodeValue(&s); err == nil && s != "BPE" {
				err = fmt.Errorf("[%s]: unsupported (want BPE)", s)
			}
			l.sawBPE = err == nil
		case "dropout":
			var d *float64
			if err = l.sc.decodeValue(&d); err == nil && d != nil && *d != 0 {
				err = fmt.Errorf("[%v]: unsupported", *d)
			}
		case "continuing_subword_prefix", "end_of_word_suffix":
			var s *string
			if err = l.sc.decodeValue(&s); err == nil && s != nil && *s != "" {
				err = fmt.Errorf("[%s]: unsupported", *s)
			}
		case "byte_fallback":
			var b bool
			if err = l.sc.decodeValue(&b); err == nil && b {
				err = errors.New("true is unsupported")
			}
		case "ignore_merges":
			err = l.sc.decodeValue(&l.t.ignoreMerges)
		case "vocab":
			err = l.vocab()
		case "merges":
			err = l.merges()
		default: // unk_token, fuse_unk: no effect on a byte-level vocabulary
			_, err = l.sc.value()
		}
		return err
	})
	if err != nil {
		return err
	}
	if l.t.vocab == nil {
		return errors.New("vocab: missing")
	}
	for i, m := range l.pending {
		if err := l.t.addMerge(m[0], m[1]); err != nil {
			return fmt.Errorf("merges[%d]: %w", i, err)
		}
	}
	l.pending = nil
	return nil
}

func (l *loader) vocab() error {
	t := l.t
	t.vocab = make(map[string]int32, 160000)
	return l.sc.object(func(k string) error {
		id, err := l.sc.int()
		if err != nil {
			return fmt.Errorf("[%q]: %w", k, err)
		}
		t.vocab[k] = id
		return nil
	})
}

func (l *loader) merges() error {
	s := &l.sc
	if err := s.expect('['); err != nil {
		return err
	}
	var buf []byte
	for n := 0; ; n++ {
		ok, err := s.more(']', n == 0)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		var a, b []byte
		switch s.peek() {
		case '"': // "a b"
			v, err := s.strBytes()
			if err != nil {
				return err
			}
			k := bytes.IndexByte(v, ' ')
			if k < 0 || bytes.IndexByte(v[k+1:], ' ') >= 0 {
				return fmt.Errorf("[%d]: %q is not two space-separated tokens", n, v)
			}
			a, b = v[:k], v[k+1:]
		case '[': // ["a","b"]
			s.i++
			if a, err = s.strBytes(); err == nil {
				if err = s.expect(','); err == nil {
					if b, err = s.strBytes(); err == nil {
						err = s.expect(']')
					}
				}
			}
			if err != nil {
				return fmt.Errorf("[%d]: want [\"a\",\"b\"]: %w", n, err)
			}
		default:
			return fmt.Errorf("[%d]: %w", n, s.errorf("want a string or a pair"))
		}
		if l.t.vocab == nil {
			l.pending = append(l.pending, [2]string{string(a), string(b)})
			continue
		}
		buf = append(append(buf[:0], a...), b...)
		if err := l.t.addMergeBytes(a, b, buf); err != nil {
			return fmt.Errorf("[%d]: %w", n, err)
		}
	}
	return s.expect(']')
}
