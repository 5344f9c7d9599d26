// Package rawobs turns a /predict JSON body (base64 PNG/JPEG frames, state
// groups, instruction, seed) into the raw observation the robot protocols
// carry: uint8 RGB frames, float state, text. The frames are decoded with
// core/image, the decoder the gateway itself uses, so sending the result
// as raw uint8 arrays over ZeroMQ or openpi gives the server the very
// pixels it would decode from the PNGs (the clients' tests, smoke and
// bench use it on the demo observations).
package rawobs

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gr00tgw/gr00tgw/core/b64"
	"github.com/gr00tgw/gr00tgw/core/image"
)

// Frame is one RGB frame: Pix is row-major [Height, Width, 3].
type Frame struct {
	Pix           []byte
	Height, Width int
}

// Observation is one decoded /predict body.
type Observation struct {
	// Frames maps camera → frames, oldest first.
	Frames map[string][]Frame
	// State maps group → values (one time step).
	State map[string][]float64
	// Instruction is the task text (instruction, language or prompt).
	Instruction string
	// Embodiment is the body's embodiment field ("" when absent).
	Embodiment string
	// Seed is the body's seed, when it has one.
	Seed *uint64
	// HasNoise reports whether the body carried explicit noise (the robot
	// protocols cannot carry it: compare against a seeded /predict).
	HasNoise bool
}

// Cameras returns the camera keys, sorted.
func (o *Observation) Cameras() []string {
	return slices.Sorted(maps.Keys(o.Frames))
}

// FromPredictJSON decodes a /predict JSON body.
func FromPredictJSON(body []byte) (*Observation, error) {
	var req struct {
		Images      map[string][]string  `json:"images"`
		State       map[string][]float64 `json:"state"`
		Instruction *string              `json:"instruction"`
		Language    *string              `json:"language"`
		Prompt      *string              `json:"prompt"`
		Embodiment  string               `json:"embodiment"`
		Seed        *uint64              `json:"seed"`
		Noise       json.RawMessage      `json:"noise"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("rawobs: /predict body: %w", err)
	}
	o := &Observation{Frames: map[string][]Frame{}, State: req.State, Embodiment: req.Embodiment, Seed: req.Seed,
		HasNoise: len(req.Noise) > 0 && string(req.Noise) != "null"}
	for _, s := range []*string{req.Instruction, req.Language, req.Prompt} {
		if s != nil {
			o.Instruction = *s
		}
	}
	for cam, list := range req.Images {
		for i, s := range list {
			if j := strings.IndexByte(s, ','); strings.HasPrefix(s, "data:") && j >= 0 {
				s = s[j+1:]
			}
			buf := make([]byte, b64.DecodedLen(len(s)))
			n, err := b64.DecodeString(buf, s)
			if err != nil {
				return nil, fmt.Errorf("rawobs: images.%s[%d]: %w", cam, i, err)
			}
			var rgb image.RGB
			if err := image.Decode(&rgb, buf[:n], image.DefaultLimits); err != nil {
				return nil, fmt.Errorf("rawobs: images.%s[%d]: %w", cam, i, err)
			}
			o.Frames[cam] = append(o.Frames[cam], Frame{Pix: rgb.Pix, Height: rgb.H, Width: rgb.W})
		}
	}
	return o, nil
}

// Stack concatenates a camera's frames into one [T, H, W, 3] buffer and
// returns it with its shape; every frame must have the same size.
func Stack(frames []Frame) ([]byte, []int, error) {
	if len(frames) == 0 {
		return nil, nil, fmt.Errorf("rawobs: no frames")
	}
	h, w := frames[0].Height, frames[0].Width
	out := make([]byte, 0, len(frames)*h*w*3)
	for i, f := range frames {
		if f.Height != h || f.Width != w || len(f.Pix) != h*w*3 {
			return nil, nil, fmt.Errorf("rawobs: frame %d is %dx%d, frame 0 %dx%d", i, f.Width, f.Height, w, h)
		}
		out = append(out, f.Pix...)
	}
	return out, []int{len(frames), h, w, 3}, nil
}
