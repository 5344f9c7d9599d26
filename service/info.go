package service

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/device"
)

// device label for /health.
func (s *Core) deviceLabel() string {
	if s.opts.Device != "" {
		return s.opts.Device
	}
	return s.cfg.Backend + ":0"
}

// Health is GET /health's body: status "ok" only after warm-up
// ("starting" before, "draining" during shutdown, "failed" after a failed
// start; a supervised device that restarts or gave up reports its state
// and the reason), with the model and the device.
func (s *Core) Health() map[string]any {
	st := s.state.Load()
	status := st.String()
	m := map[string]any{"model": s.cfg.ModelName, "device": s.deviceLabel()}
	if st == StateReady {
		status = "ok"
		if ds, reason := s.deviceState(); ds != "" {
			// A supervised device is restarting (or gave up): not ready.
			status, m["reason"] = ds, reason
		}
	}
	m["status"] = status
	return m
}

// Readiness is GET /v2/health/ready's answer: ready only after load and
// warm-up with a serving device; state names why not (starting,
// draining, failed, or the device's state) and m is the body.
func (s *Core) Readiness() (ready bool, state string, m map[string]any) {
	st := s.state.Load()
	name := st.String()
	m = map[string]any{}
	if st == StateReady {
		if ds, reason := s.deviceState(); ds != "" {
			name, m["reason"] = ds, reason
		}
	}
	ready = name == "ready"
	m["ready"], m["state"] = ready, name
	return ready, name, m
}

// Models is GET /v1/models' body: OpenAI-shaped, so tools probing for it do not
// 404 (this is not a chat API). The first entry is the model, as the
// reference server lists it; one entry per served embodiment follows.
func (s *Core) Models() map[string]any {
	data := []map[string]any{{
		"id": "nvidia/GR00T-N1.7-3B", "object": "model", "created": 0, "owned_by": "nvidia",
		"served_as": s.cfg.ModelName,
	}}
	if set := s.set.Load(); set != nil {
		for _, tag := range set.tags {
			e := set.entries[tag]
			data = append(data, map[string]any{
				"id": tag, "object": "model", "created": e.since.Unix(), "owned_by": "gr00tgw",
				"served_as": s.cfg.ModelName, "embodiment": tag, "embodiment_id": e.info.ID,
				"plugin": PluginReport{Name: e.info.Plugin, Version: e.info.PluginVersion}, "default": tag == s.cfg.Embodiment,
			})
		}
	}
	return map[string]any{"object": "list", "data": data}
}

// modelTag resolves a /v2/models/{model} name: the model's own names
// address the default embodiment, any other name is an embodiment tag.
// The name is path-unescaped first: the slash of nvidia/GR00T-N1.7-3B (the
// id /v1/models lists) reaches a route as %2F (tritonclient quotes it).
func (s *Core) modelTag(name string) string {
	if u, err := url.PathUnescape(name); err == nil {
		name = u
	}
	if name == s.cfg.ModelName || name == "nvidia/GR00T-N1.7-3B" || name == "GR00T-N1.7-3B" {
		return s.cfg.Embodiment
	}
	return name
}

// modelEntry is the served entry /v2/models/{model} addresses (no
// reference taken: metadata only), or the answer for a name that is none.
func (s *Core) modelEntry(name string) (*entry, error) {
	set := s.set.Load()
	if set == nil {
		return nil, notReady(s.state.Load())
	}
	tag := s.modelTag(name)
	if e, ok := set.entries[tag]; ok {
		return e, nil
	}
	if set.starting[tag] {
		return nil, &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeStarting, RetryAfter: 1, Field: "model",
			Err: fmt.Errorf("embodiment %q is starting", tag)}
	}
	return nil, &HandlerError{Status: http.StatusNotFound, Code: CodeNotFound, Field: "model",
		Err: fmt.Errorf("unknown model %q (model %q; embodiments: [%s])", name, s.cfg.ModelName, strings.Join(set.tags, ", "))}
}

