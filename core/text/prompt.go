package text

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Added-token contents used by the GR00T N1.7 (Qwen3-VL chat template)
// prompt.
const (
	ImStart     = "<|im_start|>"
	ImEnd       = "<|im_end|>"
	VisionStart = "<|vision_start|>"
	VisionEnd   = "<|vision_end|>"
	ImagePad    = "<|image_pad|>"
)

// Conditions callers branch on; BuildPrompt returns them wrapped in an
// *InstructionError.
var (
	// ErrEmptyInstruction: nothing but white space is left after
	// formalisation (e.g. "!!!").
	ErrEmptyInstruction = errors.New("instruction is empty after formalization")
	// ErrInstructionTooLong: the instruction needs more than L_max tokens.
	ErrInstructionTooLong = errors.New("n_text exceeds L_max")
	// ErrSpecialToken: the (unformalised) instruction contains a special
	// added token such as "<|image_pad|>", which would corrupt the layout.
	ErrSpecialToken = errors.New("instruction contains a special token")
)

// InstructionError reports an instruction the prompt builder rejects. It is
// a client error: the gateway maps it to HTTP 400 naming Field. Err is one of
// ErrEmptyInstruction, ErrInstructionTooLong, ErrSpecialToken or
// ErrInvalidUTF8.
type InstructionError struct {
	Field string // request field at fault: "instruction"
	NText int    // instruction token count (ErrInstructionTooLong)
	LMax  int    // the limit in force (ErrInstructionTooLong)
	Err   error
}

// Error returns "text: <field>: <reason>", with "(n_text > L_max)" for
// ErrInstructionTooLong.
func (e *InstructionError) Error() string {
	if errors.Is(e.Err, ErrInstructionTooLong) {
		return fmt.Sprintf("text: %s: %v (%d > %d)", e.Field, e.Err, e.NText, e.LMax)
	}
	return fmt.Sprintf("text: %s: %v", e.Field, e.Err)
}

// Unwrap returns the sentinel (or ErrInvalidUTF8 chain) behind e.
func (e *InstructionError) Unwrap() error { return e.Err }

// PromptOptions configures BuildPrompt. The zero value uses the raw
// instruction and no length limit.
type PromptOptions struct {
	// Formalize applies FormalizeLanguage first (processor_config
	// "formalize_language"; true for the released N1.7 checkpoint).
	Formalize bool
	// MaxTextTokens is L_max, the most instruction tokens accepted (51 for
	// DROID: 512 − 461); 0 means no limit.
	MaxTextTokens int
}

// Prompt is the tokenized N1.7 prompt of one observation (batch 1, so no
// padding). The slices are owned by the caller.
type Prompt struct {
	// InputIDs is [S]: <|im_start|> user \n, then per image <|vision_start|>
	// n×<|image_pad|> <|vision_end|>, the instruction tokens, <|im_end|> \n.
	InputIDs []int64
	// AttentionMask is [S], all ones.
	AttentionMask []int64
	// Text is the instruction after formalisation (the text that was tokenized).
	Text string
	// TextIDs are the instruction's token ids (len = n_text).
	TextIDs []int32
	// ImageTokens is the total number of <|image_pad|> tokens.
	ImageTokens int
}

// promptIDs are the ids the prompt layout needs, resolved once per call
// (cheap: a few map lookups).
type promptIDs struct {
	imStart, imEnd, visionStart, visionEnd, imagePad, user, newline int32
}

func (t *Tokenizer) promptIDs() (promptIDs, error) {
	var p promptIDs
	for _, x := range []struct {
		tok string
		dst *int32
	}{
		{ImStart, &p.imStart}, {ImEnd, &p.imEnd}, {VisionStart, &p.visionStart},
		{VisionEnd, &p.visionEnd}, {ImagePad, &p.imagePad},
		{"user", &p.user}, {byteLevel("\n"), &p.newline},
	} {
		id, ok := t.TokenID(x.tok)
		if !ok {
			return p, fmt.Errorf("text: prompt: token %q not in the vocabulary", x.tok)
		}
		*x.dst = id
	}
	return p, nil
}

