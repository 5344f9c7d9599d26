package service

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stdParse is the reference: encoding/json with UseNumber, one value only.
func stdParse(b []byte) (any, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

var jsonCorpus = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `-12E+7`, `"a"`, ` {"a" : [1, 2, {"b": null}]} `,
	`"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00"`, `"bad surrogate \ud800"`, `{"a":1,"a":2}`,
	`01`, `1.`, `.5`, `-`, `1e`, `+1`, `"\x"`, "\"ctl \x01\"", `[1,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`,
	`[1 2]`, `tru`, `nul`, `"unterminated`, `{"a":"b"} x`, `[[[[]]]]`, `"\u12"`, `1 2`, "",
	// Digit runs across the 8-byte words of the number scanner, and what
	// may follow them.
	`12345678`, `123456789`, `-1234567890123456789012345`, `0.12345678901234567`, `-0.1117185652256012`,
	`1.0000000e-0000000012`, `1e123456789`, `[0.1234567,1,22,333,4444,55555,666666,7777777,88888888,999999999]`,
	`[1.23456789a]`, `[1.2345678:]`, `[1.2345678/]`, `[1.2345678` + "\xfa" + `]`, `1.`, `1.e5`, `1e+`, `-01.5`,
	`[[1,2,3],[4,5,6],[],[[7]],[8,[9,[10]]]]`, `{"n":[-0.5,0.25,1e-7],"m":{"k":[1,2]}}`,
	// Control characters and backslashes in and after the first word.
	"\"abcdefg\x01\"", "\"abcdefgh\x1f\"", "\"abcdefghi\x00xyz\"", `"abcdefg\n"`, `"abcdefgh\\"`,
	"\"\x7f\x20 ok ~\"", "\"caf\xc3\xa9 12345678\"",
}

func TestParseJSONMatchesEncodingJSON(t *testing.T) {
	for _, in := range jsonCorpus {
		want, ok := stdParse([]byte(in))
		got, err := parseJSON([]byte(in))
		if !ok {
			assert.Error(t, err, "%q accepted, encoding/json rejects it", in)
			continue
		}
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	raw, err := os.ReadFile("testdata/droid_request.json")
	require.NoError(t, err)
	want, _ := stdParse(raw)
	got, err := parseJSON(raw)
	require.NoError(t, err)
	assert.True(t, reflect.DeepEqual(want, got))
}

// TestParseJSONErrorText: parseJSON fails where the parser before the
// allocation-free number path (commit 912ef03) failed, with its text,
// offsets included: the messages below are that parser's, recorded when
// it was deleted (its trees are encoding/json's, checked above and in
// FuzzParseJSON).
func TestParseJSONErrorText(t *testing.T) {
	deepArray := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	deepObject := strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1)
	for _, tc := range []struct{ in, want string }{
		{"01", "offset 1: data after the top-level value"},
		{"1.", "offset 2: invalid number: no digits after '.'"},
		{".5", "offset 0: invalid character '.' looking for a value"},
		{"-", "offset 1: invalid number"},
		{"1e", "offset 2: invalid number: no exponent digits"},
		{"+1", "offset 0: invalid character '+' looking for a value"},
		{"\"\\x\"", "offset 0: invalid string: invalid character 'x' in string escape code"},
		{"\"ctl \x01\"", "offset 0: invalid string: invalid character '\\x01' in string literal"},
		{"[1,]", "offset 3: invalid character ']' looking for a value"},
		{"{\"a\":1,}", "offset 7: want a string key"},
		{"{\"a\" 1}", "offset 5: want ':' after a key"},
		{"{1:2}", "offset 1: want a string key"},
		{"[1 2]", "offset 3: want ',' or ']' in an array"},
		{"tru", "offset 0: invalid literal, want true"},
		{"nul", "offset 0: invalid literal, want null"},
		{"\"unterminated", "offset 0: unterminated string"},
		{"{\"a\":\"b\"} x", "offset 10: data after the top-level value"},
		{"\"\\u12\"", "offset 0: invalid string: invalid character '\"' in \\u hexadecimal character escape"},
		{"1 2", "offset 2: data after the top-level value"},
		{"", "offset 0: unexpected end of input"},
		{"[1.23456789a]", "offset 11: want ',' or ']' in an array"},
		{"[1.2345678:]", "offset 10: want ',' or ']' in an array"},
		{"[1.2345678\xfa]", "offset 10: want ',' or ']' in an array"},
		{"1.e5", "offset 2: invalid number: no digits after '.'"},
		{"1e+", "offset 3: invalid number: no exponent digits"},
		{"-01.5", "offset 2: data after the top-level value"},
		{"\"abcdefgh\x1f\"", "offset 0: invalid string: invalid character '\\x1f' in string literal"},
		{"\"abcdefghi\x00xyz\"", "offset 0: invalid string: invalid character '\\x00' in string literal"},
		{"{\"a\":1 \"b\":2}", "offset 7: want ',' or '}' in an object"},
		{"[1,2", "offset 4: unexpected end of input in an array"},
		{"{\"a\"", "offset 4: want ':' after a key"},
		{deepArray, "offset 512: nested too deeply"},
		{deepObject, "offset 2560: nested too deeply"},
	} {
		_, err := parseJSON([]byte(tc.in))
		assert.EqualError(t, err, tc.want, "%.60q", tc.in)
	}
}

// plainStringRef and digitsRef are the byte loops plainString and digits
// replace.
func plainStringRef(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return true
}