// ModelMetadata is GET /v2/models/{model}'s body (OIP-style metadata): name,
// version, platform, inputs and outputs of one embodiment ({model} is a
// tag, or the model's name for the default embodiment). The inputs are
// what /v2/models/{model}/infer accepts (frontend/oip). OIP metadata has
// one datatype and shape per tensor ({name, datatype, shape}, -1 for a
// variable dimension), so each input lists its primary form and, in the
// tensor's "parameters" (an extension, as MLServer's metadata tensors
// have), the others: images.<camera> UINT8 [T, -1, -1, 3] (RGB frames,
// any size, oldest first) or BYTES [T] (PNG/JPEG); seed INT64 [1] (or
// UINT64) and noise FP32 [horizon, D] (or [1, horizon, D]) are optional
// and exclusive.
func (s *Core) ModelMetadata(model string) (map[string]any, error) {
	deps := s.deps.Load()
	if deps == nil {
		return nil, notReady(s.state.Load())
	}
	e, err := s.modelEntry(model)
	if err != nil {
		return nil, err
	}
	info := e.info
	type tensor struct {
		Name       string         `json:"name"`
		Datatype   string         `json:"datatype"`
		Shape      []int          `json:"shape"`
		Parameters map[string]any `json:"parameters,omitempty"`
	}
	var inputs, outputs []tensor
	t := len(info.VideoDeltaIndices)
	for _, cam := range info.Cameras {
		inputs = append(inputs, tensor{"images." + cam, "UINT8", []int{t, -1, -1, 3}, map[string]any{
			"content":   "RGB frames, oldest first, any height and width",
			"also":      []map[string]any{{"datatype": "BYTES", "shape": []int{t}, "content": "PNG or JPEG frames, oldest first"}},
			"datatypes": []string{"UINT8", "BYTES"},
		}})
	}
	for _, g := range info.StateGroups {
		inputs = append(inputs, tensor{"state." + g.Key, "FP32", []int{g.Dim}, nil})
	}
	inputs = append(inputs, tensor{"instruction", "BYTES", []int{1}, nil})
	inputs = append(inputs,
		tensor{"seed", "INT64", []int{1}, map[string]any{"optional": true, "exclusive_with": "noise",
			"datatypes": []string{"INT64", "UINT64"}, "default": deps.Model.DefaultSeed}},
		tensor{"noise", "FP32", []int{deps.Model.ChunkHorizon(&info), deps.Model.ActionDim}, map[string]any{"optional": true,
			"exclusive_with": "seed", "content": "the initial flow-matching noise of the model's chunk; [1, horizon, D] is accepted too"}})
	for _, g := range info.ActionGroups {
		outputs = append(outputs, tensor{"actions." + g.Key, "FP32", []int{info.ActionHorizon, g.Dim}, nil})
	}
	name := s.cfg.ModelName
	if model == info.Name {
		name = info.Name
	}
	return map[string]any{
		"name": name, "versions": []string{deps.Model.Version}, "platform": "gr00tgw-" + deps.Backend.Facts().Backend,
		"inputs": inputs, "outputs": outputs,
		"parameters": map[string]any{"embodiment": info.Name, "embodiment_id": info.ID, "plugin": PluginReport{info.Plugin, info.PluginVersion},
			"sha256": e.b.SHA256, "layout": e.b.Layout, "optional_inputs": []string{"seed", "noise"}},
	}, nil
}

// ModelReady is GET /v2/models/{model}/ready's answer for a ready
// server: the embodiment the name addresses, or 503 while it starts, 404
// for a name that is neither the model nor a served tag.
func (s *Core) ModelReady(model string) (map[string]any, error) {
	e, err := s.modelEntry(model)
	if err != nil {
		return nil, err
	}
	return map[string]any{"ready": true, "state": "ready", "embodiment": e.tag}, nil
}

