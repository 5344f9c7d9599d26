// Package servicetest is a fake service.Service for the protocol front ends'
// tests: a DROID-shaped and a one-camera contract, and Predict answering
// actions computed from the request (action[g][h][d] = state[g][0] + the
// first pixel of the first camera's last frame / 256 + h + d/100) so that
// tests can tell samples, groups and steps apart without a model.
package servicetest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gr00tgw/gr00tgw/service"
)

// DROIDTag is the DROID contract's tag.
const DROIDTag = "oxe_droid_relative_eef_relative_joint"

func strp(s string) *string { return &s }

// DROID is a DROID-shaped contract (the release modality config).
func DROID() *service.Contract {
	info := service.EmbodimentInfo{
		Name: DROIDTag, ID: 24, Cameras: []string{"exterior_image_1_left", "wrist_image_left"}, VideoDeltaIndices: []int{-15, 0},
		StateGroups:   []service.Group{{Key: "eef_9d", Dim: 9}, {Key: "gripper_position", Dim: 1}, {Key: "joint_position", Dim: 7}},
		ActionGroups:  []service.Group{{Key: "eef_9d", Dim: 9}, {Key: "gripper_position", Dim: 1}, {Key: "joint_position", Dim: 7}},
		ActionHorizon: 40,
	}
	h := make([]int, 40)
	for i := range h {
		h[i] = i
	}
	keys := []string{"eef_9d", "gripper_position", "joint_position"}
	return &service.Contract{Info: info, Default: true, Modality: map[string]service.ModalityConfig{
		"video": {DeltaIndices: []int{-15, 0}, ModalityKeys: info.Cameras},
		"state": {DeltaIndices: []int{0}, ModalityKeys: keys},
		"action": {DeltaIndices: h, ModalityKeys: keys, ActionConfigs: []service.ActionConfig{
			{Rep: "RELATIVE", Type: "EEF", Format: "XYZ_ROT6D", StateKey: strp("eef_9d")},
			{Rep: "ABSOLUTE", Type: "NON_EEF", Format: "DEFAULT", StateKey: strp("gripper_position")},
			{Rep: "RELATIVE", Type: "NON_EEF", Format: "DEFAULT", StateKey: strp("joint_position")},
		}},
		"language": {DeltaIndices: []int{0}, ModalityKeys: []string{service.DefaultLanguageKey}},
	}}
}

// OneCam is a one-camera, one-frame contract tagged one_cam (language key task).
func OneCam() *service.Contract {
	info := service.EmbodimentInfo{Name: "one_cam", ID: 10, Cameras: []string{"front"}, VideoDeltaIndices: []int{0},
		StateGroups: []service.Group{{Key: "joints", Dim: 2}}, ActionGroups: []service.Group{{Key: "joints", Dim: 2}}, ActionHorizon: 4}
	return &service.Contract{Info: info, Modality: map[string]service.ModalityConfig{
		"video": {DeltaIndices: []int{0}, ModalityKeys: []string{"front"}}, "state": {DeltaIndices: []int{0}, ModalityKeys: []string{"joints"}},
		"action": {DeltaIndices: []int{0, 1, 2, 3}, ModalityKeys: []string{"joints"}}, "language": {DeltaIndices: []int{0}, ModalityKeys: []string{"task"}},
	}}
}

// Gateway is the fake service. Set its fields before use.
type Gateway struct {
	// NotReady makes Ready false.
	NotReady atomic.Bool
	// Delay is how long Predict takes (a cancelled context ends it).
	Delay time.Duration
	// Fail, when set, is Predict's error.
	Fail error

	mu sync.Mutex
	// Reqs are the requests Predict received.
	Reqs []*service.Request
	// Messages are the ended messages as "endpoint:code".
	Messages []string
	// Inflight, Peak and Canceled count Predict calls running, the most
	// at once, and those ended by their context.
	Inflight, Peak, Canceled atomic.Int32
	// Resets are the session ids ResetSession received (valid ones;
	// read them with ResetsCopy while a server runs).
	Resets []string
}

// ResetsCopy returns a copy of Resets.
func (f *Gateway) ResetsCopy() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.Resets...)
}

// ResetSession implements service.Service: it validates id as the
// service does, records it and reports it existed.
func (f *Gateway) ResetSession(id, field string) (bool, error) {
	if err := service.CheckSessionID(id, field); err != nil {
		return false, err
	}
	f.mu.Lock()
	f.Resets = append(f.Resets, id)
	f.mu.Unlock()
	return true, nil
}

// Requests returns a copy of the requests received.
func (f *Gateway) Requests() []*service.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*service.Request(nil), f.Reqs...)
}

// Ready implements service.Service.
func (f *Gateway) Ready() bool { return !f.NotReady.Load() }

// Contract implements service.Service: "" and DROIDTag, one_cam.
func (f *Gateway) Contract(tag string) (*service.Contract, error) {
	switch tag {
	case "", DROIDTag:
		return DROID(), nil
	case "one_cam":
		return OneCam(), nil
	}
	return nil, &service.HandlerError{Status: http.StatusBadRequest, Code: service.CodeInvalid, Field: "embodiment",
		Err: fmt.Errorf("embodiment: %q is not served (served: [%s, one_cam])", tag, DROIDTag)}
}

// Contracts implements service.Service.
func (f *Gateway) Contracts() []*service.Contract {
	return []*service.Contract{OneCam(), DROID()}
}

// Predict implements service.Service.
func (f *Gateway) Predict(ctx context.Context, r *service.Request, o service.PredictOptions) (*service.PredictResponse, error) {
	n := f.Inflight.Add(1)
	defer f.Inflight.Add(-1)
	for {
		p := f.Peak.Load()
		if n <= p || f.Peak.CompareAndSwap(p, n) {
			break
		}
	}
	f.mu.Lock()
	f.Reqs = append(f.Reqs, r)
	f.mu.Unlock()
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-ctx.Done():
			f.Canceled.Add(1)
			return nil, ctx.Err()
		}
	}
	if f.Fail != nil {
		return nil, f.Fail
	}
	c, err := f.Contract(r.Embodiment)
	if err != nil {
		return nil, err
	}
	cam := c.Info.Cameras[0]
	frames := r.Images[cam]
	px := float64(frames[len(frames)-1].Raw.Pix[0]) / 256
	resp := &service.PredictResponse{Actions: map[string][][]float64{}, ActionHorizon: c.Info.ActionHorizon, RequestID: o.RequestID}
	for _, g := range c.Info.ActionGroups {
		rows := make([][]float64, c.Info.ActionHorizon)
		for h := range rows {
			rows[h] = make([]float64, g.Dim)
			for d := range rows[h] {
				rows[h][d] = float64(float32(r.State[g.Key][0] + px + float64(h) + float64(d)/100))
			}
		}
		resp.Actions[g.Key] = rows
		resp.ActionKeys = append(resp.ActionKeys, g.Key)
	}
	return resp, nil
}

// StartMessage implements service.Service.
func (f *Gateway) StartMessage(ctx context.Context, m service.Message) (context.Context, service.EndMessage) {
	return ctx, func(code string, err error) {
		f.mu.Lock()
		f.Messages = append(f.Messages, m.Endpoint+":"+code)
		f.mu.Unlock()
	}
}

var _ service.Service = (*Gateway)(nil)