func digitsRef(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// TestScannersEveryByteEveryLane puts every byte value at every position
// of runs of digits and of plain string bytes (lengths 0–40, so every lane
// of the eight-byte words and the tails) and compares the word-at-a-time
// scanners with the byte loops.
func TestScannersEveryByteEveryLane(t *testing.T) {
	for n := 0; n <= 40; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				d := []byte(strings.Repeat("7", n))
				d[pos] = byte(c)
				for start := 0; start <= min(n, 9); start++ {
					require.Equal(t, digitsRef(d, start), digits(d, start), "n=%d pos=%d c=%#x start=%d", n, pos, c, start)
				}
				s := []byte(strings.Repeat("Az+/9 ~", 6)[:n])
				s[pos] = byte(c)
				require.Equal(t, plainStringRef(s), plainString(s), "n=%d pos=%d c=%#x", n, pos, c)
			}
		}
	}
}

// FuzzScanners checks the word-at-a-time scanners against the byte loops
// on arbitrary bytes and start offsets.
func FuzzScanners(f *testing.F) {
	f.Add([]byte("12345678901234567890"), 0)
	f.Add([]byte("0.1117185652256012,"), 2)
	f.Add([]byte("iVBORw0KGgoAAAANSUhEUgAAAUAAAAC0\n"), 0)
	f.Fuzz(func(t *testing.T, b []byte, start int) {
		if start < 0 || start > len(b) {
			start = 0
		}
		if got, want := digits(b, start), digitsRef(b, start); got != want {
			t.Fatalf("digits(%q, %d) = %d, want %d", b, start, got, want)
		}
		if got, want := plainString(b[start:]), plainStringRef(b[start:]); got != want {
			t.Fatalf("plainString(%q) = %v, want %v", b[start:], got, want)
		}
	})
}

// FuzzParseJSON checks parseJSON against encoding/json: same accept/reject
// decision and the same tree, for every valid-UTF-8 input of bounded depth
// (the error texts are pinned by TestParseJSONErrorText).
func FuzzParseJSON(f *testing.F) {
	for _, in := range jsonCorpus {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !utf8.Valid(in) || strings.Count(string(in), "[")+strings.Count(string(in), "{") > maxJSONDepth {
			return
		}
		want, ok := stdParse(in)
		got, err := parseJSON(in)
		if ok != (err == nil) {
			t.Fatalf("%q: encoding/json ok=%v, parseJSON err=%v", in, ok, err)
		}
		if ok && !reflect.DeepEqual(want, got) {
			t.Fatalf("%q: trees differ:\n std %#v\n got %#v", in, want, got)
		}
	})
}

// FuzzDecodeRequest: no body makes the request decoder panic, and every
// rejection is a 422 HandlerError naming a field.
func FuzzDecodeRequest(f *testing.F) {
	raw, err := os.ReadFile("testdata/droid_request.json")
	require.NoError(f, err)
	f.Add(raw[:2000])
	f.Add([]byte(`{"images":{"a":["eA=="]},"state":{"g":[[1]]},"instruction":"x","seed":3}`))
	f.Add([]byte(`{"images":{},"state":[[1,2]],"prompt":"x","noise":[[[1]]]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := decodeJSON(in)
		if err != nil {
			var he *HandlerError
			require.ErrorAs(t, err, &he)
			require.Contains(t, []int{400, 422}, he.Status)
			require.NotEmpty(t, he.Field)
			return
		}
		_, _ = validate(r, &droidInfo, &ModelInfo{ActionDim: testActionDim})
	})
}

// FuzzDecodeMsgpack: msgpack bodies go through the same schema; no input
// panics and every rejection is a 400/422 naming a field.
func FuzzDecodeMsgpack(f *testing.F) {
	f.Add([]byte{0x81, 0xa6, 's', 't', 'a', 't', 'e', 0x90})
	f.Add([]byte{0xc1})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := decodeMsgpack(in)
		if err != nil {
			var he *HandlerError
			require.ErrorAs(t, err, &he)
			require.Contains(t, []int{400, 422}, he.Status)
			require.NotEmpty(t, he.Field)
			return
		}
		_, _ = validate(r, &droidInfo, &ModelInfo{ActionDim: testActionDim})
	})
}

// TestBodyValueLimit: a body of more than maxBodyValues values is refused
// as too large (413, field body) in both encodings, before its values
// cost tens of bytes each; exactly the limit parses.
func TestBodyValueLimit(t *testing.T) {
	jsonArray := func(n int) []byte { // {"state":[0,0,…]}: n values in all
		return []byte(`{"state":[` + strings.Repeat("0,", n-3) + `0]}`)
	}
	mpArray := func(n int) []byte { // {"state": [nil × (n−3)]}: n values
		b := []byte{0x81, 0xa5, 's', 't', 'a', 't', 'e', 0xdd, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[8:], uint32(n-3))
		return append(b, bytes.Repeat([]byte{0xc0}, n-3)...)
	}
	for _, tc := range []struct {
		name   string
		parse  func([]byte) (any, error)
		decode func([]byte) (*Request, error)
		body   func(int) []byte
	}{
		{"json", parseJSON, decodeJSON, jsonArray},
		{"msgpack", parseMsgpack, decodeMsgpack, mpArray},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.parse(tc.body(maxBodyValues))
			require.NoError(t, err)
			_, err = tc.decode(tc.body(maxBodyValues + 1))
			var he *HandlerError
			require.ErrorAs(t, err, &he)
			assert.Equal(t, 413, he.Status)
			assert.Equal(t, CodeTooLarge, he.Code)
			assert.Equal(t, "body", he.Field)
			assert.Contains(t, he.Error(), "more than 1048576 values in one body")
		})
	}
}
