// Package abi holds the constants and JSON document types of gwabi v1, the
// contract between the gr00tgw plugin host (package plugins) and guest
// plugins (package plugins/pdk). It is imported by both sides, so it has no
// dependencies and compiles for GOOS=wasip1.
//
// The authoritative description of the ABI is plugins/ABI.md; this package
// only names what that document defines.
package abi

// Version is the ABI major version implemented by this package. A guest
// declares it by exporting the never-called function ExportABIMarker.
const Version = 1

// Names of the guest exports required by ABI v1.
const (
	ExportABIMarker  = "gw_abi_v1"   // () -> (); presence declares ABI v1
	ExportAlloc      = "gw_alloc"    // (size i32) -> i32 pointer, 8-byte aligned
	ExportFree       = "gw_free"     // (ptr i32) -> ()
	ExportDescribe   = "gw_describe" // () -> i64 packed result, body = Description JSON
	ExportInit       = "gw_init"     // (ptr i32, len i32) -> i64 packed result, input = InitConfig JSON
	ExportPre        = "gw_pre"      // (ptr i32, len i32) -> i64 packed result, envelopes in and out
	ExportPost       = "gw_post"     // (ptr i32, len i32) -> i64 packed result, envelopes in and out
	ExportMemory     = "memory"      // the guest's linear memory
	ExportInitialize = "_initialize" // reactor start function (Go -buildmode=c-shared)
)

// Optional capabilities (v1.x). A guest declares one by listing its name in
// Description.Features and exporting what it needs; the host checks the
// export at load and never calls it otherwise.
const (
	// FeatureReencode: the guest exports ExportReencode, which
	// re-expresses a previous action chunk against the current state for
	// real-time chunking (ABI.md §11).
	FeatureReencode = "reencode"
	ExportReencode  = "gw_reencode" // (ptr i32, len i32) -> i64 packed result, envelopes in and out

	AttrShift       = "shift"       // reencode input: decimal row count e, 0 ≤ e < action_horizon
	PrevStatePrefix = "prev_state." // reencode input: the previous request's raw state group, as StatePrefix
)

// Host import module and function names.
const (
	HostModule  = "gw_host"
	HostFuncLog = "log" // (level i32, ptr i32, len i32) -> ()
)

// Log levels accepted by gw_host.log; they match log/slog's levels.
const (
	LogDebug int32 = -4
	LogInfo  int32 = 0
	LogWarn  int32 = 4
	LogError int32 = 8
)

// Result status codes: the first little-endian u32 of every result body.
const (
	StatusOK          uint32 = 0 // body follows (envelope or JSON)
	StatusInvalid     uint32 = 1 // validation error: body is an error envelope (attrs code, field, message)
	StatusPluginError uint32 = 2 // the plugin failed for another reason: same body as StatusInvalid
)

// ResultHeaderSize is the size of the status header that precedes every
// result body: u32 status, u32 reserved (zero), so that the body stays 8-byte
// aligned.
const ResultHeaderSize = 8

// Error codes used by the reference plugins. Plugins may define others;
// the host passes them through unchanged.
const (
	CodeInvalidState       = "invalid_state"
	CodeInvalidCamera      = "invalid_camera"
	CodeInvalidInstruction = "invalid_instruction"
	CodeInvalidEmbodiment  = "invalid_embodiment"
	CodeInvalidAction      = "invalid_action"
	CodeInvalidConfig      = "invalid_config"
	CodePluginError        = "plugin_error"
)

// AttrsPad is the multiple the host pads a pre/post request's attribute
// section to (envelope.Builder.PadAttrs): an instruction of another length
// then usually leaves the request's layout unchanged, and the guest's
// decoder reuses it.
const AttrsPad = 256

// Tensor and attribute names used in the pre/post envelopes.
const (
	AttrRequestID   = "request_id"
	AttrEmbodiment  = "embodiment"
	AttrInstruction = "instruction"
	AttrStateDType  = "state_dtype" // "float32" (default) or "float64"
	AttrCode        = "code"        // error envelopes
	AttrField       = "field"       // error envelopes
	AttrMessage     = "message"     // error envelopes

	StatePrefix  = "state."  // raw state group, FP64 [T, D] (T = 0 means the request sent [D])
	VideoPrefix  = "video."  // camera descriptor, UINT8 [T, H, W, C], by-handle (no data)
	ActionPrefix = "action." // decoded action group, FP32 [H, D]

	TensorState      = "state"       // pre output: FP32 [MaxStateDim], normalised and padded
	TensorActionPred = "action_pred" // post input: FP32 [H, MaxActionDim], normalised model output
)

// Action representations, types and formats (lower-case forms of the
// upstream enum names RELATIVE/ABSOLUTE, EEF/NON_EEF, DEFAULT/XYZ_ROT6D).
const (
	RepRelative    = "relative"
	RepAbsolute    = "absolute"
	TypeEEF        = "eef"
	TypeNonEEF     = "non_eef"
	FormatDefault  = "default"
	FormatXYZRot6D = "xyz_rot6d"
)

