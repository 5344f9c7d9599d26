package service

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// EmbodimentHeader routes a /predict request to an embodiment without the
// body being parsed (a proxy can set it). When the body names an
// embodiment too, both must agree.
const EmbodimentHeader = "X-Embodiment"

// Layout is the model input layout one embodiment runs: what its processor
// feeds the backend. /info reports it per embodiment.
type Layout struct {
	// Name is the plugin's layout name ("droid", "libero").
	Name string `json:"name"`
	// Cameras and FramesPerCamera give the images per observation.
	Cameras         int `json:"cameras"`
	FramesPerCamera int `json:"frames_per_camera"`
	// FrameOrder lists "camera@delta" in model order.
	FrameOrder []string `json:"frame_order,omitempty"`
	// VitGridTHW is the patch grid every frame must produce (zero: any).
	VitGridTHW [3]int `json:"vit_grid_thw"`
	// TokensPerImage is the image-pad tokens per frame (0: varies).
	TokensPerImage int `json:"tokens_per_image,omitempty"`
	// MaxTextTokens is L_max, the longest instruction in tokens (0: only
	// the backend's sequence bounds it).
	MaxTextTokens int `json:"l_max"`
	// FrameRule states the accepted frame sizes in words.
	FrameRule string `json:"frame_rule,omitempty"`
}

// Binding is one embodiment bound to the served model: its plugin, its
// host pipeline and its demo. A Catalog opens it; the gateway warms it up,
// serves it, and closes it once it is retired (replaced or removed by a
// reload, or at shutdown) and its last request has finished. A request
// runs on one Binding from start to end, so a reload never mixes two
// plugin versions within one request.
type Binding struct {
	// Embodiment is its plugin (Describe, Pre, Post).
	Embodiment Embodiment
	// Encoder is its host pipeline (its cameras, chain, grid and L_max).
	Encoder Encoder
	// Demo is its demo observation for warm-up and GET /demo. Without a
	// Golden, warm-up checks finiteness and repeat determinism instead of
	// fidelity; without a Demo, warm-up refuses the embodiment (unless
	// warmup_runs is 0).
	Demo *Demo
	// SHA256 is the plugin's .wasm digest, reported by /info.
	SHA256 string
	// Layout describes its model input layout for /info.
	Layout Layout
	// Modality, when set, is its processor's modality config as upstream
	// serves it (keys video, state, action, language; the robot
	// protocols' get_modality_config). nil: built from the plugin's
	// description (see Core.Contract).
	Modality map[string]ModalityConfig
	// Close releases it; called exactly once by the gateway, after the
	// last request that used the binding. nil: nothing to release.
	Close func(ctx context.Context) error
	// ActionLimits are the plugin's declared safety limits by action
	// group (Plugin.ActionLimits; nil: the gate checks finiteness only),
	// and Description its gw_describe, against which the safety gate
	// compiles them (nil: built from Embodiment.Describe(), which knows
	// no action representations: enough for limits without max_jump on a
	// relative group). See service/safety.go.
	ActionLimits map[string]abi.ActionLimit
	Description  *abi.Description
}

// Candidate is one embodiment a Catalog can open.
type Candidate struct {
	// Tag is the embodiment tag.
	Tag string
	// Revision identifies the candidate's content (plugin .wasm and
	// manifest): a reload replaces a served embodiment whose revision
	// differs and leaves an equal one alone.
	Revision string
	// Source says where it comes from (a plugin directory), for logs and
	// /info.
	Source string
	// Err, when set, is why the candidate cannot be opened, found by the
	// scan itself (two plugins claim the tag, an unreadable manifest);
	// the gateway refuses the tag with it.
	Err error
}

// Catalog is where the served embodiments come from: binding
// implements it over plugins_dir and the checkpoint. Scan and Open are
// called from one goroutine at a time (start-up, then each reload, in
// turn), but concurrently with requests on bindings opened earlier.
type Catalog interface {
	// Scan lists the embodiments available now, one Candidate per tag.
	Scan(ctx context.Context) ([]Candidate, error)
	// Open builds c's binding, running every check that does not need
	// the device (plugin load, checkpoint entries, processor alignment,
	// dims, horizon, layout). The gateway then warms it up before it
	// takes traffic.
	Open(ctx context.Context, c Candidate) (*Binding, error)
}

// StaticCatalog serves a fixed set of bindings, for embedding the gateway
// in a program that builds its embodiments itself (and for tests). Each
// binding is listed under its Describe().Name with its SHA256 as the
// revision; Open hands out the binding itself, so it can be served once.
func StaticCatalog(bs ...*Binding) Catalog { return staticCatalog(bs) }

type staticCatalog []*Binding

func (s staticCatalog) Scan(context.Context) ([]Candidate, error) {
	out := make([]Candidate, 0, len(s))
	for _, b := range s {
		out = append(out, Candidate{Tag: b.Embodiment.Describe().Name, Revision: b.SHA256, Source: "static"})
	}
	return out, nil
}

func (s staticCatalog) Open(_ context.Context, c Candidate) (*Binding, error) {
	for _, b := range s {
		if b.Embodiment.Describe().Name == c.Tag {
			return b, nil
		}
	}
	return nil, fmt.Errorf("embodiment %s: not in the static catalog", c.Tag)
}

// errNoCandidate is the refusal of a configured tag no plugin serves.
var errNoCandidate = errors.New("no plugin serves it")

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
