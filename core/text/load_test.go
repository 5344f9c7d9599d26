package text

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// miniJSON builds a tiny byte-level tokenizer.json: all 256 byte tokens,
// plus "ab" and "abc" with merges in the given form.
func miniJSON(merges string, extra string) string {
	var v strings.Builder
	v.WriteString("{")
	for b := range 256 {
		if b > 0 {
			v.WriteString(",")
		}
		v.WriteString(quoteJSON(string(byteToRune[b])))
		v.WriteString(":")
		v.WriteString(itoa(b))
	}
	v.WriteString(`,"ab":256,"abc":257,"Ġab":258}`)
	pat := strings.ReplaceAll(strings.ReplaceAll(QwenPattern, `\`, `\\`), `"`, `\"`)
	return `{"version":"1.0","truncation":null,"padding":null,` +
		`"added_tokens":[{"id":259,"content":"<|x|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],` +
		`"normalizer":{"type":"NFC"},` +
		`"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"` + pat + `"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]},` +
		`"post_processor":null,"decoder":{"type":"ByteLevel"},` +
		`"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":"","end_of_word_suffix":"","fuse_unk":false,"byte_fallback":false,"ignore_merges":false` + extra + `,` +
		`"vocab":` + v.String() + `,"merges":` + merges + `}}`
}

func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

func TestLoadMergeForms(t *testing.T) {
	for name, merges := range map[string]string{
		"strings": `["a b","ab c","Ġ ab"]`,
		"pairs":   `[["a","b"],["ab","c"],["Ġ","ab"]]`,
		"mixed":   `[["a","b"],"ab c", ["Ġ" , "ab"] ]`,
	} {
		t.Run(name, func(t *testing.T) {
			tok, err := Load(strings.NewReader(miniJSON(merges, "")))
			require.NoError(t, err)
			ids, err := tok.Encode("abc ab<|x|>ac")
			require.NoError(t, err)
			require.Equal(t, []int32{257, 258, 259, 'a', 'c'}, ids)
		})
	}
}

func TestLoadMergesBeforeVocab(t *testing.T) {
	js := miniJSON(`["a b","ab c"]`, "")
	// Move "merges" in front of "vocab".
	mi := strings.Index(js, `,"merges":`)
	vi := strings.Index(js, `,"vocab":`)
	merges := js[mi : len(js)-2]
	js = js[:vi] + merges + js[vi:mi] + "}}"
	tok, err := Load(strings.NewReader(js))
	require.NoError(t, err)
	ids, err := tok.Encode("abc")
	require.NoError(t, err)
	require.Equal(t, []int32{257}, ids)
}

func TestLoadRejects(t *testing.T) {
	for name, js := range map[string]string{
		"truncated":     miniJSON(`["a b"]`, "")[:500],
		"bad merge":     miniJSON(`["a"]`, ""),
		"oov merge":     miniJSON(`["x y"]`, ""),
		"dropout":       strings.Replace(miniJSON(`[]`, ""), `"dropout":null`, `"dropout":0.1`, 1),
		"byte fallback": strings.Replace(miniJSON(`[]`, ""), `"byte_fallback":false`, `"byte_fallback":true`, 1),
		"not bpe":       strings.Replace(miniJSON(`[]`, ""), `"type":"BPE"`, `"type":"WordPiece"`, 1),
		"pattern":       strings.Replace(miniJSON(`[]`, ""), `'s|'t`, `'s|'x`, 1),
		"normalizer":    strings.Replace(miniJSON(`[]`, ""), `{"type":"NFC"}`, `{"type":"NFKC"}`, 1),
		"lstrip":        strings.Replace(miniJSON(`[]`, ""), `"lstrip":false`, `"lstrip":true`, 1),
		"float id":      strings.Replace(miniJSON(`[]`, ""), `"ab":256`, `"ab":256.5`, 1),
		"trailing":      miniJSON(`[]`, "") + "x",
		"sparse id":     strings.Replace(miniJSON(`[]`, ""), `"Ġab":258`, `"Ġab":200000000`, 1), // 1.5 GB of table
		"sparse added":  strings.Replace(miniJSON(`[]`, ""), `"id":259`, `"id":2147483647`, 1),
		"split alone":   splitAlone(),
		"empty":         "",
		"not object":    "[]",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(strings.NewReader(js))
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "text: tokenizer.json: "), err.Error())
		})
	}
}

func TestLoadEscapes(t *testing.T) {
	js := strings.Replace(miniJSON(`["a b"]`, ""), `"ab":256`, `"\u0061\u0062":256`, 1)
	tok, err := Load(strings.NewReader(js))
	require.NoError(t, err)
	ids, err := tok.Encode("ab")
	require.NoError(t, err)
	require.Equal(t, []int32{256}, ids)
}

func TestLoadFileMissing(t *testing.T) {
	_, err := LoadFile("does/not/exist.json")
	require.Error(t, err)
}

func FuzzLoad(f *testing.F) {
	f.Add(miniJSON(`["a b","ab c"]`, ""))
	f.Add(miniJSON(`[["a","b"]]`, ""))
	f.Add(`{"model":{"type":"BPE","vocab":{"\u00e9":1},"merges":[]}}`)
	f.Fuzz(func(t *testing.T, js string) {
		tok, err := Load(strings.NewReader(js))
		if err != nil {
			return
		}
		_, _ = tok.Encode("abc ab<|x|>ac")
	})
}

// splitAlone drops the ByteLevel step: HF would then not byte-map, so Load
// must refuse.
func splitAlone() string {
	js := miniJSON(`[]`, "")
	i := strings.Index(js, `{"type":"Sequence","pretokenizers":[`)
	j := strings.Index(js, `,{"type":"ByteLevel","add_prefix_space"`)
	k := strings.Index(js[j:], `]}`) + j + 2
	return js[:i] + js[i+len(`{"type":"Sequence","pretokenizers":[`):j] + js[k:]
}