// Description is what gw_describe returns (as JSON): the plugin's identity
// and the complete observation/action layout of the embodiment it serves.
// The gateway builds request validation, model metadata and the model
// input layout from it, so every field is required unless marked optional.
type Description struct {
	Name    string `json:"name"`    // plugin name, equal to the manifest's
	Version string `json:"version"` // semver, equal to the manifest's
	ABI     int    `json:"abi"`     // must be Version

	Embodiment    string `json:"embodiment"`     // embodiment tag, e.g. oxe_droid_relative_eef_relative_joint
	ProjectorSlot int    `json:"projector_slot"` // embodiment id: index of the category-specific projectors

	Cameras  []Camera      `json:"cameras"`  // in model frame order (see Layout.FrameOrder)
	State    []StateGroup  `json:"state"`    // in concatenation order
	Actions  []ActionGroup `json:"actions"`  // in column order of the model's action chunk
	Language Language      `json:"language"` // instruction key and limits

	ActionHorizon int `json:"action_horizon"` // steps kept from the model's chunk
	MaxStateDim   int `json:"max_state_dim"`  // padded state width (132 for N1.7)
	MaxActionDim  int `json:"max_action_dim"` // model action width (132 for N1.7)

	Layout Layout `json:"layout"`

	// Features lists optional ABI capabilities (FeatureReencode).
	Features []string `json:"features,omitempty"`
}

// Camera is one video modality key.
type Camera struct {
	Key string `json:"key"`
	// DeltaIndices are the frame offsets relative to now, oldest first
	// (DROID: [-15, 0]); the request carries len(DeltaIndices) frames.
	DeltaIndices []int `json:"delta_indices"`
	// Height and Width are the nominal frame size (a hint; the accepted
	// sizes are given by Layout.FrameAspect).
	Height int `json:"height"`
	Width  int `json:"width"`
}

// StateGroup is one state modality key.
type StateGroup struct {
	Key          string `json:"key"`
	Dim          int    `json:"dim"`
	DeltaIndices []int  `json:"delta_indices"`
}

// ActionGroup is one action modality key and its decoding rule.
type ActionGroup struct {
	Key    string `json:"key"`
	Dim    int    `json:"dim"`
	Rep    string `json:"rep"`    // RepRelative or RepAbsolute
	Type   string `json:"type"`   // TypeEEF or TypeNonEEF
	Format string `json:"format"` // FormatDefault or FormatXYZRot6D
	// StateKey names the state group a relative action is added to.
	StateKey string `json:"state_key,omitempty"`
}

// Language describes the instruction input.
type Language struct {
	Key      string `json:"key"`       // e.g. annotation.language.language_instruction
	MinChars int    `json:"min_chars"` // inclusive, in Unicode code points
	MaxChars int    `json:"max_chars"` // inclusive, in Unicode code points
}

// Layout is the model input layout this embodiment needs.
type Layout struct {
	Name string `json:"name"` // short layout name, e.g. "droid"
	// FrameOrder lists "camera@delta" in the order images enter the model,
	// e.g. ["exterior_image_1_left@-15", "wrist_image_left@-15", ...].
	FrameOrder []string `json:"frame_order"`
	// VitGridTHW is the per-image Qwen ViT patch grid, e.g. [1, 16, 28].
	VitGridTHW [3]int `json:"vit_grid_thw"`
	// TokensPerImage is the number of <|image_pad|> tokens per image
	// (grid t·h·w / merge²).
	TokensPerImage int `json:"tokens_per_image"`
	// LMax is the maximum instruction length in tokens after formalisation.
	LMax int `json:"l_max"`
	// FrameAspect is the accepted width/height ratio band [min, max].
	FrameAspect [2]float64 `json:"frame_aspect"`
	// FrameSide is the accepted [min, max] frame side in pixels.
	FrameSide [2]int `json:"frame_side"`
}

// InitConfig is the JSON document passed to gw_init once per instance.
type InitConfig struct {
	Embodiment string `json:"embodiment"`
	// Statistics is statistics.json[embodiment]: {"state": {key: Stats},
	// "action": {key: Stats}, "relative_action": {key: Stats}}. Kept raw
	// so that each side decodes only what it needs.
	Statistics map[string]map[string]Stats `json:"statistics"`
	// Processor holds processor_kwargs of processor_config.json with
	// modality_configs reduced to this embodiment's entry (ModalityConfig).
	Processor Processor `json:"processor"`
	// Config is the manifest's free-form config map.
	Config map[string]any `json:"config,omitempty"`
}

// Stats is one statistics entry. Arrays are 1-D [D] for state/action and
// 2-D [H][D] (per step) for relative_action; both decode into Array.
type Stats struct {
	Min  Array `json:"min"`
	Max  Array `json:"max"`
	Mean Array `json:"mean"`
	Std  Array `json:"std"`
	Q01  Array `json:"q01"`
	Q99  Array `json:"q99"`
}

// Processor is the subset of processor_kwargs plugins use.
type Processor struct {
	UsePercentiles    bool `json:"use_percentiles"`
	UseMeanStd        bool `json:"use_mean_std"`
	ClipOutliers      bool `json:"clip_outliers"`
	UseRelativeAction bool `json:"use_relative_action"`
	MaxStateDim       int  `json:"max_state_dim"`
	MaxActionDim      int  `json:"max_action_dim"`
	MaxActionHorizon  int  `json:"max_action_horizon"`
	// ModalityConfig is processor_kwargs.modality_configs[embodiment] as
	// raw JSON bytes (nil when the checkpoint has none for this tag).
	ModalityConfig RawJSON `json:"modality_config,omitempty"`
}
