package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// ManifestFile is the manifest's file name inside a plugin directory.
const ManifestFile = "plugin.yaml"

// Manifest is a plugin's plugin.yaml.
//
//	name: droid
//	version: 1.0.0
//	abi: 1
//	wasm: droid.wasm          # optional, default <name>.wasm
//	sha256: 3a…               # of the .wasm file, lower-case hex
//	embodiments: [oxe_droid_relative_eef_relative_joint]
//	limits: {max_pages: 512, timeout_ms: 50, pool_size: 4}
//	control_hz: 15            # optional: the embodiment's control rate
//	config: {}                # free-form, passed to gw_init
//	action_limits:            # optional safety limits per action group (abi.ActionLimit)
//	  joint_position: {min: […], max: […], max_step_delta: […], max_jump: […]}
//	  gripper_position: {gripper: [0, 1]}
type Manifest struct {
	Name        string         `yaml:"name"`
	Version     string         `yaml:"version"`
	ABI         int            `yaml:"abi"`
	Wasm        string         `yaml:"wasm,omitempty"`
	SHA256      string         `yaml:"sha256"`
	Embodiments []string       `yaml:"embodiments"`
	Limits      Limits         `yaml:"limits"`
	Config      map[string]any `yaml:"config,omitempty"`
	// ActionLimits are the safety gate's limits per action group key
	// (optional; ABI.md §10 "Action limits"). Validate checks them on their
	// own; the host checks them against the description at load.
	ActionLimits map[string]abi.ActionLimit `yaml:"action_limits,omitempty"`

	// ControlHz (`control_hz`, optional) is the rate in Hz at which the
	// embodiment executes one row of an action chunk; nil when the
	// manifest does not say. The server derives real-time chunking's
	// defaults from it (issue 27 point 4: frozen rows = ceil(latency ×
	// control_hz), overlap from the rows executed since the last chunk).
	// When present it must be a finite number > 0.
	ControlHz *float64 `yaml:"control_hz,omitempty"`
}

// ControlRate returns control_hz and whether the manifest sets it.
func (m *Manifest) ControlRate() (hz float64, ok bool) {
	if m.ControlHz == nil {
		return 0, false
	}
	return *m.ControlHz, true
}

// Limits are a plugin's resource limits; zero means the host default.
type Limits struct {
	MaxPages  uint32 `yaml:"max_pages"`
	TimeoutMS int    `yaml:"timeout_ms"`
	PoolSize  int    `yaml:"pool_size"`
}

var (
	reName   = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	reSemver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	reSHA    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ReadManifest reads and validates dir/plugin.yaml.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("wasm: plugin dir %s: %w", dir, err)
	}
	return ParseManifest(b)
}

// ParseManifest parses and validates a plugin.yaml document. Unknown keys
// are rejected.
func ParseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	dec := yaml.NewDecoder(bytesReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("wasm: manifest: %w", err)
	}
	return &m, m.Validate()
}

// Validate checks the manifest's fields.
func (m *Manifest) Validate() error {
	switch {
	case !reName.MatchString(m.Name):
		return fmt.Errorf("wasm: manifest: name %q: want [a-z0-9][a-z0-9_.-]*", m.Name)
	case !reSemver.MatchString(m.Version):
		return fmt.Errorf("wasm: plugin[%s] manifest: version %q is not semver", m.Name, m.Version)
	case m.ABI == 0:
		return fmt.Errorf("wasm: plugin[%s] manifest: abi missing (want 1)", m.Name)
	case !reSHA.MatchString(m.SHA256):
		return fmt.Errorf("wasm: plugin[%s] manifest: sha256 %q: want 64 lower-case hex digits", m.Name, m.SHA256)
	case len(m.Embodiments) != 1:
		return fmt.Errorf("wasm: plugin[%s] manifest: embodiments %v: ABI v1 plugins serve exactly one embodiment", m.Name, m.Embodiments)
	case m.Limits.TimeoutMS < 0 || m.Limits.PoolSize < 0:
		return fmt.Errorf("wasm: plugin[%s] manifest: negative limits %+v", m.Name, m.Limits)
	case m.ControlHz != nil && !(*m.ControlHz > 0 && !math.IsInf(*m.ControlHz, 1)):
		return fmt.Errorf("wasm: plugin[%s] manifest: control_hz %v: want a finite number > 0 (the rate in Hz at which the robot executes chunk rows)", m.Name, *m.ControlHz)
	}
	return m.validateActionLimits(nil)
}

