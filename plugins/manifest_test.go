package plugins

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const goodManifest = `name: droid
version: 1.0.0
abi: 1
sha256: 3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b
embodiments: [oxe_droid_relative_eef_relative_joint]
limits: {max_pages: 256, timeout_ms: 20, pool_size: 3}
config: {k: v}
`

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(goodManifest))
	require.NoError(t, err)
	assert.Equal(t, "droid.wasm", m.WasmFile())
	assert.Equal(t, Limits{MaxPages: 256, TimeoutMS: 20, PoolSize: 3}, m.Limits)
	assert.Equal(t, map[string]any{"k": "v"}, m.Config)

	tests := []struct{ from, to, want string }{
		{"name: droid", "name: Droid!", `wasm: manifest: name "Droid!"`},
		{"version: 1.0.0", "version: v1", `wasm: plugin[droid] manifest: version "v1" is not semver`},
		{"abi: 1", "abi: 0", "wasm: plugin[droid] manifest: abi missing (want 1)"},
		{"sha256: 3a", "sha256: 3A", "wasm: plugin[droid] manifest: sha256"},
		{"embodiments: [oxe_droid_relative_eef_relative_joint]", "embodiments: [a, b]", "serve exactly one embodiment"},
		{"pool_size: 3", "pool_size: -1", "negative limits"},
		{"config: {k: v}", "extra: 1", "field extra not found"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := ParseManifest([]byte(strings.Replace(goodManifest, tt.from, tt.to, 1)))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestInitConfigJSON(t *testing.T) {
	ck := Checkpoint{
		Statistics:      []byte(`{"a": {"state": {}}, "b": {"state": {"x": {"min": [0]}}}}`),
		ProcessorConfig: []byte(`{"processor_kwargs": {"use_percentiles": true, "modality_configs": {"a": {}, "b": {"video": 1}}}}`),
	}
	js, err := InitConfigJSON("b", ck, map[string]any{"k": 1})
	require.NoError(t, err)
	assert.JSONEq(t, `{"embodiment":"b","statistics":{"state":{"x":{"min":[0]}}},"processor":{"use_percentiles":true,"modality_config":{"video":1}},"config":{"k":1}}`, string(js))
	_, err = InitConfigJSON("c", ck, nil)
	assert.EqualError(t, err, "plugins: statistics.json has no entry for embodiment c")
	js, err = InitConfigJSON("c", Checkpoint{}, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"embodiment":"c"}`, string(js))
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add([]byte("name: x\nlimits: [1]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err == nil && (m.Name == "" || len(m.Embodiments) != 1) {
			t.Fatalf("accepted invalid manifest %+v", m)
		}
	})
}

// TestManifestComplete: the module's describe() is the one source of the
// version; a template that disagrees with it fails when packed.
func TestManifestComplete(t *testing.T) {
	d := &Description{Name: "droid", Version: "1.2.3", Embodiment: "oxe_droid"}
	for _, tc := range []struct {
		name    string
		m       Manifest
		want    Manifest
		errWant string
	}{
		{name: "version filled", m: Manifest{Name: "droid", Embodiments: []string{"oxe_droid"}},
			want: Manifest{Name: "droid", Version: "1.2.3", Embodiments: []string{"oxe_droid"}}},
		{name: "same version", m: Manifest{Name: "droid", Version: "1.2.3", Embodiments: []string{"oxe_droid"}},
			want: Manifest{Name: "droid", Version: "1.2.3", Embodiments: []string{"oxe_droid"}}},
		{name: "embodiment filled", m: Manifest{Name: "droid"},
			want: Manifest{Name: "droid", Version: "1.2.3", Embodiments: []string{"oxe_droid"}}},
		{name: "yaml bumped alone", m: Manifest{Name: "droid", Version: "1.2.4", Embodiments: []string{"oxe_droid"}},
			errWant: `plugin[droid] plugin.yaml version "1.2.4" differs from the module's describe version "1.2.3"`},
		{name: "name", m: Manifest{Name: "droid2"}, errWant: `plugin.yaml name "droid2" differs from the module's describe name "droid"`},
		{name: "embodiment", m: Manifest{Name: "droid", Embodiments: []string{"libero_sim"}},
			errWant: `plugin.yaml embodiments [libero_sim] differ from the module's describe embodiment "oxe_droid"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			err := m.complete(d)
			if tc.errWant != "" {
				require.ErrorContains(t, err, tc.errWant)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, m)
		})
	}
}

func TestManifestControlHz(t *testing.T) {
	m, err := ParseManifest([]byte(goodManifest))
	require.NoError(t, err)
	hz, ok := m.ControlRate()
	assert.False(t, ok, "control_hz absent")
	assert.Zero(t, hz)

	tests := []struct {
		value   string
		want    float64
		wantErr string
	}{
		{"15", 15, ""},
		{"20.0", 20, ""},
		{"12.5", 12.5, ""},
		{"0", 0, "wasm: plugin[droid] manifest: control_hz 0: want a finite number > 0"},
		{"-15", 0, "control_hz -15: want a finite number > 0"},
		{".nan", 0, "control_hz NaN: want a finite number > 0"},
		{".inf", 0, "control_hz +Inf: want a finite number > 0"},
		{"fast", 0, "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			m, err := ParseManifest([]byte(goodManifest + "control_hz: " + tt.value + "\n"))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			hz, ok := m.ControlRate()
			assert.True(t, ok)
			assert.Equal(t, tt.want, hz)
		})
	}
}

// TestWritePluginDirControlHz: control_hz survives packing (gwplugin-pack
// writes the template's fields through WritePluginDir) and is validated there.
func TestWritePluginDirControlHz(t *testing.T) {
	m, err := ParseManifestTemplate([]byte("name: x\nversion: 1.0.0\nabi: 1\nsha256: \"\"\nembodiments: [x]\ncontrol_hz: 15\n"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, WritePluginDir(dir, m, []byte("\x00asm")))
	back, err := ReadManifest(dir)
	require.NoError(t, err)
	hz, ok := back.ControlRate()
	assert.True(t, ok)
	assert.Equal(t, 15.0, hz)

	bad := -1.0
	m.ControlHz = &bad
	require.ErrorContains(t, WritePluginDir(t.TempDir(), m, []byte("\x00asm")), "control_hz -1")
}
