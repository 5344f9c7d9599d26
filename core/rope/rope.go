// Package rope computes the 3-D multimodal rotary position ids (mRoPE) of the
// Qwen3-VL language model for one sequence, as transformers 4.57
// Qwen3VLModel.get_rope_index does for images.
package rope

import (
	"errors"
	"fmt"
)

// Config holds the token ids and merge size get_rope_index reads from the
// model configuration.
type Config struct {
	ImageTokenID       int64 // <|image_pad|>, 151655 for Qwen2/Qwen3-VL
	VisionStartTokenID int64 // <|vision_start|>, 151652
	SpatialMergeSize   int   // vision_config.spatial_merge_size, 2
}

// DefaultConfig returns the Qwen3-VL (GR00T N1.7) values.
func DefaultConfig() Config {
	return Config{ImageTokenID: 151655, VisionStartTokenID: 151652, SpatialMergeSize: 2}
}

// Grid is one image's patch grid, a row of image_grid_thw: T temporal
// patches (1 for a still image), H×W patches of 16×16 pixels before the
// 2×2 merge.
type Grid struct{ T, H, W int }

// ErrMismatch is wrapped by PositionIDs when the tokens and the image grids
// do not describe the same images.
var ErrMismatch = errors.New("image tokens do not match image_grid_thw")

// PositionIDs returns the mRoPE position ids of one sequence as a [3][S]
// row-major slice (rows t, h, w; S = len(inputIDs)) together with the rope
// delta (max position + 1 − S) that upstream returns as
// mrope_position_deltas.
//
// Valid tokens (attentionMask 1; nil means all valid) are walked in order.
// An image is a <|vision_start|> immediately followed by <|image_pad|>; its
// pads form a block of T·(H/m)·(W/m) tokens (m = SpatialMergeSize). Text
// before the block (including the <|vision_start|>) continues the running
// position p on all three rows; block token (t, r, c) in raster order gets
// (p+t, p+r, p+c); afterwards p = p + max(T, H/m, W/m). Trailing text
// continues from p. Padded positions (mask 0) are 1 on all rows, as
// upstream fills them.
//
// grids must list the sequence's images in order; a count or size mismatch,
// a block that is not all <|image_pad|>, or a grid not divisible by the merge
// size returns an error wrapping ErrMismatch. Video tokens are not handled
// (GR00T sends none). Pure function; the result is owned by the caller.
func PositionIDs(inputIDs, attentionMask []int64, grids []Grid, cfg Config) ([]int64, int64, error) {
	s := len(inputIDs)
	if attentionMask != nil && len(attentionMask) != s {
		return nil, 0, fmt.Errorf("rope: attention_mask has %d entries, input_ids %d", len(attentionMask), s)
	}
	m := cfg.SpatialMergeSize
	if m <= 0 {
		return nil, 0, fmt.Errorf("rope: spatial merge size %d", m)
	}
	out := make([]int64, 3*s)
	rt, rh, rw := out[:s], out[s:2*s], out[2*s:]
	// Compact the valid tokens (upstream: input_ids[attention_mask == 1]);
	// valid[k] is the sequence index of the k-th valid token. All-valid
	// input (the batch-1 case) skips the indirection.
	var valid []int
	for _, v := range attentionMask {
		if v != 1 {
			valid = make([]int, 0, s)
			break
		}
	}
	if valid != nil {
		for i, v := range attentionMask {
			if v == 1 {
				valid = append(valid, i)
			} else {
				rt[i], rh[i], rw[i] = 1, 1, 1
			}
		}
	}
	n := s
	if valid != nil {
		n = len(valid)
	}
	idx := func(k int) int {
		if valid == nil {
			return k
		}
		return valid[k]
	}
	put := func(k int, t, h, w int64) {
		j := idx(k)
		rt[j], rh[j], rw[j] = t, h, w
	}
	tok := func(k int) int64 { return inputIDs[idx(k)] }

	var next int64 // 1 + the largest position given so far
	img := 0
	st := 0 // first valid-token index not yet given a position
	for k := 0; k+1 < n; k++ {
		if tok(k) != cfg.VisionStartTokenID || tok(k+1) != cfg.ImageTokenID {
			continue
		}
		if img >= len(grids) {
			return nil, 0, fmt.Errorf("rope: image[%d] at token %d: only %d grids: %w", img, idx(k+1), len(grids), ErrMismatch)
		}
		g := grids[img]
		if g.T <= 0 || g.H <= 0 || g.W <= 0 || g.H%m != 0 || g.W%m != 0 {
			return nil, 0, fmt.Errorf("rope: image[%d]: grid %v not a positive multiple of merge size %d: %w", img, g, m, ErrMismatch)
		}
		lt, lh, lw := g.T, g.H/m, g.W/m
		ed := k + 1 // first <|image_pad|>
		if ed < st {
			return nil, 0, fmt.Errorf("rope: image[%d] at token %d overlaps the previous image: %w", img, idx(ed), ErrMismatch)
		}
		for ; st < ed; st++ { // text run, including <|vision_start|>
			if tok(st) == cfg.ImageTokenID {
				return nil, 0, strayPad(idx(st))
			}
			put(st, next, next, next)
			next++
		}
		block := lt * lh * lw
		if ed+block > n {
			return nil, 0, fmt.Errorf("rope: image[%d]: grid %v needs %d tokens, sequence ends after %d: %w", img, g, block, n-ed, ErrMismatch)
		}
		base := next
		q := ed
		for t := range lt {
			for r := range lh {
				for c := range lw {
					if tok(q) != cfg.ImageTokenID {
						return nil, 0, fmt.Errorf("rope: image[%d]: token %d is %d, want <|image_pad|> (grid %v): %w", img, idx(q), tok(q), g, ErrMismatch)
					}
					put(q, base+int64(t), base+int64(r), base+int64(c))
					q++
				}
			}
		}
		st = q
		next = base + int64(max(lt, lh, lw))
		img++
		k = q - 1
	}
	if img != len(grids) {
		return nil, 0, fmt.Errorf("rope: %d images in input_ids, %d grids: %w", img, len(grids), ErrMismatch)
	}
	for ; st < n; st++ {
		if tok(st) == cfg.ImageTokenID {
			return nil, 0, strayPad(idx(st))
		}
		put(st, next, next, next)
		next++
	}
	return out, next - int64(s), nil
}

// strayPad reports an <|image_pad|> outside every image block (a grid
// smaller than the pad run, or a pad without <|vision_start|>).
func strayPad(at int) error {
	return fmt.Errorf("rope: <|image_pad|> at token %d outside any image block: %w", at, ErrMismatch)
}
