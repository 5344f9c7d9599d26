package main

import (
	"context"
	"encoding/json"
	"flag"
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
	Images      map[string][]string `json:"images"`
	Instruction *string             `json:"instruction"`
	Language    *string             `json:"language"`
	Prompt      *string             `json:"prompt"`
	Embodiment  string              `json:"embodiment"`
}

func runEncode(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("encode", flag.ContinueOnError)
	reqPath := fs.String("request", "", "`REQ.json`: a /predict body (images, instruction|language|prompt, embodiment)")
	outDir := fs.String("out", "", "`DIR` to write frames_eval, frames_resized, pixel_values, image_grid_thw, input_ids, attention_mask, position_ids (.npy)")
	weights := fs.String("weights", "", "checkpoint `DIR` with processor_config.json (and optionally tokenizer.json); default: the repository's testdata/n17-tiny")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gr00tgw encode --request REQ.json --out DIR [--weights DIR]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *reqPath == "" || *outDir == "" || fs.NArg() > 0 {
		fs.Usage()
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
	var inst string
	switch {
	case req.Instruction != nil:
		inst = *req.Instruction
	case req.Language != nil:
		inst = *req.Language
	case req.Prompt != nil:
		inst = *req.Prompt
	default:
		return fmt.Errorf("request %s: no instruction (or language, prompt)", *reqPath)
	}

	t0 := time.Now()
	p, err := processor.Open(*weights, req.Embodiment)
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
	fmt.Printf("encode: seq_len=%d prompt_tokens=%d text_tokens=%d image_tokens=%d images=%d rows=%d load=%s decode=%s chain=%s tokenize=%s rope=%s total=%s out=%s\n",
		in.SeqLen, in.SeqLen-in.ImageTokens, in.TextTokens, in.ImageTokens, len(in.ImageGridTHW), in.Rows,
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
