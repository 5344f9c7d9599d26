package gateway

import (
	"bytes"
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

// FuzzParseJSON checks parseJSON against encoding/json: same accept/reject
// decision and the same tree, for every valid-UTF-8 input of bounded depth.
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
