package gateway

import (
	"context"
	"errors"
	"fmt"
	"github.com/gr00tgw/gr00tgw/device"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// device label for /health.
func (s *Server) deviceLabel() string {
	if s.opts.Device != "" {
		return s.opts.Device
	}
	return s.cfg.Backend + ":0"
}

// health is GET /health: always 200; status "ok" only after warm-up
// ("starting" before, "draining" during shutdown, "failed" after a failed
// start).
func (s *Server) health(c *fiber.Ctx) error {
	st := s.state.Load()
	status := stateName(st)
	if st == stateReady {
		status = "ok"
	}
	return c.JSON(fiber.Map{"status": status, "model": s.cfg.ModelName, "device": s.deviceLabel()})
}

// live is GET /v2/health/live (OIP): 200 while the process serves HTTP.
func (s *Server) live(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"live": true})
}

// ready is GET /v2/health/ready (OIP): 200 only after load and warm-up,
// 503 otherwise.
func (s *Server) ready(c *fiber.Ctx) error {
	st := s.state.Load()
	if st != stateReady {
		c.Status(http.StatusServiceUnavailable)
		if st != stateFailed {
			c.Set(fiber.HeaderRetryAfter, "5")
		}
	}
	return c.JSON(fiber.Map{"ready": st == stateReady, "state": stateName(st)})
}

// models is GET /v1/models: an OpenAI-shaped stub so tools probing for it
// do not 404. This is not a chat API.
func (s *Server) models(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"object": "list", "data": []fiber.Map{{
		"id": "nvidia/GR00T-N1.7-3B", "object": "model", "created": 0, "owned_by": "nvidia",
		"served_as": s.cfg.ModelName,
	}}})
}

// modelName reports whether name addresses the served model: its
// model_name, the checkpoint repo id, or the embodiment tag.
func (s *Server) modelName(name string, deps *Deps) bool {
	return name == s.cfg.ModelName || name == "nvidia/GR00T-N1.7-3B" || name == "GR00T-N1.7-3B" ||
		(deps != nil && name == deps.Embodiment.Describe().Name)
}

// modelMetadata is GET /v2/models/{model} (OIP-style metadata): name,
// version, platform, inputs and outputs built from the embodiment.
func (s *Server) modelMetadata(c *fiber.Ctx) error {
	deps := s.deps.Load()
	if deps == nil {
		return notReady(s.state.Load())
	}
	if !s.modelName(c.Params("model"), deps) {
		return &HandlerError{Status: http.StatusNotFound, Code: CodeNotFound, Field: "model", Err: fmt.Errorf("unknown model %q (serving %q)", c.Params("model"), s.cfg.ModelName)}
	}
	info := deps.Embodiment.Describe()
	type tensor struct {
		Name     string `json:"name"`
		Datatype string `json:"datatype"`
		Shape    []int  `json:"shape"`
	}
	var inputs, outputs []tensor
	for _, cam := range info.Cameras {
		inputs = append(inputs, tensor{"images." + cam, "BYTES", []int{len(info.VideoDeltaIndices)}})
	}
	for _, g := range info.StateGroups {
		inputs = append(inputs, tensor{"state." + g.Key, "FP32", []int{g.Dim}})
	}
	inputs = append(inputs, tensor{"instruction", "BYTES", []int{1}})
	for _, g := range info.ActionGroups {
		outputs = append(outputs, tensor{"actions." + g.Key, "FP32", []int{info.ActionHorizon, g.Dim}})
	}
	return c.JSON(fiber.Map{
		"name": s.cfg.ModelName, "versions": []string{deps.Model.Version}, "platform": "gr00tgw-" + deps.Backend.Facts().Backend,
		"inputs": inputs, "outputs": outputs,
		"parameters": fiber.Map{"embodiment": info.Name, "embodiment_id": info.ID, "plugin": PluginReport{info.Plugin, info.PluginVersion}},
	})
}

// modelReady is GET /v2/models/{model}/ready: 200 when ready, else 503.
func (s *Server) modelReady(c *fiber.Ctx) error {
	deps := s.deps.Load()
	if deps != nil && !s.modelName(c.Params("model"), deps) {
		return &HandlerError{Status: http.StatusNotFound, Code: CodeNotFound, Field: "model", Err: fmt.Errorf("unknown model %q", c.Params("model"))}
	}
	return s.ready(c)
}

// demo is GET /demo: the demo request body and its golden.
func (s *Server) demo(c *fiber.Ctx) error {
	deps := s.deps.Load()
	if deps == nil {
		return notReady(s.state.Load())
	}
	if deps.Demo == nil {
		return &HandlerError{Status: http.StatusNotFound, Code: CodeNotFound, Err: errors.New("no demo observation loaded (demo_dir)")}
	}
	return c.JSON(fiber.Map{
		"request": deps.Demo.Request,
		"expected": fiber.Map{
			"actions": deps.Demo.Golden,
			"gates":   fiber.Map{"actions_pcc_min": s.cfg.WarmupPCCMin},
			"note":    "send request as-is to POST /predict; actions should match expected.actions at PCC >= actions_pcc_min",
		},
	})
}

// info is GET /info: what is served, by whom, with which limits.
func (s *Server) info(c *fiber.Ctx) error {
	deps := s.deps.Load()
	if deps == nil {
		return notReady(s.state.Load())
	}
	return c.JSON(s.infoMap(deps))
}

