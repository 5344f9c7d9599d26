package processor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/gr00tgw/gr00tgw/core/image"
)

// DROIDTag is the embodiment tag of the released N1.7 DROID head.
const DROIDTag = "oxe_droid_relative_eef_relative_joint"

// DROIDMaxTextTokens is L_max for DROID: the serving layout pads to 512
// tokens and the fixed part (chat tokens + 4 × (112 + 2) image tokens) takes
// 461 of them.
const DROIDMaxTextTokens = 51

// ErrConfig is wrapped by errors about an unusable processor configuration.
var ErrConfig = errors.New("processor: invalid config")

// Config is the host-side configuration of one embodiment, read from the
// checkpoint's processor_config.json (Gr00tN1d7Processor.save_pretrained
// layout). Fields the file does not carry keep the DROID defaults. It is
// plain data; a Processor copies it.
type Config struct {
	// Embodiment is the modality_configs key that was selected.
	Embodiment string
	// Cameras are the video modality_keys in model order
	// (exterior_image_1_left, wrist_image_left for DROID).
	Cameras []string
	// VideoDeltaIndices are the frame offsets per camera, oldest first
	// ([-15, 0]); each camera must send len(VideoDeltaIndices) frames.
	VideoDeltaIndices []int
	// StateKeys, ActionKeys, LanguageKeys are the other modality_keys, in
	// order (state: eef_9d, gripper_position, joint_position). For a tag
	// other than DROID, a modality the file does not describe is empty.
	StateKeys, ActionKeys, LanguageKeys []string
	// StateDeltaIndices are the state frame offsets ([0]).
	StateDeltaIndices []int
	// ActionConfigs gives each action key's representation, in ActionKeys
	// order. The file's null (upstream's default) reads as every key
	// ABSOLUTE / NON_EEF / DEFAULT with no state key.
	ActionConfigs []ActionConfig
	// SinCosStateKeys and MeanStdStateKeys are the state keys upstream
	// encodes with sin/cos or normalises with mean/std instead of
	// min/max (state modality's sin_cos_embedding_keys,
	// mean_std_embedding_keys; usually none).
	SinCosStateKeys, MeanStdStateKeys []string
	// ActionHorizon is len(action delta_indices) (40).
	ActionHorizon int
	// FormalizeLanguage applies text.FormalizeLanguage (formalize_language).
	FormalizeLanguage bool
	// MaxTextTokens is L_max: instructions with more tokens are rejected
	// (not in the file; DROIDMaxTextTokens by default; 0 = no limit).
	MaxTextTokens int
	// MaxSeqLen, when positive, is the longest prompt (input_ids) the
	// backend accepts; a longer one is rejected as an instruction over
	// L_max = MaxSeqLen − the prompt's other tokens (not in the file; the
	// gateway sets it from the backend, 0 = no limit).
	MaxSeqLen int
	// RequireGrid, when non-zero, is the only image_grid_thw accepted per
	// frame (the served contract); other frames fail with image.ErrAspect.
	// Not in the file: for DROID it is the grid of a 320x180 frame under
	// Chain ({1, 16, 28} for the release recipe); zero for other embodiments.
	RequireGrid image.Grid
	// Chain is the image chain (letter_box_transform, shortest_image_edge,
	// crop_fraction, image_target_size; Qwen patch settings stay at the
	// Qwen3-VL defaults).
	Chain image.ChainConfig
	// The remaining processor_kwargs, for the state/action code.
	MaxStateDim, MaxActionDim, MaxActionHorizon int
	UsePercentiles, UseMeanStd, ClipOutliers    bool
	UseRelativeAction, ApplySinCosStateEncoding bool
	ModelName                                   string
}

// ActionConfig is one action key's representation, with upstream's enum
// names: Rep RELATIVE, DELTA or ABSOLUTE; Type EEF or NON_EEF; Format
// DEFAULT, XYZ_ROT6D or XYZ_ROTVEC; StateKey the state group a relative
// action is composed with ("" for none).
type ActionConfig struct {
	Rep, Type, Format, StateKey string
}

// absoluteAction is what a null action_configs means for every key.
var absoluteAction = ActionConfig{Rep: "ABSOLUTE", Type: "NON_EEF", Format: "DEFAULT"}

