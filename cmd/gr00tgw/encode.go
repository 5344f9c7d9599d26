package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/core/processor"
)

func init() {
	register(&command{
		name:    "encode",
		summary: "run the host preprocessing on a /predict body and write the model inputs as .npy",
		run:     runEncode,
	})
}

// encodeRequest is the part of a /predict body the host pipeline reads;
// other fields (state, noise, seed, ...) are ignored here.
type encodeRequest struct {
	Images map[string][]string `json:"images"`
	instructionFields
	Embodiment string `json:"embodiment"`
}

// instructionFields are the instruction and its aliases, as /predict reads
// them: exactly one of them, a string.
type instructionFields struct {
	Instruction *string `json:"instruction"`
	Language    *string `json:"language"`
	Prompt      *string `json:"prompt"`
}

// instruction is the one instruction field sent; none, or two aliases, is
// an error (as /predict answers 422).
func (f instructionFields) instruction() (string, error) {
	var name, v string
	for _, a := range []struct {
		name string
		v    *string
	}{{"instruction", f.Instruction}, {"language", f.Language}, {"prompt", f.Prompt}} {
		if a.v == nil {
			continue
		}
		if name != "" {
			return "", fmt.Errorf("%s and %s are aliases: send only one", name, a.name)
		}
		name, v = a.name, *a.v
	}
	if name == "" {
		return "", fmt.Errorf("no instruction (or its aliases language, prompt)")
	}
	return v, nil
}

func runEncode(_ context.Context, args []string) error {
	fs := newFlags("encode", "--request REQ.json --out DIR [--weights-dir DIR]",
		"Runs the host pipeline (decode, eval chain, patchify, tokenizer, prompt, mRoPE)\non a /predict body and writes every model input and intermediate as .npy.")
	reqPath := fs.String("request", "", "`REQ.json`: a /predict body (images, instruction|language|prompt, embodiment)")
	outDir := fs.String("out", "", "`DIR` to write frames_eval, frames_resized, pixel_values, image_grid_thw, input_ids, attention_mask, position_ids (.npy)")
	weights := fs.String("weights-dir", "", "checkpoint `DIR` with processor_config.json (and optionally tokenizer.json); default: the repository's testdata/n17-tiny")
	deprecatedAlias(fs, "weights", "weights-dir")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *reqPath == "" || *outDir == "" {
		return fmt.Errorf("%w: --request and --out are required", errUsage)
	}
	raw, err := os.ReadFile(*reqPath)
	if err != nil {
		return err
	}
	var req encodeRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return fmt.Errorf("request %s: %w", *reqPath, err)
	}
	inst, err := req.instruction()
	if err != nil {
		return fmt.Errorf("request %s: %w", *reqPath, err)
	}

	if *weights == "" {
		if *weights, err = defaultWeights(); err != nil {
			return err
		}
	}
	t0 := time.Now()
	p, err := processor.Open(*weights, req.Embodiment, defaultTokenizer())
	if err != nil {
		return err
	}
	load := time.Since(t0)
	in, err := p.Process(&processor.Observation{Images: req.Images, Instruction: inst}, processor.Options{KeepFrames: true})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	s := len(in.InputIDs)
	thw := make([]int64, 0, 3*len(in.ImageGridTHW))
	for _, g := range in.ImageGridTHW {
		thw = append(thw, int64(g.T), int64(g.H), int64(g.W))
	}
	files := []struct {
		name  string
		shape []int
		data  any
	}{
		{"pixel_values.npy", []int{in.Rows, in.RowWidth}, in.PixelValues},
		{"image_grid_thw.npy", []int{len(in.ImageGridTHW), 3}, thw},
		{"input_ids.npy", []int{1, s}, in.InputIDs},
		{"attention_mask.npy", []int{1, s}, in.AttentionMask},
		{"position_ids.npy", []int{3, 1, s}, in.PositionIDs},
	}
	for _, f := range files {
		if err := npy.WriteFile(filepath.Join(*outDir, f.name), f.shape, f.data); err != nil {
			return err
		}
	}
	if err := writeFrames(*outDir, "frames_eval", in.EvalFrames); err != nil {
		return err
	}
	if err := writeFrames(*outDir, "frames_resized", in.ResizedFrames); err != nil {
		return err
	}
	tm := in.Timings
	// prompt_tokens is the instruction's token count, as /predict's
	// prompt_tokens; template_tokens the chat template's other non-image
	// tokens (seq_len = prompt + template + image tokens).
	fmt.Printf("encode: seq_len=%d prompt_tokens=%d template_tokens=%d image_tokens=%d images=%d rows=%d load=%s decode=%s chain=%s tokenize=%s rope=%s total=%s out=%s\n",
		in.SeqLen, in.TextTokens, in.SeqLen-in.ImageTokens-in.TextTokens, in.ImageTokens, len(in.ImageGridTHW), in.Rows,
		encodeMS(load), encodeMS(tm.Decode), encodeMS(tm.Images), encodeMS(tm.Tokenize), encodeMS(tm.Rope), encodeMS(tm.Total), *outDir)
	return nil
}

// writeFrames writes frames as one uint8 [N, H, W, 3] array when they share
// a size, else one <name>_<k>.npy per frame.
func writeFrames(dir, name string, frames []*image.RGB) error {
	same := len(frames) > 0
	for _, f := range frames {
		same = same && f.W == frames[0].W && f.H == frames[0].H
	}
	if same {
		pix := make([]uint8, 0, len(frames)*len(frames[0].Pix))
		for _, f := range frames {
			pix = append(pix, f.Pix...)
		}
		return npy.WriteFile(filepath.Join(dir, name+".npy"), []int{len(frames), frames[0].H, frames[0].W, 3}, pix)
	}
	for k, f := range frames {
		if err := npy.WriteFile(filepath.Join(dir, fmt.Sprintf("%s_%d.npy", name, k)), []int{f.H, f.W, 3}, f.Pix); err != nil {
			return err
		}
	}
	return nil
}

func encodeMS(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d.Microseconds())/1000) }
