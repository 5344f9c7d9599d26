package schedule

import (
	"encoding/json"
	"fmt"
)

// Dims are the DiT shapes a schedule is planned for.
type Dims struct {
	Blocks    int // transformer blocks (32 real, 8 tiny)
	Width     int // model width D = Heads·HeadDim (1536)
	Heads     int // attention heads (32)
	HeadDim   int // per-head width (48)
	FF        int // feed-forward inner width (4·D = 6144)
	CrossDim  int // width of the VL features the cross blocks attend to (2048)
	OutDim    int // proj_out_2 output width (1024)
	Rows      int // DiT tokens: 1 state + action horizon (41)
	TextKeys  int // planned key count of the text cross blocks (i mod 4 = 0)
	ImageKeys int // planned key count of the image cross blocks (i mod 4 = 2)
}

// N17 returns the GR00T N1.7-3B DiT shapes with the DROID demo's key counts
// (21 non-image tokens, 448 image tokens).
func N17() Dims {
	return Dims{Blocks: 32, Width: 1536, Heads: 32, HeadDim: 48, FF: 6144, CrossDim: 2048, OutDim: 1024,
		Rows: 41, TextKeys: 21, ImageKeys: 448}
}

// N17Tiny returns the shapes of the n17-tiny golden checkpoint
// (testdata/n17-tiny/config.json) with case A's key counts.
func N17Tiny() Dims {
	return Dims{Blocks: 8, Width: 64, Heads: 4, HeadDim: 16, FF: 256, CrossDim: 32, OutDim: 48,
		Rows: 41, TextKeys: 21, ImageKeys: 448}
}

// FromConfig reads the DiT shapes from a Gr00tN1d7 config.json. Rows,
// TextKeys and ImageKeys are not in the config; they default to the DROID
// layout (action_horizon + 1, 21, 448).
func FromConfig(raw []byte) (Dims, error) {
	var c struct {
		ActionHorizon int `json:"action_horizon"`
		Backbone      int `json:"backbone_embedding_dim"`
		Width         int `json:"input_embedding_dim"`
		DiT           struct {
			Layers  int `json:"num_layers"`
			Heads   int `json:"num_attention_heads"`
			HeadDim int `json:"attention_head_dim"`
			Out     int `json:"output_dim"`
		} `json:"diffusion_model_cfg"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return Dims{}, fmt.Errorf("schedule: config: %w", err)
	}
	d := Dims{Blocks: c.DiT.Layers, Width: c.DiT.Heads * c.DiT.HeadDim, Heads: c.DiT.Heads, HeadDim: c.DiT.HeadDim,
		CrossDim: c.Backbone, OutDim: c.DiT.Out, Rows: c.ActionHorizon + 1, TextKeys: 21, ImageKeys: 448}
	d.FF = 4 * d.Width
	if c.Width != 0 && c.Width != d.Width {
		return Dims{}, fmt.Errorf("schedule: config: input_embedding_dim %d != heads·head_dim %d", c.Width, d.Width)
	}
	return d, d.Validate()
}

// Validate reports the first inconsistent field.
func (d Dims) Validate() error {
	switch {
	case d.Blocks <= 0 || d.Heads <= 0 || d.HeadDim <= 0 || d.CrossDim <= 0 || d.OutDim <= 0 || d.Rows <= 0:
		return fmt.Errorf("schedule: dims %+v: every size must be positive", d)
	case d.Width != d.Heads*d.HeadDim:
		return fmt.Errorf("schedule: dims: width %d != heads %d × head_dim %d", d.Width, d.Heads, d.HeadDim)
	case d.FF <= 0:
		return fmt.Errorf("schedule: dims: ff %d", d.FF)
	case d.TextKeys <= 0 || d.ImageKeys <= 0:
		return fmt.Errorf("schedule: dims: key counts %d/%d", d.TextKeys, d.ImageKeys)
	}
	return nil
}

// BlockKind is the attention kind of a DiT block.
type BlockKind uint8

// Block kinds of upstream's AlternateVLDiT (gr00t/model/modules/dit.py,
// attend_text_every_n_blocks = 2): odd blocks self-attend, even
// blocks cross-attend to the non-image tokens when i mod 4 = 0 and to the
// image tokens when i mod 4 = 2.
const (
	Self BlockKind = iota
	CrossText
	CrossImage
)

// String names the kind.
func (k BlockKind) String() string {
	return [...]string{"self", "cross_text", "cross_image"}[k]
}

// Kind returns the kind of block i.
func Kind(i int) BlockKind {
	switch {
	case i%2 == 1:
		return Self
	case i%4 == 0:
		return CrossText
	}
	return CrossImage
}

// Keys returns the planned key count of block i.
func (d Dims) Keys(i int) int {
	switch Kind(i) {
	case CrossText:
		return d.TextKeys
	case CrossImage:
		return d.ImageKeys
	}
	return d.Rows
}

func tiles(n int) int { return (n + 31) / 32 }