// BuildPrompt tokenizes the GR00T N1.7 prompt for one observation with
// len(imageTokens) images, image i contributing imageTokens[i] copies of
// <|image_pad|> (grid_t·grid_h·grid_w / merge_size², 112 for a DROID frame),
// in the layout of the Qwen3-VL chat template (one user turn, no system
// turn, no generation prompt):
//
//	<|im_start|>user\n (<|vision_start|><|image_pad|>×n<|vision_end|>)×images TEXT<|im_end|>\n
//
// The fixed parts are emitted as ids; only TEXT (the instruction, formalised
// when opt.Formalize) is run through Encode, which equals tokenizing the
// whole rendered string (RenderPrompt) when there is at least one image,
// because TEXT is then delimited by added tokens on both sides.
//
// Instruction problems return an *InstructionError (Field "instruction"):
// invalid UTF-8, nothing but white space after formalisation, a special
// token inside the text, or more than opt.MaxTextTokens tokens (message
// contains "n_text exceeds L_max"). Other errors mean a tokenizer without
// the Qwen special tokens.
func (t *Tokenizer) BuildPrompt(instruction string, imageTokens []int, opt PromptOptions) (*Prompt, error) {
	ids, err := t.promptIDs()
	if err != nil {
		return nil, err
	}
	instErr := func(e error) error { return &InstructionError{Field: "instruction", Err: e} }
	if !utf8.ValidString(instruction) {
		return nil, instErr(ErrInvalidUTF8)
	}
	text := instruction
	if opt.Formalize {
		text = FormalizeLanguage(text)
	}
	if strings.TrimFunc(text, isPySpace) == "" {
		return nil, instErr(ErrEmptyInstruction)
	}
	textIDs, err := t.Encode(text)
	if err != nil {
		return nil, instErr(err)
	}
	for _, id := range textIDs {
		if t.IsSpecial(id) {
			return nil, instErr(fmt.Errorf("%w (%s)", ErrSpecialToken, t.idToToken[id]))
		}
	}
	if opt.MaxTextTokens > 0 && len(textIDs) > opt.MaxTextTokens {
		return nil, &InstructionError{Field: "instruction", NText: len(textIDs), LMax: opt.MaxTextTokens, Err: ErrInstructionTooLong}
	}
	nImg := 0
	for i, n := range imageTokens {
		if n <= 0 {
			return nil, fmt.Errorf("text: prompt: image[%d]: %d image tokens", i, n)
		}
		nImg += n
	}
	s := 3 + 2*len(imageTokens) + nImg + len(textIDs) + 2
	in := make([]int64, 0, s)
	in = append(in, int64(ids.imStart), int64(ids.user), int64(ids.newline))
	for _, n := range imageTokens {
		in = append(in, int64(ids.visionStart))
		for range n {
			in = append(in, int64(ids.imagePad))
		}
		in = append(in, int64(ids.visionEnd))
	}
	for _, id := range textIDs {
		in = append(in, int64(id))
	}
	in = append(in, int64(ids.imEnd), int64(ids.newline))
	mask := make([]int64, len(in))
	for i := range mask {
		mask[i] = 1
	}
	return &Prompt{InputIDs: in, AttentionMask: mask, Text: text, TextIDs: textIDs, ImageTokens: nImg}, nil
}

// RenderChatTemplate returns the chat-template output for text and numImages
// images before image-token expansion (one <|image_pad|> per image), as
// apply_chat_template(tokenize=False, add_generation_prompt=False) renders
// it with the Qwen3-VL template.
func RenderChatTemplate(text string, numImages int) string {
	n := make([]int, numImages)
	for i := range n {
		n[i] = 1
	}
	return RenderPrompt(text, n)
}

// RenderPrompt returns the tokenizer input after image-token expansion:
// image i has imageTokens[i] copies of <|image_pad|>. Encode(RenderPrompt(…))
// equals BuildPrompt's InputIDs.
func RenderPrompt(text string, imageTokens []int) string {
	var b strings.Builder
	b.WriteString(ImStart + "user\n")
	for _, n := range imageTokens {
		b.WriteString(VisionStart)
		b.WriteString(strings.Repeat(ImagePad, max(n, 0)))
		b.WriteString(VisionEnd)
	}
	b.WriteString(text)
	b.WriteString(ImEnd + "\n")
	return b.String()
}