// validateActionLimits checks the action_limits on their own, and against d
// when it is not nil, in sorted key order.
func (m *Manifest) validateActionLimits(d *Description) error {
	if len(m.ActionLimits) == 0 {
		return nil
	}
	var err error
	if d != nil {
		err = abi.CheckActionLimits(d, m.ActionLimits)
	} else {
		for _, k := range slices.Sorted(maps.Keys(m.ActionLimits)) {
			l := m.ActionLimits[k]
			if err = l.Validate(k); err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("wasm: plugin[%s] manifest: %w", m.Name, err)
	}
	return nil
}

// WasmFile returns the .wasm file name (Wasm, or <name>.wasm).
func (m *Manifest) WasmFile() string {
	if m.Wasm != "" {
		return m.Wasm
	}
	return m.Name + ".wasm"
}

// ParseManifestTemplate parses a plugin.yaml template as shipped in an
// embodiment's source directory: like ParseManifest, but sha256 may be
// empty (WritePluginDir fills it in). Unknown keys are rejected.
func ParseManifestTemplate(b []byte) (*Manifest, error) {
	var m Manifest
	dec := yaml.NewDecoder(bytesReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("wasm: manifest template: %w", err)
	}
	return &m, nil
}

// WritePluginDir writes a loadable plugin directory: dir/<wasm file> and
// dir/plugin.yaml, with the manifest's sha256 set to the hash of wasm.
// It validates the resulting manifest.
func WritePluginDir(dir string, m *Manifest, wasm []byte) error {
	mm := *m
	sum := sha256.Sum256(wasm)
	mm.SHA256 = hex.EncodeToString(sum[:])
	if err := mm.Validate(); err != nil {
		return err
	}
	y, err := yaml.Marshal(&mm)
	if err != nil {
		return fmt.Errorf("wasm: plugin[%s] manifest: %w", mm.Name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, mm.WasmFile()), wasm, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ManifestFile), y, 0o644)
}

// Complete makes a manifest template agree with the module it describes:
// the module's describe() document (Inspect) is the one source of the
// plugin's version, so a template without `version` gets the module's; a
// template whose name, version or embodiment differs from the module's is
// refused here, when the plugin is packed, naming both values — not later,
// when a server loads it. m is modified in place.
func Complete(ctx context.Context, m *Manifest, wasm []byte, opts ...Option) error {
	d, err := Inspect(ctx, m.Name, wasm, opts...)
	if err != nil {
		return err
	}
	return m.complete(d)
}

func (m *Manifest) complete(d *Description) error {
	const fix = "the module's Describe (its Go source) is the source of truth: change it there, or drop the key from plugin.yaml"
	switch {
	case m.Name != d.Name:
		return fmt.Errorf("wasm: plugin.yaml name %q differs from the module's describe name %q: %s", m.Name, d.Name, fix)
	case m.Version != "" && m.Version != d.Version:
		return fmt.Errorf("wasm: plugin[%s] plugin.yaml version %q differs from the module's describe version %q: %s", m.Name, m.Version, d.Version, fix)
	case len(m.Embodiments) == 1 && m.Embodiments[0] != d.Embodiment:
		return fmt.Errorf("wasm: plugin[%s] plugin.yaml embodiments %v differ from the module's describe embodiment %q: %s", m.Name, m.Embodiments, d.Embodiment, fix)
	}
	if err := m.validateActionLimits(d); err != nil {
		return err
	}
	m.Version = d.Version
	if len(m.Embodiments) == 0 {
		m.Embodiments = []string{d.Embodiment}
	}
	return nil
}
