// The consumer interfaces the service drives (Encoder, Embodiment; the
// backend is device.Backend) and the values that cross them.

package service

import (
	"context"

	"github.com/gr00tgw/gr00tgw/device"
)

// CameraFrames is one camera's frames as the request sent them, oldest
// first: frame i is Raw[i] when Raw is set and Raw[i].Pix is not nil, else
// the encoded image Frames[i] (PNG or JPEG bytes). The slices are owned by
// the gateway and valid for the duration of the Decode call only.
type CameraFrames struct {
	Key    string
	Frames [][]byte
	Raw    []RawFrame
}

// RawFrame is one frame as raw pixels: uint8 RGB, row-major [Height, Width,
// 3] (len(Pix) = Height·Width·3). It skips image decoding and is held to
// the same size and aspect rules as an encoded frame; the same pixels give
// the same model inputs either way.
type RawFrame struct {
	Pix           []byte
	Height, Width int
}

// CameraImages describes one camera's decoded frames: what plugin.pre sees
// of images (sizes, not pixels) and what the response reports.
type CameraImages struct {
	Key    string
	Frames int
	// Height and Width are the received frame size (all frames of one
	// camera share it; Decode rejects a request where they do not).
	Height, Width int
}

// Decoded is the result of Encoder.Decode.
type Decoded struct {
	// Cameras reports each camera, in the order Decode received them.
	Cameras []CameraImages
	// Pixels is the encoder's own decoded form of the frames, handed back
	// unchanged to Encode. The gateway never looks inside.
	Pixels any
}

// Encoded is the result of Encoder.Encode.
type Encoded struct {
	// Inputs carries the image and text tensors: PixelValues/PixelRows/
	// PixelCols, ImageGridTHW, InputIDs, AttentionMask and PositionIDs.
	// The gateway fills State, EmbodimentID, Noise and Seed.
	Inputs device.Inputs
	// SeqLen is the LLM sequence length (469 for the DROID demo).
	SeqLen int
	// PromptTokens is the number of instruction tokens (8 for the demo).
	PromptTokens int
	// GridTHW is the ViT patch grid [t, h, w] per camera key ([1, 16, 28]).
	GridTHW map[string][3]int
	// Release, when set, is called exactly once when the gateway no longer
	// needs Inputs (after the device call, or when the request fails
	// first), so the encoder can recycle its buffers (pixel_values is
	// 11 MB per DROID request).
	Release func()
}

// Encoder is the host pipeline (core/image, core/text, core/processor):
// decode and validate frames, then run the eval chain, patching, prompt,
// tokenizer and mRoPE. Both methods run outside the device lock and must be
// safe for concurrent use.
//
// Errors that blame the request (undecodable image, frame size outside the
// accepted band, instruction longer than L_max tokens, …) must implement
// FieldError (or be a *HandlerError) so the gateway answers 400 naming the
// field ("images.wrist_image_left[1]", "instruction"); any other error is a
// 500.
type Encoder interface {
	// Decode decodes every frame and applies the frame-size rules. cams is
	// in the embodiment's camera order (Describe().Cameras).
	Decode(ctx context.Context, cams []CameraFrames) (*Decoded, error)
	// Encode turns decoded frames and the raw instruction text into model
	// inputs. It consumes d.Pixels (the encoder may recycle the frames).
	Encode(ctx context.Context, d *Decoded, instruction string) (*Encoded, error)
}

// Group is one named state or action group and its width.
type Group struct {
	Key string `json:"key"`
	Dim int    `json:"dim"`
}

// EmbodimentInfo describes the served embodiment (the plugin's gw_describe).
type EmbodimentInfo struct {
	// Name is the embodiment tag, e.g. "oxe_droid_relative_eef_relative_joint".
	Name string `json:"name"`
	// ID is the projector slot (24 for DROID).
	ID int `json:"id"`
	// Plugin and PluginVersion identify the plugin that implements it.
	Plugin        string `json:"plugin"`
	PluginVersion string `json:"plugin_version"`
	// Cameras are the camera keys in model order.
	Cameras []string `json:"cameras"`
	// VideoDeltaIndices are the frame offsets per camera, oldest first
	// ([-15, 0]); a request sends exactly len(VideoDeltaIndices) frames.
	VideoDeltaIndices []int `json:"video_delta_indices"`
	// StateGroups and ActionGroups are in model order.
	StateGroups  []Group `json:"state_groups"`
	ActionGroups []Group `json:"action_groups"`
	// InstructionChars is the accepted instruction length in characters
	// [min, max] (the plugin's language limits); zero means [1,
	// MaxInstructionChars].
	InstructionChars [2]int `json:"instruction_chars,omitempty"`
	// ActionHorizon is the number of action steps the embodiment decodes
	// (40 for DROID, 16 for libero_sim): the first ActionHorizon rows of
	// the model's chunk (ModelInfo.ActionHorizon rows), the response's
	// action_horizon and the row count of every action group.
	ActionHorizon int `json:"action_horizon"`
	// ControlHz is the embodiment's control rate in Hz (the plugin
	// manifest's control_hz); 0 when it declares none. Real-time
	// chunking's "auto" rows need it (sessions.go).
	ControlHz float64 `json:"control_hz,omitempty"`
}

