package service

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/gr00tgw/gr00tgw/core/b64"
)

// Checking a schema-valid Request against the served embodiment and model:
// the cheap 400s that need no pixels, before the pipeline's decode.

// validated is a request checked against the served embodiment and model.
type validated struct {
	req   *Request
	cams  []CameraFrames // embodiment order, base64 decoded later
	state map[string][]float64
}

// validate checks the request against the served embodiment and model: the
// cheap 400s that need no pixels (cameras and frame counts, state groups
// and widths and finiteness, instruction length, embodiment, seed xor
// noise, noise shape, state dtype). It rounds state to state_dtype.
func validate(r *Request, info *EmbodimentInfo, model *ModelInfo) (*validated, error) {
	if err := validateFields(r, info, model); err != nil {
		return nil, err
	}
	v := &validated{req: r, cams: make([]CameraFrames, 0, len(info.Cameras))}
	if err := v.cameras(info); err != nil {
		return nil, err
	}
	if err := v.roundState(info); err != nil {
		return nil, err
	}
	return v, nil
}

// validateFields checks the instruction's length, the embodiment, seed
// xor noise and the noise's shape, real-time chunking and state_dtype.
func validateFields(r *Request, info *EmbodimentInfo, model *ModelInfo) error {
	n := utf8.RuneCountInString(r.Instruction)
	if strings.TrimSpace(r.Instruction) == "" {
		return invalid(r.InstructionField, "%s: empty", r.InstructionField)
	}
	lo, hi := info.instructionChars()
	if n < lo {
		return invalid(r.InstructionField, "%s: %d characters, at least %d", r.InstructionField, n, lo)
	}
	if n > hi {
		return invalid(r.InstructionField, "%s: %d characters, at most %d", r.InstructionField, n, hi)
	}
	if r.Embodiment != "" && r.Embodiment != info.Name {
		return invalid(fieldEmbodiment, "embodiment: %q is not served (serving %q)", r.Embodiment, info.Name)
	}
	if r.Seed != nil && r.Noise != nil {
		return invalid(fieldSeed, "seed and noise are exclusive: send one")
	}
	if r.Noise != nil {
		// The model denoises its own horizon whatever the embodiment
		// decodes, so noise covers the model's whole chunk.
		h, d := r.NoiseShape[len(r.NoiseShape)-2], r.NoiseShape[len(r.NoiseShape)-1]
		if mh := model.ChunkHorizon(info); h != mh || d != model.ActionDim {
			return invalid(fieldNoise, "noise: shape %v, want [%d, %d] or [1, %d, %d] (the model's denoised chunk)", r.NoiseShape,
				mh, model.ActionDim, mh, model.ActionDim)
		}
	}
	if err := validateRTC(r, info, model); err != nil {
		return err
	}
	if r.StateDtype != "float32" && r.StateDtype != "float64" {
		return invalid(fieldStateDtype, "state_dtype: %q is not float32 or float64", r.StateDtype)
	}
	return nil
}

// cameras checks the cameras: exactly the embodiment's keys, exactly
// len(delta) frames each; it lists them in the embodiment's order.
func (v *validated) cameras(info *EmbodimentInfo) error {
	r := v.req
	want := len(info.VideoDeltaIndices)
	for cam := range r.Images {
		if !contains(info.Cameras, cam) {
			return invalid(fieldImages+"."+cam, "images: unknown camera %q (want %s)", cam, strings.Join(info.Cameras, ", "))
		}
	}
	for _, cam := range info.Cameras {
		frames, ok := r.Images[cam]
		if !ok {
			return invalid(fieldImages+"."+cam, "images: missing camera %q (want %s)", cam, strings.Join(info.Cameras, ", "))
		}
		if want > 0 && len(frames) != want {
			return invalid(fieldImages+"."+cam, "images.%s: %d frames, want exactly %d (delta indices %v, oldest first)", cam, len(frames), want, info.VideoDeltaIndices)
		}
		v.cams = append(v.cams, CameraFrames{Key: cam})
	}
	return nil
}

// roundState checks the state: the embodiment's groups with their widths,
// finite after rounding to state_dtype; it keeps the rounded values.
func (v *validated) roundState(info *EmbodimentInfo) error {
	r := v.req
	state := r.State
	if r.StateList != nil {
		total := 0
		for _, g := range info.StateGroups {
			total += g.Dim
		}
		if len(r.StateList) != total {
			return invalid(fieldState, "state: %d values, want %d (%s)", len(r.StateList), total, groupList(info.StateGroups))
		}
		state = make(map[string][]float64, len(info.StateGroups))
		off := 0
		for _, g := range info.StateGroups {
			state[g.Key] = r.StateList[off : off+g.Dim]
			off += g.Dim
		}
	}
	for g := range state {
		if !containsGroup(info.StateGroups, g) {
			return invalid(fieldState+"."+g, "state: unknown group %q (want %s)", g, groupList(info.StateGroups))
		}
	}
	v.state = make(map[string][]float64, len(state))
	for _, g := range info.StateGroups {
		vals, ok := state[g.Key]
		field := fieldState + "." + g.Key
		if !ok {
			return invalid(field, "state: missing group %q (want %s)", g.Key, groupList(info.StateGroups))
		}
		if len(vals) != g.Dim {
			return invalid(field, "state.%s: %d values, want %d", g.Key, len(vals), g.Dim)
		}
		out := make([]float64, len(vals))
		for i, x := range vals {
			if r.StateDtype == "float32" {
				x = float64(float32(x))
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return invalid(field, "state.%s[%d]: %v is not finite", g.Key, i, vals[i])
			}
			out[i] = x
		}
		v.state[g.Key] = out
	}
	return nil
}