func (s *Server) infoMap(deps *Deps) map[string]any {
	info := deps.Embodiment.Describe()
	facts := deps.Backend.Facts()
	keys := make([]string, len(info.ActionGroups))
	dims := map[string]int{}
	for i, g := range info.ActionGroups {
		keys[i], dims[g.Key] = g.Key, g.Dim
	}
	s.warmMu.Lock()
	warm := s.warm
	s.warmMu.Unlock()
	m := map[string]any{
		"model":   s.cfg.ModelName,
		"version": deps.Model.Version,
		"layout":  deps.Model.Layout,
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
			"instruction_chars":   []int{1, MaxInstructionChars},
			"instruction_aliases": instructionAliases,
			"L_max":               deps.Model.MaxTextTokens,
			"content_types":       []string{fiber.MIMEApplicationJSON, MIMEMsgpack},
		},
		"outputs": map[string]any{
			"action_groups": info.ActionGroups,
			"composition":   fmt.Sprintf("physical actions decoded by plugin %s %s", info.Plugin, info.PluginVersion),
		},
		"noise":      map[string]any{"default_seed": deps.Model.DefaultSeed, "shape": []int{deps.Model.chunkHorizon(&info), deps.Model.ActionDim}},
		"embodiment": info,
		"plugins":    []PluginReport{{Name: info.Plugin, Version: info.PluginVersion}},
		"limits": map[string]any{
			"batch": 1, "max_body_bytes": s.cfg.MaxBodyBytes, "queue_depth": s.cfg.QueueDepth,
			"request_timeout_s": s.cfg.RequestTimeout.Seconds(),
		},
		"device_facts":              facts.Extra,
		"warmup_latency_ms":         warm.LatencyMS,
		"warmup_fidelity_vs_golden": warm.Fidelity,
		"license":                   "weights: NVIDIA License (non-commercial), see the checkpoint's LICENSE",
	}
	for k, v := range deps.Model.Extra {
		m[k] = v
	}
	return m
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

// adminReload is POST /admin/reload, for bearers of the admin token. The
// route answers 404 when no token is configured.
func (s *Server) adminReload(c *fiber.Ctx) error {
	if s.cfg.AdminToken == "" {
		return &HandlerError{Status: http.StatusNotFound, Code: CodeNotFound, Err: errors.New("admin API disabled (no admin_token configured)")}
	}
	auth := c.Get(fiber.HeaderAuthorization)
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || !constantTimeEqual(strings.TrimSpace(tok), s.cfg.AdminToken) {
		return &HandlerError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Err: errors.New("missing or wrong bearer token")}
	}
	deps := s.deps.Load()
	if deps == nil {
		return notReady(s.state.Load())
	}
	if deps.Reloader == nil {
		return &HandlerError{Status: http.StatusNotImplemented, Code: CodeUnsupported, Err: errors.New("reload not supported by the loaded plugins")}
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.RequestTimeout)
	defer cancel()
	if err := s.Reload(ctx); err != nil {
		return &HandlerError{Status: http.StatusInternalServerError, Code: CodeReloadFailed, Err: err}
	}
	info := deps.Embodiment.Describe()
	return c.JSON(fiber.Map{"status": "reloaded", "plugin": PluginReport{Name: info.Plugin, Version: info.PluginVersion}, "embodiment": info.Name})
}

// warmup runs cfg.WarmupRuns predictions of the demo observation through
// the full request path and checks each against the golden.
func (s *Server) warmup(ctx context.Context, deps *Deps) error {
	n := s.cfg.WarmupRuns
	if n == 0 {
		s.log.Warn("warm-up disabled (warmup_runs 0): serving without a fidelity check")
		return nil
	}
	if deps.Demo == nil {
		return fmt.Errorf("warm-up: warmup_runs %d needs a demo observation (set demo_dir)", n)
	}
	req, err := decodeJSON(deps.Demo.Request)
	if err != nil {
		return fmt.Errorf("warm-up: demo request %s: %w", deps.Demo.Source, err)
	}
	info := deps.Embodiment.Describe()
	s.log.Info(fmt.Sprintf("Warming up: %d prediction(s) on the demo observation", n), "demo", deps.Demo.Source)
	rep := warmupReport{Runs: n, MinPCC: math.Inf(1)}
	for i := 1; i <= n; i++ {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout*10)
		resp, err := s.runPredict(rctx, deps, req, fmt.Sprintf("warmup-%d", i), start)
		cancel()
		if err != nil {
			return fmt.Errorf("warm-up %d/%d: %w", i, n, err)
		}
		d := time.Since(start)
		rep.LatencyMS = append(rep.LatencyMS, ms(d))
		cmp, err := compareActions(info.ActionGroups, resp.Actions, deps.Demo.Golden)
		if err != nil {
			return fmt.Errorf("warm-up %d/%d: actions vs golden: %w", i, n, err)
		}
		s.log.Info(fmt.Sprintf("Warmup %d/%d: %.1f ms", i, n, float64(d.Microseconds())/1e3), "pcc", cmp.PCC, "max_abs_diff", cmp.MaxAbs)
		if math.IsNaN(cmp.PCC) || cmp.PCC < s.cfg.WarmupPCCMin {
			return fmt.Errorf("warm-up %d/%d: fidelity vs golden: actions PCC %.6f < warmup_pcc_min %.6f (max|d| %.4g)", i, n, cmp.PCC, s.cfg.WarmupPCCMin, cmp.MaxAbs)
		}
		if cmp.PCC < rep.MinPCC {
			rep.MinPCC = cmp.PCC
			c := cmp
			rep.Fidelity = &c
		}
	}
	s.inst.warmupPCC.Record(ctx, rep.MinPCC)
	s.warmMu.Lock()
	s.warm = rep
	s.warmMu.Unlock()
	s.log.Info(fmt.Sprintf("Warm-up fidelity vs golden: actions PCC %.6f", rep.MinPCC), "max_abs_diff", rep.Fidelity.MaxAbs)
	s.log.Info("Warmup complete", "runs", n, "latency_ms", rep.LatencyMS)
	return nil
}
