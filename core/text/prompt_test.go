package text

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuildPromptCaseA(t *testing.T) {
	tok := qwen(t)
	raw, err := os.ReadFile("../../testdata/n17-tiny/caseA/prompt.json")
	require.NoError(t, err)
	var pj struct {
		Instruction           string  `json:"instruction"`
		InstructionFormalized string  `json:"instruction_formalized"`
		InstructionTokenIDs   []int32 `json:"instruction_token_ids"`
		PromptRendered        string  `json:"prompt_rendered"`
		SeqLen                int     `json:"seq_len"`
		NImageTokens          int     `json:"n_image_tokens"`
		NTextTokens           int     `json:"n_text_tokens"`
	}
	require.NoError(t, json.Unmarshal(raw, &pj))
	imgs := []int{112, 112, 112, 112}
	p, err := tok.BuildPrompt(pj.Instruction, imgs, PromptOptions{Formalize: true, MaxTextTokens: 51})
	require.NoError(t, err)
	require.Equal(t, pj.InstructionFormalized, p.Text)
	require.Equal(t, pj.InstructionTokenIDs, p.TextIDs)
	require.Len(t, p.InputIDs, pj.SeqLen)
	require.Equal(t, pj.NImageTokens, p.ImageTokens)
	require.Len(t, p.TextIDs, pj.NTextTokens)
	require.Equal(t, pj.PromptRendered, RenderChatTemplate(p.Text, 4))
	for _, m := range p.AttentionMask {
		require.Equal(t, int64(1), m)
	}
	// Building from ids equals tokenizing the expanded string.
	full, err := tok.Encode(RenderPrompt(p.Text, imgs))
	require.NoError(t, err)
	require.Len(t, full, len(p.InputIDs))
	for i := range full {
		require.Equal(t, int64(full[i]), p.InputIDs[i], "token %d", i)
	}
	// The N1.7 DROID layout: 3 + 4×114 + L_text + 2.
	require.Equal(t, []int64{151644, 872, 198, 151652}, p.InputIDs[:4])
	require.Equal(t, int64(151653), p.InputIDs[458])
	require.Equal(t, []int64{151645, 198}, p.InputIDs[467:])
}

func TestBuildPromptEqualsEncodeOfRendered(t *testing.T) {
	tok := qwen(t)
	for _, inst := range []string{"a", "  spaced  out  ", "Ünïcödé ½ ２ 你好", "line\nbreak\r\n", "tabs\tand\u3000ideo", "it's I'LL"} {
		for _, imgs := range [][]int{{1}, {3, 2}, {112, 112, 112, 112}} {
			p, err := tok.BuildPrompt(inst, imgs, PromptOptions{Formalize: true})
			require.NoError(t, err, "%q", inst)
			full, err := tok.Encode(RenderPrompt(p.Text, imgs))
			require.NoError(t, err)
			got := make([]int32, len(p.InputIDs))
			for i, v := range p.InputIDs {
				got[i] = int32(v)
			}
			require.Equal(t, full, got, "%q %v", inst, imgs)
		}
	}
}

func TestBuildPromptErrors(t *testing.T) {
	tok := qwen(t)
	long := strings.Repeat("block ", 52)
	for _, c := range []struct {
		name, in string
		opt      PromptOptions
		want     error
		msg      string
	}{
		{"empty", "", PromptOptions{Formalize: true}, ErrEmptyInstruction, "empty"},
		{"punct only", "?!...;", PromptOptions{Formalize: true}, ErrEmptyInstruction, "empty"},
		{"spaces only", " \t\u3000\x1c", PromptOptions{Formalize: true}, ErrEmptyInstruction, "empty"},
		{"too long", long, PromptOptions{Formalize: true, MaxTextTokens: 51}, ErrInstructionTooLong, "n_text exceeds L_max (53 > 51)"},
		{"special", "look <|image_pad|> here", PromptOptions{}, ErrSpecialToken, "special token"},
		{"utf8", "\xff", PromptOptions{}, ErrInvalidUTF8, "UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := tok.BuildPrompt(c.in, []int{112}, c.opt)
			require.ErrorIs(t, err, c.want)
			var ie *InstructionError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, "instruction", ie.Field)
			require.Contains(t, err.Error(), c.msg)
		})
	}
	// Exactly L_max tokens is accepted; formalisation removes the special
	// token's punctuation, so it is then plain text.
	p, err := tok.BuildPrompt(strings.Repeat("block ", 51)[:len(strings.Repeat("block ", 51))-1], []int{1}, PromptOptions{Formalize: true, MaxTextTokens: 51})
	require.NoError(t, err)
	require.Len(t, p.TextIDs, 51)
	p, err = tok.BuildPrompt("look <|image_pad|> here", []int{1}, PromptOptions{Formalize: true})
	require.NoError(t, err)
	require.Equal(t, "look image_pad here", p.Text)
	_, err = tok.BuildPrompt("x", []int{0}, PromptOptions{})
	require.Error(t, err)
}

// BenchmarkEncodeDemo encodes the demo instruction (cache warm after the
// first iteration, as in serving).
func BenchmarkEncodeDemo(b *testing.B) {
	tok := qwen(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tok.Encode("put the blue block in the green bowl"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeDemoCold measures BPE without the per-piece cache.
func BenchmarkEncodeDemoCold(b *testing.B) {
	tok := qwen(b)
	b.ReportAllocs()
	for b.Loop() {
		tok.cache.mu.Lock()
		clear(tok.cache.m)
		tok.cache.mu.Unlock()
		if _, err := tok.Encode("put the blue block in the green bowl"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildPromptDROID builds the full 469-token case-A prompt.
func BenchmarkBuildPromptDROID(b *testing.B) {
	tok := qwen(b)
	imgs := []int{112, 112, 112, 112}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tok.BuildPrompt("Put the blue block in the green bowl", imgs, PromptOptions{Formalize: true, MaxTextTokens: 51}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadFile(tokenizerPath); err != nil {
			b.Fatal(err)
		}
	}
}