// Demo is GET /demo[?embodiment=TAG]'s body: the demo request body and its golden
// of one embodiment (the default without the parameter). For a named
// embodiment the request carries its embodiment field. While the server
// starts it answers 503 starting, as /predict does, until the default
// embodiment's warm-up and the device gate passed: a client that waits for
// /demo (gr00tgw smoke --wait) can then predict.
func (s *Core) Demo(tag string) (map[string]any, error) {
	if st := s.state.Load(); s.deps.Load() == nil || st == StateStarting {
		return nil, notReady(st)
	}
	e, err := s.lookup(tag)
	if err != nil {
		return nil, err
	}
	defer e.release()
	d := e.b.Demo
	if d == nil {
		return nil, &HandlerError{Status: http.StatusNotFound, Code: CodeNotFound, Field: fieldEmbodiment,
			Err: fmt.Errorf("embodiment %s has no demo observation", e.tag)}
	}
	req := d.Request
	if tag != "" {
		var err error
		if req, err = withEmbodiment(req, e.tag); err != nil {
			return nil, fmt.Errorf("demo %s: %w", d.Source, err)
		}
	}
	expected := map[string]any{
		"gates": map[string]any{"actions_pcc_min": s.cfg.WarmupPCCMin},
		"note":  "send request as-is to POST /predict; actions should match expected.actions at PCC >= actions_pcc_min",
	}
	if d.Golden != nil {
		expected["actions"] = d.Golden
	} else {
		expected["note"] = "no golden for this checkpoint: the warm-up checked finiteness and repeat determinism only"
	}
	return map[string]any{"embodiment": e.tag, "request": req, "expected": expected}, nil
}

// withEmbodiment sets the embodiment member of a JSON request object.
func withEmbodiment(req json.RawMessage, tag string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(req, &m); err != nil {
		return nil, err
	}
	t, _ := json.Marshal(tag)
	m[fieldEmbodiment] = t
	return json.Marshal(m)
}

// Info is GET /info's body: what is served, by whom, with which limits. The
// top-level fields describe the default embodiment (as the reference
// server's single one); "embodiments" lists every served or refused one.
func (s *Core) Info() (map[string]any, error) {
	deps := s.deps.Load()
	e := s.defaultEntry()
	if deps == nil || e == nil {
		return nil, notReady(s.state.Load())
	}
	return s.infoMap(deps, e), nil
}

// DemoInfo is where an embodiment's demo came from and what its golden is.
type DemoInfo struct {
	Source string `json:"source"`
	Golden bool   `json:"golden"`
	Note   string `json:"note,omitempty"`
}

// EmbodimentStatus is one element of /info's "embodiments".
type EmbodimentStatus struct {
	EmbodimentInfo
	Status    string        `json:"status"` // "ok", "starting", or why it is not served
	Default   bool          `json:"default"`
	SHA256    string        `json:"sha256,omitempty"`
	Revision  string        `json:"revision,omitempty"`
	Source    string        `json:"source,omitempty"`
	Layout    *Layout       `json:"layout,omitempty"`
	Warmup    *WarmupReport `json:"warmup,omitempty"`
	Since     *time.Time    `json:"since,omitempty"`
	Demo      *DemoInfo     `json:"demo,omitempty"`
	LastError *Refusal      `json:"last_refusal,omitempty"` // a newer revision refused while this one serves
}

// Embodiments lists every embodiment the service knows (served,
// starting or refused), sorted by tag, with its status (/info's
// "embodiments").
func (s *Core) Embodiments() []EmbodimentStatus {
	set := s.set.Load()
	if set == nil {
		return nil
	}
	var out []EmbodimentStatus
	for _, tag := range sortedKeys(unionKeys(set)) {
		ei := EmbodimentStatus{Default: tag == s.cfg.Embodiment}
		ei.Name = tag
		if e, ok := set.entries[tag]; ok {
			ei.EmbodimentInfo = e.info
			ei.Status, ei.SHA256, ei.Revision, ei.Source = "ok", e.b.SHA256, e.revision, e.source
			ei.Layout = &e.b.Layout
			w := e.warm
			ei.Warmup = &w
			since := e.since
			ei.Since = &since
			if d := e.b.Demo; d != nil {
				ei.Demo = &DemoInfo{Source: d.Source, Golden: d.Golden != nil, Note: d.Note}
			}
			if r, ok := set.refused[tag]; ok {
				ei.LastError = &r
			}
		} else if r, ok := set.refused[tag]; ok {
			ei.Status, ei.Revision, ei.Source = r.Reason, r.Revision, r.Source
		} else if set.starting[tag] {
			ei.Status = "starting"
		}
		out = append(out, ei)
	}
	return out
}

