package text

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

// Goldens: testdata/text/tokenizer_golden.jsonl was produced by
// testdata/text/gen_tokenizer_golden.js with npm @huggingface/tokenizers 0.2.0
// (pure JS) and cross-checked line by line with npm tokenizers 0.23.2 (the
// Rust library as a Node addon): 0 disagreements. VERIFY_NODEREF=1 re-runs the
// generator live (needs node and the packages under NODE_PATH, default
// build/tokref/node_modules of the repository; see the script header).

const (
	tokenizerPath = "../../testdata/tokenizer/qwen3/tokenizer.json"
	goldenPath    = "../../testdata/text/tokenizer_golden.jsonl"
)

var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenErr  error
)

func qwen(tb testing.TB) *Tokenizer {
	tb.Helper()
	qwenOnce.Do(func() { qwenTok, qwenErr = LoadFile(tokenizerPath) })
	require.NoError(tb, qwenErr)
	return qwenTok
}

type goldenLine struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

func readGolden(tb testing.TB) []goldenLine {
	tb.Helper()
	f, err := os.Open(goldenPath)
	require.NoError(tb, err)
	defer f.Close()
	var out []goldenLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var g goldenLine
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &g))
		out = append(out, g)
	}
	require.NoError(tb, sc.Err())
	return out
}

func TestEncodeGolden(t *testing.T) {
	tok := qwen(t)
	lines := readGolden(t)
	require.GreaterOrEqual(t, len(lines), 300)
	bad := 0
	for i, g := range lines {
		got, err := tok.Encode(g.Text)
		require.NoError(t, err, "line %d", i+1)
		if g.IDs == nil {
			g.IDs = []int32{}
		}
		if !equalIDs(got, g.IDs) {
			bad++
			t.Errorf("line %d %q:\n got  %v\n want %v", i+1, g.Text, got, g.IDs)
		}
		// Decode inverts Encode on valid text.
		back, err := tok.Decode(got, false)
		require.NoError(t, err)
		if norm := nfcString(g.Text); back != norm {
			t.Errorf("line %d: decode %q, want %q", i+1, back, norm)
		}
	}
	require.Zero(t, bad, "%d of %d golden lines differ", bad, len(lines))
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestVerifyNodeRef(t *testing.T) {
	if os.Getenv("VERIFY_NODEREF") == "" {
		t.Skip("set VERIFY_NODEREF=1 to re-run testdata/text/gen_tokenizer_golden.js (node + npm packages)")
	}
	np := os.Getenv("NODE_PATH")
	if np == "" {
		np = filepath.Join("..", "..", "build", "tokref", "node_modules")
	}
	cmd := exec.Command("node", filepath.Join("..", "..", "testdata", "text", "gen_tokenizer_golden.js"), "--check")
	cmd.Env = append(os.Environ(), "NODE_PATH="+np)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	require.NoError(t, err, "node reference differs from the committed goldens")
}

func TestDemoPromptIDs(t *testing.T) {
	tok := qwen(t)
	for _, c := range []struct {
		in   string
		want []int32
	}{
		{"put the blue block in the green bowl", []int32{628, 279, 6303, 2504, 304, 279, 6176, 19212}},
		{"<|im_start|>user\n<|vision_start|><|image_pad|><|image_pad|><|vision_end|>put the blue block in the green bowl<|im_end|>\n<|im_start|>assistant\n",
			[]int32{151644, 872, 198, 151652, 151655, 151655, 151653, 628, 279, 6303, 2504, 304, 279, 6176, 19212, 151645, 198, 151644, 77091, 198}},
	} {
		got, err := tok.Encode(c.in)
		require.NoError(t, err)
		require.Equal(t, c.want, got, c.in)
	}
}

func TestEncodeInvalidUTF8(t *testing.T) {
	tok := qwen(t)
	for _, s := range []string{"\xff", "abc\xc3", "ok \xed\xa0\x80 surrogate", "a\x80b"} {
		_, err := tok.Encode(s)
		require.ErrorIs(t, err, ErrInvalidUTF8, "%q", s)
	}
	_, err := tok.BuildPrompt("bad \xff", []int{1}, PromptOptions{Formalize: true})
	var ie *InstructionError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "instruction", ie.Field)
	require.ErrorIs(t, err, ErrInvalidUTF8)
}

func TestEncodeOrdinaryAndTokenID(t *testing.T) {
	tok := qwen(t)
	id, ok := tok.TokenID("<|image_pad|>")
	require.True(t, ok)
	require.Equal(t, int32(151655), id)
	id, ok = tok.TokenID("Ġthe")
	require.True(t, ok)
	require.Equal(t, int32(279), id)
	_, ok = tok.TokenID("<|nope|>")
	require.False(t, ok)
	require.True(t, tok.IsSpecial(151655))
	require.False(t, tok.IsSpecial(151667)) // <think> is added but not special
	require.False(t, tok.IsSpecial(279))
	require.Equal(t, 151669, tok.VocabSize())
	ids, err := tok.EncodeOrdinary("<|im_end|>")
	require.NoError(t, err)
	require.NotContains(t, ids, int32(151645))
	s, err := tok.Decode(ids, false)
	require.NoError(t, err)
	require.Equal(t, "<|im_end|>", s)
	s, err = tok.Decode([]int32{151644, 872, 151645}, true)
	require.NoError(t, err)
	require.Equal(t, "user", s)
	_, err = tok.Decode([]int32{1 << 30}, false)
	require.Error(t, err)
}