// decodeFrames base64-decodes the validated request's frames in place.
func decodeFrames(v *validated) error {
	for ci := range v.cams {
		c := &v.cams[ci]
		src := v.req.Images[c.Key]
		c.Frames = make([][]byte, len(src))
		for i, f := range src {
			if f.Raw != nil {
				if c.Raw == nil {
					c.Raw = make([]RawFrame, len(src))
				}
				c.Raw[i] = *f.Raw
				continue
			}
			if f.Encoded != nil {
				c.Frames[i] = f.Encoded
				continue
			}
			s := f.B64
			// Tolerate data URLs ("data:image/png;base64,....").
			if strings.HasPrefix(s, "data:") {
				if _, rest, ok := strings.Cut(s, ","); ok {
					s = rest
				}
			}
			buf := make([]byte, b64.DecodedLen(len(s)))
			n, err := b64.DecodeString(buf, s)
			if err != nil {
				return invalid(fmt.Sprintf("images.%s[%d]", c.Key, i), "images.%s[%d]: not valid base64: %v", c.Key, i, err)
			}
			if n == 0 {
				return invalid(fmt.Sprintf("images.%s[%d]", c.Key, i), "images.%s[%d]: empty image", c.Key, i)
			}
			c.Frames[i] = buf[:n]
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsGroup(list []Group, s string) bool {
	for _, g := range list {
		if g.Key == s {
			return true
		}
	}
	return false
}

func groupList(gs []Group) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = fmt.Sprintf("%s[%d]", g.Key, g.Dim)
	}
	return strings.Join(parts, ", ")
}

// validateRTC checks real-time chunking's options and previous chunk
// against the embodiment and the model (../shared/spec/rtc.md §2): every
// option with the previous chunk, integers 0 ≤ rtc_frozen_steps ≤
// rtc_overlap_steps ≤ action_horizon ≤ the chunk's rows and the
// embodiment's horizon, a finite rtc_ramp_rate > 0, a chunk of [rows ≤ the
// model's horizon, action_dim]. Each refusal names the option.
func validateRTC(r *Request, info *EmbodimentInfo, model *ModelInfo) error {
	if r.Options == nil && r.RTCPrev == nil {
		return nil
	}
	if r.Session != "" || r.Options.hasAuto() {
		return nil // resolveRTC (sessions.go) resolves and checks it, after validate
	}
	return checkRTC(r, info, model)
}

// checkRTC is validateRTC's checks of resolved options and a previous chunk.
func checkRTC(r *Request, info *EmbodimentInfo, model *ModelInfo) error {
	if r.Options == nil && r.RTCPrev == nil {
		return nil
	}
	if r.RTCPrev == nil {
		return invalid(fieldRTCPrev, "rtc_prev_action: required with options (the previous chunk, normalised [rows, %d]: "+
			"the previous response's action_pred_normalized with return_normalized), or name a session whose last chunk is used", model.ActionDim)
	}
	if r.Options == nil {
		return invalid(fieldOptions, "options: rtc_prev_action needs %s", strings.Join(rtcOptionKeys, ", "))
	}
	o := r.Options
	for i, missing := range [...]bool{o.Horizon == nil, o.Overlap == nil, o.Frozen == nil, o.RampRate == nil} { // rtcOptionKeys' order
		if missing {
			k := rtcOptionKeys[i]
			return invalid(fieldOptions+"."+k, "options.%s: required with rtc_prev_action", k)
		}
	}
	mh := model.ChunkHorizon(info)
	rows := r.RTCPrevRows
	if rows < 1 || rows > mh || len(r.RTCPrev) != rows*model.ActionDim {
		return invalid(fieldRTCPrev, "rtc_prev_action: shape [%d, %d], want [rows ≤ %d, %d] (the model's normalised chunk)",
			rows, len(r.RTCPrev)/max(rows, 1), mh, model.ActionDim)
	}
	h, ov, fr, rr := *o.Horizon, *o.Overlap, *o.Frozen, *o.RampRate
	upper := rows
	if eh := info.ActionHorizon; eh > 0 && eh < upper {
		upper = eh
	}
	switch {
	case h < 1 || h > upper:
		return invalid(fieldOptions+"."+optHorizon, "options.action_horizon: %d is outside 1..%d (rtc_prev_action's %d rows; the embodiment's horizon %d)",
			h, upper, rows, info.ActionHorizon)
	case ov < 0 || ov > h:
		return invalid(fieldOptions+"."+optOverlap, "options.rtc_overlap_steps: %d is outside 0..action_horizon %d", ov, h)
	case fr < 0 || fr > ov:
		return invalid(fieldOptions+"."+optFrozen, "options.rtc_frozen_steps: %d is outside 0..rtc_overlap_steps %d", fr, ov)
	case math.IsNaN(rr) || math.IsInf(rr, 0) || rr <= 0:
		return invalid(fieldOptions+"."+optRampRate, "options.rtc_ramp_rate: %v is not a finite number > 0", rr)
	}
	return nil
}