func unionKeys(set *servedSet) map[string]bool {
	m := map[string]bool{}
	for k := range set.entries {
		m[k] = true
	}
	for k := range set.refused {
		m[k] = true
	}
	for k := range set.starting {
		m[k] = true
	}
	return m
}

func (s *Core) infoMap(deps *Deps, e *entry) map[string]any {
	info := e.info
	facts := deps.Backend.Facts()
	keys := make([]string, len(info.ActionGroups))
	dims := map[string]int{}
	for i, g := range info.ActionGroups {
		keys[i], dims[g.Key] = g.Key, g.Dim
	}
	warm := e.warm
	list := s.Embodiments()
	var plugins []PluginReport
	for _, x := range list {
		if x.Status == "ok" {
			plugins = append(plugins, PluginReport{Name: x.Plugin, Version: x.PluginVersion})
		}
	}
	m := map[string]any{
		"model":   s.cfg.ModelName,
		"version": deps.Model.Version,
		"layout":  e.b.Layout.Name,
		"task":    map[string]any{"action_horizon": info.ActionHorizon, "action_keys": keys, "action_dims": dims},
		"hardware": map[string]any{
			"device": s.deviceLabel(), "backend": facts.Backend,
		},
		"stage":  stageBlock(facts),
		"policy": map[string]any{"dtype_policy": facts.Policy, "threads": s.cfg.Threads},
		"weights": map[string]any{
			"dir": s.cfg.WeightsDir, "repo": deps.Model.Repo, "revision": deps.Model.Revision,
		},
		"source": map[string]any{"server": "gr00tgw", "server_version": s.opts.Version},
		"inputs": map[string]any{
			"cameras":             info.Cameras,
			"video_delta_indices": info.VideoDeltaIndices,
			"frame_order":         "per camera, oldest first",
			"state_groups":        info.StateGroups,
			"state_dtype":         []string{"float32", "float64"},
			"instruction_chars":   instructionRange(&info),
			"instruction_aliases": instructionAliases,
			"L_max":               e.b.Layout.MaxTextTokens,
			"content_types":       []string{"application/json", MIMEMsgpack},
			"embodiment_routing":  []string{"body field embodiment", "header " + EmbodimentHeader, "default " + s.cfg.Embodiment},
		},
		"outputs": map[string]any{
			"action_groups": info.ActionGroups,
			"composition":   fmt.Sprintf("physical actions decoded by plugin %s %s", info.Plugin, info.PluginVersion),
		},
		"noise":       map[string]any{"default_seed": deps.Model.DefaultSeed, "shape": []int{deps.Model.ChunkHorizon(&info), deps.Model.ActionDim}},
		"embodiment":  info,
		"embodiments": list,
		"plugins":     plugins,
		"limits": map[string]any{
			"batch": 1, "max_body_bytes": s.cfg.MaxBodyBytes, "queue_depth": s.cfg.QueueDepth,
			"request_timeout_s": s.cfg.RequestTimeout.Seconds(),
		},
		"device_facts":              facts.Extra,
		"runner":                    s.runnerInfo(),
		"warmup_latency_ms":         warm.LatencyMS,
		"warmup_fidelity_vs_golden": warm.Fidelity,
		"license":                   "weights: NVIDIA License (non-commercial), see the checkpoint's LICENSE",
	}
	for k, v := range deps.Model.Extra {
		m[k] = v
	}
	return m
}

func instructionRange(info *EmbodimentInfo) []int {
	lo, hi := info.instructionChars()
	return []int{lo, hi}
}

// stageBlock is /info's "stage": what the backend serves, its stages, and —
// when the backend reports one under Extra["stage"] (the mixed_dit policy's
// arena and core map, as the reference's megakernel block) — every key of
// that block.
func stageBlock(facts device.Facts) map[string]any {
	st := map[string]any{"served": "gr00tgw-" + facts.Backend, "stages": facts.Stages, "policy": facts.Policy}
	if extra, ok := facts.Extra["stage"].(map[string]any); ok {
		for k, v := range extra {
			st[k] = v
		}
	}
	return st
}

// Served lists the served embodiments' tags, sorted.
func (s *Core) Served() []string {
	if set := s.set.Load(); set != nil {
		return set.tags
	}
	return nil
}
