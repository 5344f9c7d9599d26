package service

// ImageReport is one camera's entry in the response's "images".
type ImageReport struct {
	Frames     int    `json:"frames" msgpack:"frames"`
	ReceivedHW [2]int `json:"received_hw" msgpack:"received_hw"`
	VitGridTHW [3]int `json:"vit_grid_thw" msgpack:"vit_grid_thw"`
}

// PluginReport names the plugin that served the request.
type PluginReport struct {
	Name    string `json:"name" msgpack:"name"`
	Version string `json:"version" msgpack:"version"`
}

// Timing is the response's "timing_ms": the reference server's five stages
// (decode, encode, device, decode_actions, total) plus gr00tgw's extra keys
// (parse: body to request; queue: wait for the device lock; plugin_pre / plugin_post: time inside
// the embodiment plugin; the device's own stages). Milliseconds.
type Timing struct {
	Decode        float64 `json:"decode" msgpack:"decode"`
	Encode        float64 `json:"encode" msgpack:"encode"`
	Device        float64 `json:"device" msgpack:"device"`
	DecodeActions float64 `json:"decode_actions" msgpack:"decode_actions"`
	Total         float64 `json:"total" msgpack:"total"`
	Parse         float64 `json:"parse" msgpack:"parse"`
	Queue         float64 `json:"queue" msgpack:"queue"`
	PluginPre     float64 `json:"plugin_pre" msgpack:"plugin_pre"`
	PluginPost    float64 `json:"plugin_post" msgpack:"plugin_post"`
	// Safety is the safety gate's time (absent when the gate is off).
	Safety       float64            `json:"safety,omitempty" msgpack:"safety,omitempty"`
	DeviceStages map[string]float64 `json:"device_stages,omitempty" msgpack:"device_stages,omitempty"`
}

// PredictResponse is the 200 body of POST /predict, field for field the
// reference server's (README, "The HTTP API"), plus "plugin" and
// "request_id".
//
// Numbers: actions are float32 values written as the exact decimal of the
// double they convert to (what Python's json writes for numpy float32), so
// clients comparing with the reference see identical text.
type PredictResponse struct {
	Actions       map[string][][]float64 `json:"actions" msgpack:"actions"`
	ActionHorizon int                    `json:"action_horizon" msgpack:"action_horizon"`
	ActionKeys    []string               `json:"action_keys" msgpack:"action_keys"`
	ActionDims    map[string]int         `json:"action_dims" msgpack:"action_dims"`
	Normalized    bool                   `json:"normalized" msgpack:"normalized"`
	Embodiment    string                 `json:"embodiment" msgpack:"embodiment"`
	EmbodimentID  int                    `json:"embodiment_id" msgpack:"embodiment_id"`
	Version       string                 `json:"version" msgpack:"version"`
	Model         string                 `json:"model" msgpack:"model"`
	Layout        string                 `json:"layout" msgpack:"layout"`
	Images        map[string]ImageReport `json:"images" msgpack:"images"`
	SeqLen        int                    `json:"seq_len" msgpack:"seq_len"`
	PromptTokens  int                    `json:"prompt_tokens" msgpack:"prompt_tokens"`
	StateDtype    string                 `json:"state_dtype" msgpack:"state_dtype"`
	NoiseSource   string                 `json:"noise_source" msgpack:"noise_source"`
	Seed          *uint64                `json:"seed" msgpack:"seed"`
	TimingMS      Timing                 `json:"timing_ms" msgpack:"timing_ms"`
	Plugin        PluginReport           `json:"plugin" msgpack:"plugin"`
	RequestID     string                 `json:"request_id,omitempty" msgpack:"request_id,omitempty"`
	// RTC says what real-time chunking was applied: present when the
	// request asked for it (options or rtc_prev_action); Skipped says why
	// a session's chunk was not used.
	RTC *RTCReport `json:"rtc,omitempty" msgpack:"rtc,omitempty"`
	// Session is the request's session id (sessions.go), "" without one.
	Session string `json:"session,omitempty" msgpack:"session,omitempty"`
	// Safety is the safety gate's report, when the gate is on (policy
	// reject or clamp; service/safety.go).
	Safety *SafetyReport `json:"safety,omitempty" msgpack:"safety,omitempty"`

	// ActionPredNormalized is the model-space chunk as denoised,
	// [model horizon][action_dim] ([40][132] for N1.7 whatever the
	// embodiment), only with return_normalized.
	ActionPredNormalized [][]float64 `json:"action_pred_normalized,omitempty" msgpack:"action_pred_normalized,omitempty"`
	// ActionPredValidHD is the slice the plugin decodes, [action_horizon][Σ
	// action dims] (the embodiment's horizon: [40][17] DROID, [16][7]
	// libero_sim), only with return_normalized.
	ActionPredValidHD [][]float64 `json:"action_pred_valid_hd,omitempty" msgpack:"action_pred_valid_hd,omitempty"`
}

// rows reshapes a row-major float32 buffer into [h][d] float64 rows,
// keeping columns [c0, c1).
func rows(buf []float32, h, d, c0, c1 int) [][]float64 {
	out := make([][]float64, h)
	flat := make([]float64, h*(c1-c0))
	for i := 0; i < h; i++ {
		r := flat[i*(c1-c0) : (i+1)*(c1-c0)]
		for j := c0; j < c1; j++ {
			r[j-c0] = float64(buf[i*d+j])
		}
		out[i] = r
	}
	return out
}

func ms(d interface{ Seconds() float64 }) float64 {
	return round3(d.Seconds() * 1e3)
}

func round3(x float64) float64 {
	const k = 1000
	if x < 0 {
		return -float64(int64(-x*k+0.5)) / k
	}
	return float64(int64(x*k+0.5)) / k
}

// RTCReport is the real-time chunking a response applied: the overlap and
// frozen rows, the ramp rate and where the previous chunk came from
// ("request": rtc_prev_action).
type RTCReport struct {
	Horizon  int     `json:"action_horizon" msgpack:"action_horizon"`
	Overlap  int     `json:"overlap" msgpack:"overlap"`
	Frozen   int     `json:"frozen" msgpack:"frozen"`
	RampRate float64 `json:"ramp_rate" msgpack:"ramp_rate"`
	Source   string  `json:"source" msgpack:"source"`
	// LatencyMSEstimate is the session's end-to-end latency estimate the
	// auto rows used (ms; omitted without a session).
	LatencyMSEstimate *float64 `json:"latency_ms_estimate,omitempty" msgpack:"latency_ms_estimate,omitempty"`
	// Skipped, when set, says why RTC was not applied although asked for
	// (overlap, frozen are then 0): "no_chunk" (the session's first
	// predict, or a reset/expired one), or a drop reason of the session's
	// chunk, "embodiment_changed" or "plugin_version_changed" (then Dropped
	// repeats it).
	Skipped string `json:"skipped,omitempty" msgpack:"skipped,omitempty"`
	// Dropped names why the session's chunk was dropped (session.DropReason).
	Dropped string `json:"dropped,omitempty" msgpack:"dropped,omitempty"`
	// Mode is "reencode" when the plugin re-expressed the session's chunk
	// (rtc.mode reencode), Shift its rows executed since it was produced
	// (Horizon is then H − Shift); omitted for upstream's rows.
	Mode  string `json:"mode,omitempty" msgpack:"mode,omitempty"`
	Shift int    `json:"shift,omitempty" msgpack:"shift,omitempty"`
}
