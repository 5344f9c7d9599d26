package processor

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/stretchr/testify/require"
)

func TestParseCheckpointConfig(t *testing.T) {
	c, err := LoadConfig("../../testdata/n17-tiny/processor_config.json", "")
	require.NoError(t, err)
	require.Equal(t, DefaultDROIDConfig(), c)
	c2, err := LoadConfig("../../testdata/n17-tiny/processor_config.json", DROIDTag)
	require.NoError(t, err)
	require.Equal(t, c, c2)
	_, err = LoadConfig("../../testdata/n17-tiny/processor_config.json", "gr1")
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "embodiment[gr1]")
}

func TestParseConfigDefaultsAndNulls(t *testing.T) {
	for _, c := range []struct {
		name, js string
		check    func(t *testing.T, c Config)
	}{
		{"empty object", `{}`, func(t *testing.T, c Config) { require.Equal(t, DefaultDROIDConfig(), c) }},
		{"no kwargs keys", `{"processor_class":"Gr00tN1d7Processor","processor_kwargs":{}}`, func(t *testing.T, c Config) {
			require.Equal(t, DefaultDROIDConfig(), c)
		}},
		{"crop null", `{"processor_kwargs":{"crop_fraction":null,"image_crop_size":[230,230],"image_target_size":[256,256]}}`, func(t *testing.T, c Config) {
			require.InDelta(t, 230.0/256, c.Chain.CropFraction, 0)
		}},
		{"crop absent", `{"processor_kwargs":{"image_crop_size":[230,230]}}`, func(t *testing.T, c Config) {
			require.Equal(t, 0.95, c.Chain.CropFraction)
		}},
		{"shortest null", `{"processor_kwargs":{"shortest_image_edge":null,"image_target_size":[224,224]}}`, func(t *testing.T, c Config) {
			require.Equal(t, 0, c.Chain.ShortestEdge)
			require.Equal(t, 224, c.Chain.TargetH)
			require.Equal(t, image.Grid{T: 1, H: 16, W: 16}, c.RequireGrid) // 224² < min_pixels: smart_resize lifts it to 256²
		}},
		{"letterbox and formalize", `{"processor_kwargs":{"letter_box_transform":true,"formalize_language":false}}`, func(t *testing.T, c Config) {
			require.True(t, c.Chain.LetterBox)
			require.False(t, c.FormalizeLanguage)
			require.Equal(t, image.Grid{T: 1, H: 16, W: 16}, c.RequireGrid)
		}},
		{"other embodiment only", `{"processor_kwargs":{"modality_configs":{"gr1":{"video":{"delta_indices":[0],"modality_keys":["ego_view"]},"state":{"modality_keys":["left_arm"]},"action":{"delta_indices":[0,1,2],"modality_keys":["left_arm"]}}}}}`, func(t *testing.T, c Config) {
			require.Equal(t, "gr1", c.Embodiment)
			require.Equal(t, []string{"ego_view"}, c.Cameras)
			require.Equal(t, []int{0}, c.VideoDeltaIndices)
			require.Equal(t, 3, c.ActionHorizon)
			require.Equal(t, 0, c.MaxTextTokens)
			require.Equal(t, image.Grid{}, c.RequireGrid)
		}},
		{"several embodiments pick droid", `{"processor_kwargs":{"modality_configs":{"gr1":{"video":{"modality_keys":["ego_view"]}},"oxe_droid_relative_eef_relative_joint":{"video":{"modality_keys":["wrist_image_left","exterior_image_1_left"]}}}}}`, func(t *testing.T, c Config) {
			require.Equal(t, DROIDTag, c.Embodiment)
			require.Equal(t, []string{"wrist_image_left", "exterior_image_1_left"}, c.Cameras)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.js), "")
			require.NoError(t, err)
			c.check(t, cfg)
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	for name, js := range map[string]string{
		"not json":           `{`,
		"torchvision recipe": `{"processor_kwargs":{"use_albumentations":false}}`,
		"bad crop":           `{"processor_kwargs":{"crop_fraction":1.5}}`,
		"no cameras":         `{"processor_kwargs":{"modality_configs":{"x":{"video":{"modality_keys":[]}}}}}`,
		"dup camera":         `{"processor_kwargs":{"modality_configs":{"x":{"video":{"modality_keys":["a","a"]}}}}}`,
		"wrong types":        `{"processor_kwargs":{"shortest_image_edge":"big"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(js), "")
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	dir := t.TempDir()
	c, err := LoadConfig(filepath.Join(dir, "processor_config.json"), "")
	require.NoError(t, err)
	require.Equal(t, DefaultDROIDConfig(), c)
	_, err = LoadConfig(filepath.Join(dir, "processor_config.json"), "gr1")
	require.ErrorIs(t, err, ErrConfig)
	// Open on a directory without processor_config.json or tokenizer.json
	// falls back to the defaults.
	p, err := Open(dir, "", defaultTokenizer(t))
	require.NoError(t, err)
	require.Equal(t, DROIDTag, p.Config().Embodiment)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "processor_config.json"), []byte(`{`), 0o644))
	_, err = Open(dir, "", defaultTokenizer(t))
	require.ErrorIs(t, err, ErrConfig)
}

func FuzzParseConfig(f *testing.F) {
	raw, err := os.ReadFile("../../testdata/n17-tiny/processor_config.json")
	if err == nil {
		f.Add(string(raw))
	}
	f.Add(`{"processor_kwargs":{"crop_fraction":null}}`)
	f.Fuzz(func(t *testing.T, js string) {
		c, err := ParseConfig([]byte(js), "")
		if err == nil {
			require.NoError(t, c.Validate())
		}
	})
}