// DefaultDROIDConfig returns the released N1.7 DROID configuration (the
// values of the n17-tiny processor_config.json, which copies the release).
func DefaultDROIDConfig() Config {
	return Config{
		Embodiment:        DROIDTag,
		Cameras:           []string{"exterior_image_1_left", "wrist_image_left"},
		VideoDeltaIndices: []int{-15, 0},
		StateKeys:         []string{"eef_9d", "gripper_position", "joint_position"},
		ActionKeys:        []string{"eef_9d", "gripper_position", "joint_position"},
		StateDeltaIndices: []int{0},
		ActionConfigs: []ActionConfig{
			{Rep: "RELATIVE", Type: "EEF", Format: "XYZ_ROT6D", StateKey: "eef_9d"},
			{Rep: "ABSOLUTE", Type: "NON_EEF", Format: "DEFAULT", StateKey: "gripper_position"},
			{Rep: "RELATIVE", Type: "NON_EEF", Format: "DEFAULT", StateKey: "joint_position"},
		},
		LanguageKeys:      []string{"annotation.language.language_instruction"},
		ActionHorizon:     40,
		FormalizeLanguage: true,
		MaxTextTokens:     DROIDMaxTextTokens,
		RequireGrid:       droidGrid,
		Chain:             image.DefaultDROIDChain(),
		MaxStateDim:       132,
		MaxActionDim:      132,
		MaxActionHorizon:  40,
		UsePercentiles:    true,
		ClipOutliers:      true,
		UseRelativeAction: true,
		ModelName:         "nvidia/Cosmos-Reason2-2B",
	}
}

// FramesPerCamera is len(VideoDeltaIndices).
func (c *Config) FramesPerCamera() int { return len(c.VideoDeltaIndices) }

// NumImages is the number of images per observation, cameras × frames.
func (c *Config) NumImages() int { return len(c.Cameras) * len(c.VideoDeltaIndices) }

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case len(c.Cameras) == 0:
		return fmt.Errorf("%w: embodiment[%s]: no video modality_keys", ErrConfig, c.Embodiment)
	case len(c.VideoDeltaIndices) == 0:
		return fmt.Errorf("%w: embodiment[%s]: no video delta_indices", ErrConfig, c.Embodiment)
	case c.MaxTextTokens < 0:
		return fmt.Errorf("%w: max text tokens %d", ErrConfig, c.MaxTextTokens)
	}
	seen := map[string]bool{}
	for _, k := range c.Cameras {
		if seen[k] {
			return fmt.Errorf("%w: embodiment[%s]: camera %q listed twice", ErrConfig, c.Embodiment, k)
		}
		seen[k] = true
	}
	if err := c.Chain.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// processor_config.json shapes. Pointers distinguish "absent/null" from a
// zero value.
type fileJSON struct {
	ProcessorClass  string     `json:"processor_class"`
	ProcessorKwargs *kwargJSON `json:"processor_kwargs"`
}

type modalityJSON struct {
	DeltaIndices  []int    `json:"delta_indices"`
	ModalityKeys  []string `json:"modality_keys"`
	SinCosKeys    []string `json:"sin_cos_embedding_keys"`
	MeanStdKeys   []string `json:"mean_std_embedding_keys"`
	ActionConfigs []struct {
		Rep      string  `json:"rep"`
		Type     string  `json:"type"`
		Format   string  `json:"format"`
		StateKey *string `json:"state_key"`
	} `json:"action_configs"`
}

type kwargJSON struct {
	ModalityConfigs map[string]map[string]*modalityJSON `json:"modality_configs"`

	ImageCropSize      []int    `json:"image_crop_size"`
	ImageTargetSize    []int    `json:"image_target_size"`
	UseAlbumentations  *bool    `json:"use_albumentations"`
	ShortestImageEdge  *int     `json:"shortest_image_edge"`
	CropFraction       *float64 `json:"crop_fraction"`
	LetterBoxTransform *bool    `json:"letter_box_transform"`
	ModelName          *string  `json:"model_name"`
	FormalizeLanguage  *bool    `json:"formalize_language"`
	MaxStateDim        *int     `json:"max_state_dim"`
	MaxActionDim       *int     `json:"max_action_dim"`
	MaxActionHorizon   *int     `json:"max_action_horizon"`
	UsePercentiles     *bool    `json:"use_percentiles"`
	UseMeanStd         *bool    `json:"use_mean_std"`
	ClipOutliers       *bool    `json:"clip_outliers"`
	ApplySinCos        *bool    `json:"apply_sincos_state_encoding"`
	UseRelativeAction  *bool    `json:"use_relative_action"`
}