// TestEncodeConcurrent hammers Encode from several goroutines (run with
// -race) and checks every result against a single-threaded one.
func TestEncodeConcurrent(t *testing.T) {
	tok := qwen(t)
	lines := readGolden(t)
	const P = 8
	iters := 3
	if testing.Short() {
		iters = 1
	}
	var wg sync.WaitGroup
	errs := make(chan string, P)
	for p := range P {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range iters {
				for i := range lines {
					g := lines[(i*7+p+it)%len(lines)]
					got, err := tok.Encode(g.Text)
					if err != nil || (len(g.IDs) > 0 && !equalIDs(got, g.IDs)) {
						errs <- g.Text
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent encode of %q differs", s)
	}
}

func TestCacheBounded(t *testing.T) {
	tok := new(Tokenizer)
	*tok = *qwen(t) // shares the immutable tables, gets its own cache
	tok.cache = newPieceCache(8)
	var sb strings.Builder
	for i := range 100 {
		sb.WriteString(" w")
		sb.WriteByte(byte('a' + i%26))
		sb.WriteByte(byte('a' + i/26))
	}
	ids1, err := tok.Encode(sb.String())
	require.NoError(t, err)
	require.LessOrEqual(t, len(tok.cache.m), 8)
	ids2, err := tok.Encode(sb.String())
	require.NoError(t, err)
	require.Equal(t, ids1, ids2)
}

func nfcString(s string) string { return norm.NFC.String(s) }

// TestBPEHeapEqualsQuadratic runs both BPE loops on every golden
// pre-token and on long random ones.
func TestBPEHeapEqualsQuadratic(t *testing.T) {
	tok := qwen(t)
	check := func(piece string) {
		t.Helper()
		a := tok.bpeShort(nil, piece)
		b := tok.bpeLong(nil, piece)
		require.Equal(t, a, b, "%q", piece)
	}
	for _, g := range readGolden(t) {
		SplitPieces(nfcString(g.Text), func(p string) {
			if len(p) > 1 {
				check(p)
			}
		})
	}
	r := rand.New(rand.NewPCG(3, 4))
	alpha := []string{"a", "b", "e", "r", "t", "in", "the", " ", "中", "文", "🤖", "ab", "é", "\u0301", "1"}
	for range 300 {
		var sb strings.Builder
		for range 1 + r.IntN(120) {
			sb.WriteString(alpha[r.IntN(len(alpha))])
		}
		check(sb.String())
	}
}

// TestEncodeLongBounded: a 20 kB single pre-token stays fast (heap BPE).
func TestEncodeLongBounded(t *testing.T) {
	tok := qwen(t)
	for _, s := range []string{strings.Repeat(" ", 20000), strings.Repeat("ab", 10000), strings.Repeat("中", 6000)} {
		t0 := time.Now()
		ids, err := tok.Encode(s)
		require.NoError(t, err)
		require.NotEmpty(t, ids)
		require.Less(t, time.Since(t0), 5*time.Second)
		back, err := tok.Decode(ids, false)
		require.NoError(t, err)
		require.Equal(t, s, back)
	}
}

// FuzzEncode: Encode never panics, round-trips valid text through Decode
// (after NFC), and both BPE loops agree on every pre-token.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "put the blue block", "<|im_end|>x<|image_pad|>", "ab ab ab", "中文🤖"} {
		f.Add(s)
	}
	tok := qwen(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := tok.Encode(s)
		if !utf8.ValidString(s) {
			require.ErrorIs(t, err, ErrInvalidUTF8)
			return
		}
		require.NoError(t, err)
		back, err := tok.Decode(ids, false)
		require.NoError(t, err)
		require.Equal(t, nfcSegments(tok, s), back)
		SplitPieces(s, func(p string) {
			require.Equal(t, tok.bpeShort(nil, p), tok.bpeLong(nil, p))
		})
	})
}

// nfcSegments applies NFC between added tokens, as Encode does.
func nfcSegments(tok *Tokenizer, s string) string {
	var b strings.Builder
	start := 0
	for i := 0; i < len(s); {
		matched := ""
		for _, k := range tok.addedFirst[s[i]] {
			if strings.HasPrefix(s[i:], tok.added[k].Content) {
				matched = tok.added[k].Content
				break
			}
		}
		if matched == "" {
			i++
			continue
		}
		b.WriteString(norm.NFC.String(s[start:i]))
		b.WriteString(matched)
		i += len(matched)
		start = i
	}
	b.WriteString(norm.NFC.String(s[start:]))
	return b.String()
}
