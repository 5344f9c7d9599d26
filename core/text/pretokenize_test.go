package text

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/stretchr/testify/require"
)

// refSplit is the reference pre-tokenizer: QwenPattern compiled by regexp2
// with DEFAULT options (.NET semantics: \s is Unicode White_Space, look-ahead
// supported). RE2 mode would make \s ASCII-only and is deliberately not used.
var refRE = func() *regexp2.Regexp {
	re := regexp2.MustCompile(QwenPattern, regexp2.None)
	re.MatchTimeout = 10 * time.Second
	return re
}()

func refSplit(tb testing.TB, s string) []string {
	tb.Helper()
	var out []string
	rs := []rune(s)
	m, err := refRE.FindRunesMatch(rs)
	last := 0
	for ; err == nil && m != nil; m, err = refRE.FindNextMatch(m) {
		if m.Index > last { // unmatched gap (never happens for this pattern)
			out = append(out, string(rs[last:m.Index]))
		}
		out = append(out, m.String())
		last = m.Index + m.Length
	}
	require.NoError(tb, err)
	if last < len(rs) {
		out = append(out, string(rs[last:]))
	}
	return out
}

// comparable: regexp2 works on []rune, which turns invalid bytes into
// U+FFFD, so only valid UTF-8 is compared (Encode rejects the rest).
func comparable(s string) bool { return utf8.ValidString(s) }

func TestSplitMatchesRegexp2OnCorpus(t *testing.T) {
	for i, g := range readGolden(t) {
		s := nfcString(g.Text)
		got := AppendPieces(nil, s)
		want := refSplit(t, s)
		require.Equal(t, want, got, "line %d %q", i+1, s)
	}
}

func TestSplitExamples(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  \n\n  café", []string{"  \n\n", " ", " café"}},
		{"I'LL  x", []string{"I", "'LL", " ", " x"}},
		{"don'T", []string{"don", "'T"}},
		{"'sa", []string{"'s", "a"}},
		{" 'll", []string{" '", "ll"}},
		{"12345", []string{"1", "2", "3", "4", "5"}},
		{"a  ", []string{"a", "  "}},
		{"x\u00a0_a", []string{"x", "\u00a0", "_a"}},
		{"a!!\r\n\r\nb", []string{"a", "!!\r\n\r\n", "b"}},
		{"a \r\n b", []string{"a", " \r\n", " b"}},
	} {
		require.Equal(t, c.want, AppendPieces(nil, c.in), "%q", c.in)
	}
}

// randomText draws runes from classes that stress every alternative.
func randomText(r *rand.Rand, n int) string {
	classes := [][]rune{
		[]rune("aZsStTrReEvVmMlLdD"), []rune("0123456789٣۴²½Ⅻ①𝟘"), []rune(" \t\n\r\v\f"),
		[]rune("\u00a0\u3000\u0085\u2028\u2029\u2003\u1680\u202f\u205f\u200b\ufeff\u00ad\u180e\u001c"),
		[]rune("'’.,!?-_()\"#<>|/\\~"), []rune("\u0301\u0308\u0345\u20dd\ufe0f\u200d"),
		[]rune("éßſıİΣςЖ中日のカ한글नािกีعש🤖👍🏽🇫🇷\u212a"),
	}
	var b strings.Builder
	for range n {
		cl := classes[r.IntN(len(classes))]
		b.WriteRune(cl[r.IntN(len(cl))])
	}
	return b.String()
}

func TestSplitMatchesRegexp2Random(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		s := randomText(r, 1+r.IntN(30))
		require.Equal(t, refSplit(t, s), AppendPieces(nil, s), "%q", s)
	}
}

// FuzzSplit checks that the hand-written splitter never panics, covers its
// input exactly, and equals the regexp2 reference on valid UTF-8.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"", "Hello, world! 12345 don't  I'LL  \n\n  café", "a\u00a0 b\r\n\r\n", "'s'S'll'LL", "x\u0085\u3000y", "!!\n\n??"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendPieces(nil, s)
		if strings.Join(got, "") != s {
			t.Fatalf("pieces %q do not concatenate to %q", got, s)
		}
		for _, p := range got {
			if p == "" {
				t.Fatalf("empty piece in %q", got)
			}
		}
		if !comparable(s) {
			return
		}
		want := refSplit(t, s)
		if strings.Join(want, "\x00") != strings.Join(got, "\x00") {
			t.Fatalf("%q: got %q, regexp2 %q", s, got, want)
		}
	})
}