// LoadConfig reads processor_config.json at path and selects embodiment
// (see ParseConfig). A missing file yields DefaultDROIDConfig (checked
// against embodiment); other read errors are returned.
func LoadConfig(path, embodiment string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		c := DefaultDROIDConfig()
		if embodiment != "" && embodiment != c.Embodiment {
			return Config{}, fmt.Errorf("%w: embodiment[%s]: no processor_config.json at %s and the default is %s", ErrConfig, embodiment, path, c.Embodiment)
		}
		return c, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("processor: %w", err)
	}
	c, err := ParseConfig(data, embodiment)
	if err != nil {
		return Config{}, fmt.Errorf("%w (file %s)", err, path)
	}
	return c, nil
}

// ParseConfig decodes a processor_config.json document. embodiment selects
// the modality config; "" picks the only one, or DROIDTag when several are
// present. Keys that are absent or null keep DefaultDROIDConfig's values,
// except as upstream resolves them: crop_fraction null →
// image_crop_size[0] / image_target_size[0]; shortest_image_edge null → the
// fixed-size recipe Resize(image_target_size). use_albumentations=false
// (the torchvision recipe) is rejected: it is not implemented.
func ParseConfig(data []byte, embodiment string) (Config, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return Config{}, fmt.Errorf("%w: processor_config.json: %w", ErrConfig, err)
	}
	c := DefaultDROIDConfig()
	k := f.ProcessorKwargs
	if k == nil {
		k = &kwargJSON{}
	}
	if len(k.ModalityConfigs) > 0 {
		tag := embodiment
		if tag == "" {
			if len(k.ModalityConfigs) == 1 {
				for t := range k.ModalityConfigs {
					tag = t
				}
			} else {
				tag = DROIDTag
			}
		}
		mc, ok := k.ModalityConfigs[tag]
		if !ok {
			tags := make([]string, 0, len(k.ModalityConfigs))
			for t := range k.ModalityConfigs {
				tags = append(tags, t)
			}
			sort.Strings(tags)
			return Config{}, fmt.Errorf("%w: embodiment[%s]: not in modality_configs %v", ErrConfig, tag, tags)
		}
		c.Embodiment = tag
		if tag != DROIDTag {
			// Another robot: nothing of DROID's layout carries over.
			c.Cameras, c.VideoDeltaIndices, c.StateKeys, c.ActionKeys, c.LanguageKeys = nil, nil, nil, nil, nil
			c.StateDeltaIndices, c.ActionConfigs, c.ActionHorizon = nil, nil, 0
		}
		if m := mc["video"]; m != nil {
			if m.ModalityKeys != nil {
				c.Cameras = m.ModalityKeys
			}
			if m.DeltaIndices != nil {
				c.VideoDeltaIndices = m.DeltaIndices
			}
		}
		if m := mc["state"]; m != nil {
			if m.ModalityKeys != nil {
				c.StateKeys = m.ModalityKeys
			}
			if m.DeltaIndices != nil {
				c.StateDeltaIndices = m.DeltaIndices
			}
			c.SinCosStateKeys, c.MeanStdStateKeys = m.SinCosKeys, m.MeanStdKeys
		}
		if m := mc["action"]; m != nil {
			if m.ModalityKeys != nil {
				c.ActionKeys = m.ModalityKeys
			}
			if m.DeltaIndices != nil {
				c.ActionHorizon = len(m.DeltaIndices)
			}
			if m.ActionConfigs == nil {
				c.ActionConfigs = make([]ActionConfig, len(c.ActionKeys))
				for i := range c.ActionConfigs {
					c.ActionConfigs[i] = absoluteAction
				}
			} else {
				if len(m.ActionConfigs) != len(c.ActionKeys) {
					return Config{}, fmt.Errorf("%w: embodiment[%s]: %d action_configs for %d action keys", ErrConfig, tag, len(m.ActionConfigs), len(c.ActionKeys))
				}
				c.ActionConfigs = make([]ActionConfig, len(m.ActionConfigs))
				for i, a := range m.ActionConfigs {
					ac := ActionConfig{Rep: a.Rep, Type: a.Type, Format: a.Format}
					if a.StateKey != nil {
						ac.StateKey = *a.StateKey
					}
					if err := ac.validate(); err != nil {
						return Config{}, fmt.Errorf("%w: embodiment[%s]: action_configs[%d] (%s): %w", ErrConfig, tag, i, c.ActionKeys[i], err)
					}
					c.ActionConfigs[i] = ac
				}
			}
		}
		if m := mc["language"]; m != nil && m.ModalityKeys != nil {
			c.LanguageKeys = m.ModalityKeys
		}
		if tag != DROIDTag {
			c.MaxTextTokens = 0 // L_max is only known for the DROID layout
			c.RequireGrid = image.Grid{}
		}
	} else if embodiment != "" && embodiment != c.Embodiment {
		return Config{}, fmt.Errorf("%w: embodiment[%s]: processor_config.json has no modality_configs", ErrConfig, embodiment)
	}
	if k.UseAlbumentations != nil && !*k.UseAlbumentations {
		return Config{}, fmt.Errorf("%w: use_albumentations=false (torchvision recipe) is not supported", ErrConfig)
	}
	if len(k.ImageTargetSize) == 2 {
		c.Chain.TargetH, c.Chain.TargetW = k.ImageTargetSize[0], k.ImageTargetSize[1]
	}
	if k.LetterBoxTransform != nil {
		c.Chain.LetterBox = *k.LetterBoxTransform
	}
	// Present-but-null keys mean "derive", absent keys keep the default.
	var rawKw struct {
		ProcessorKwargs map[string]json.RawMessage `json:"processor_kwargs"`
	}
	_ = json.Unmarshal(data, &rawKw) // same document, already decoded once
	isNull := func(key string) bool {
		v, ok := rawKw.ProcessorKwargs[key]
		return ok && string(v) == "null"
	}
	if k.ShortestImageEdge != nil {
		c.Chain.ShortestEdge = *k.ShortestImageEdge
	} else if isNull("shortest_image_edge") {
		c.Chain.ShortestEdge = 0
	}
	if k.CropFraction != nil {
		c.Chain.CropFraction = *k.CropFraction
	} else if isNull("crop_fraction") {
		crop := []int{230, 230}
		if len(k.ImageCropSize) > 0 {
			crop = k.ImageCropSize
		}
		if c.Chain.TargetH <= 0 {
			return Config{}, fmt.Errorf("%w: crop_fraction is null and image_target_size is unusable", ErrConfig)
		}
		c.Chain.CropFraction = float64(crop[0]) / float64(c.Chain.TargetH)
	}
	setB := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setI := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setB(&c.FormalizeLanguage, k.FormalizeLanguage)
	setB(&c.UsePercentiles, k.UsePercentiles)
	setB(&c.UseMeanStd, k.UseMeanStd)
	setB(&c.ClipOutliers, k.ClipOutliers)
	setB(&c.ApplySinCosStateEncoding, k.ApplySinCos)
	setB(&c.UseRelativeAction, k.UseRelativeAction)
	setI(&c.MaxStateDim, k.MaxStateDim)
	setI(&c.MaxActionDim, k.MaxActionDim)
	setI(&c.MaxActionHorizon, k.MaxActionHorizon)
	if k.ModelName != nil {
		c.ModelName = *k.ModelName
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	if c.RequireGrid != (image.Grid{}) {
		// The served grid is what the reference DROID frame (320x180) gives
		// under this chain: {1,16,28} for the release recipe, {1,16,16} with
		// letter_box_transform or the fixed-size recipe.
		sz, err := c.Chain.Sizes(droidRefW, droidRefH)
		if err != nil {
			return Config{}, fmt.Errorf("%w: chain cannot run on a %dx%d frame: %w", ErrConfig, droidRefW, droidRefH, err)
		}
		c.RequireGrid = sz.Grid
	}
	return c, nil
}

// droidRefW x droidRefH is the frame size the DROID client sends (ZED
// images resized with padding to 320x180).
const droidRefW, droidRefH = 320, 180

func (a ActionConfig) validate() error {
	switch {
	case a.Rep != "RELATIVE" && a.Rep != "DELTA" && a.Rep != "ABSOLUTE":
		return fmt.Errorf("rep %q: want RELATIVE, DELTA or ABSOLUTE", a.Rep)
	case a.Type != "EEF" && a.Type != "NON_EEF":
		return fmt.Errorf("type %q: want EEF or NON_EEF", a.Type)
	case a.Format != "DEFAULT" && a.Format != "XYZ_ROT6D" && a.Format != "XYZ_ROTVEC":
		return fmt.Errorf("format %q: want DEFAULT, XYZ_ROT6D or XYZ_ROTVEC", a.Format)
	}
	return nil
}