// instructionChars is the accepted instruction length [lo, hi].
func (e *EmbodimentInfo) instructionChars() (lo, hi int) {
	lo, hi = max(e.InstructionChars[0], 1), e.InstructionChars[1]
	if hi <= 0 {
		hi = MaxInstructionChars
	}
	return lo, hi
}

// PreInput is what plugin.pre sees of a request.
type PreInput struct {
	// RequestID is the request's X-Request-ID ("warmup-<n>" during warm-up).
	RequestID  string
	Embodiment string
	Cameras    []CameraImages
	// State is the raw state per group, already rounded to StateDtype.
	State      map[string][]float64
	StateDtype string
	// Instruction is the raw instruction text.
	Instruction string
}

// PostInput is what plugin.post sees.
type PostInput struct {
	RequestID string
	// ActionPred is the model's whole normalised chunk [Horizon, Dim]
	// row-major (Horizon: ModelInfo's denoised horizon, which may exceed
	// the embodiment's; the plugin decodes the first rows).
	ActionPred []float32
	Horizon    int
	Dim        int
	// State is the request's raw state (as in PreInput) for relative
	// composition.
	State      map[string][]float64
	StateDtype string
}

// Embodiment is one embodiment plugin. Pre validates the request's state
// and camera layout and returns the normalised, padded state
// [max_state_dim]; Post slices, un-normalises and composes the action chunk
// into physical actions per group, each [EmbodimentInfo.ActionHorizon·Dim]
// row-major float32 (the first rows of the model's chunk).
// Both must be safe for concurrent use. Validation failures implement
// FieldError (→ 400 naming the field); other errors are 500s.
type Embodiment interface {
	Describe() EmbodimentInfo
	Pre(ctx context.Context, in *PreInput) ([]float32, error)
	Post(ctx context.Context, in *PostInput) (map[string][]float32, error)
}

// ModelInfo is static information about the served model.
type ModelInfo struct {
	// Version is the model version tag ("n17").
	Version string `json:"version"`
	// Repo and Revision identify the weights.
	Repo     string `json:"repo,omitempty"`
	Revision string `json:"revision,omitempty"`
	// ActionDim is the model's padded action width (132).
	ActionDim int `json:"action_dim"`
	// ActionHorizon is the number of steps the model denoises (config.json
	// action_horizon, 40), whatever the embodiment decodes: explicit noise
	// and the backend's action_pred are [ActionHorizon, ActionDim]. 0
	// means the embodiment's horizon (EmbodimentInfo.ActionHorizon); it
	// must not be below it.
	ActionHorizon int `json:"action_horizon,omitempty"`
	// DefaultSeed seeds the noise when a request sends neither seed nor
	// noise (config default_seed, 42).
	DefaultSeed uint64 `json:"default_seed"`
	// RandomNoise gives such a request a random seed instead (config
	// random_noise); warm-up keeps DefaultSeed.
	RandomNoise bool `json:"random_noise"`
	// Extra is merged into GET /info.
	Extra map[string]any `json:"-"`
}

// ChunkHorizon is the model's denoised horizon, falling back to the
// embodiment's when the loader left ModelInfo.ActionHorizon zero.
func (m *ModelInfo) ChunkHorizon(info *EmbodimentInfo) int {
	if m.ActionHorizon > 0 {
		return m.ActionHorizon
	}
	return info.ActionHorizon
}

// Deps is everything the gateway needs to serve, produced by a LoadFunc:
// the one backend every embodiment shares, the model facts, and the
// Catalog the served embodiments come from.
type Deps struct {
	Backend device.Backend
	// Catalog lists and opens the embodiments (required). Start serves
	// every embodiment it lists (or those of config key embodiments);
	// Reload re-reads it.
	Catalog Catalog
	Model   ModelInfo
	// Close, when set, is called after the backend is closed at shutdown
	// (plugin host, caches).
	Close func() error
	// gating: Backend is one restarted runner, out of rotation, that its
	// gate runs alone; its calls take no slot of the device lock.
	gating bool
}

// LoadFunc builds the dependencies at start-up. The gateway calls it once,
// after it has started listening; a returned error fails the start.
// Progress is logged by the LoadFunc itself (boot landmarks).
type LoadFunc func(ctx context.Context) (*Deps, error)
