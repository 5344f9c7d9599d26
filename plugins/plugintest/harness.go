package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gr00tgw/gr00tgw/plugins"
)

// Case is one fixture: a JSON file in a cases directory.
//
//	{"name": "caseA pre", "stage": "pre",
//	 "input": {"embodiment": "…", "instruction": "…", "state_dtype": "float32",
//	           "state": {"eef_9d": [9 floats] or [[9 floats]]},
//	           "cameras": {"wrist_image_left": {"frames": 2, "height": 180, "width": 320}}},
//	 "want": {"state": [132 floats], "tolerance": 0}}
//
//	{"name": "caseA post", "stage": "post",
//	 "input": {"action_pred_npy": "action_pred.npy",   // or "action_pred": [[…]…]
//	           "state": {…}},
//	 "want": {"actions": {"eef_9d": [[…]…], …}, "tolerance": 1e-5}}
//
// want may instead hold {"error": {"code": "invalid_state", "field": "state.eef_9d"}}
// (a *plugins.GuestError with that code and field) or
// {"call_error": "timeout" | "trap" | "bad_pointer"}. Paths are relative to
// the cases directory.
type Case struct {
	Name  string    `json:"name"`
	Stage string    `json:"stage"`
	Input CaseInput `json:"input"`
	Want  CaseWant  `json:"want"`
	file  string
}

// CaseInput is the JSON form of plugins.PreInput / plugins.PostInput.
type CaseInput struct {
	Embodiment    string                     `json:"embodiment,omitempty"`
	Instruction   string                     `json:"instruction,omitempty"`
	StateDType    string                     `json:"state_dtype,omitempty"`
	State         map[string]json.RawMessage `json:"state,omitempty"`
	Cameras       map[string]plugins.Camera  `json:"cameras,omitempty"`
	ActionPred    [][]float32                `json:"action_pred,omitempty"`
	ActionPredNPY string                     `json:"action_pred_npy,omitempty"`
}

// CaseWant is the expected outcome.
type CaseWant struct {
	State     []float64              `json:"state,omitempty"`
	Actions   map[string][][]float64 `json:"actions,omitempty"`
	Tolerance float64                `json:"tolerance,omitempty"`
	Error     *struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"error,omitempty"`
	CallError string `json:"call_error,omitempty"`
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	Name    string
	File    string
	Err     error   // nil when the case passed
	MaxDiff float64 // largest |got − want| over compared values
}

// LoadCases reads every *.json case in dir, sorted by file name.
func LoadCases(dir string) ([]*Case, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var cases []*Case
	for _, f := range files {
		switch filepath.Base(f) {
		case "statistics.json", "processor_config.json": // checkpoint side files
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		c := &Case{file: f}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(c); err != nil {
			return nil, fmt.Errorf("plugintest: case %s: %w", filepath.Base(f), err)
		}
		if c.Stage != "pre" && c.Stage != "post" {
			return nil, fmt.Errorf("plugintest: case %s: stage %q, want pre or post", filepath.Base(f), c.Stage)
		}
		if c.Name == "" {
			c.Name = strings.TrimSuffix(filepath.Base(f), ".json")
		}
		cases = append(cases, c)
	}
	return cases, nil
}

func stateGroups(m map[string]json.RawMessage) ([]plugins.StateGroup, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []plugins.StateGroup
	for _, k := range keys {
		var flat []float64
		if err := json.Unmarshal(m[k], &flat); err == nil {
			out = append(out, plugins.StateGroup{Key: k, Values: flat})
			continue
		}
		var rows [][]float64
		if err := json.Unmarshal(m[k], &rows); err != nil {
			return nil, fmt.Errorf("state.%s: want [D] or [[D]…]: %w", k, err)
		}
		g := plugins.StateGroup{Key: k, Steps: len(rows)}
		for _, r := range rows {
			g.Values = append(g.Values, r...)
		}
		out = append(out, g)
	}
	return out, nil
}

// Run executes one case against p.
func (c *Case) Run(ctx context.Context, p *plugins.Plugin) CaseResult {
	res := CaseResult{Name: c.Name, File: filepath.Base(c.file)}
	res.Err = c.run(ctx, p, &res)
	return res
}

func (c *Case) run(ctx context.Context, p *plugins.Plugin, res *CaseResult) error {
	st, err := stateGroups(c.Input.State)
	if err != nil {
		return err
	}
	var callErr error
	var got map[string][]float32
	switch c.Stage {
	case "pre":
		in := &plugins.PreInput{RequestID: c.Name, Embodiment: c.Input.Embodiment, Instruction: c.Input.Instruction, StateDType: c.Input.StateDType, State: st}
		keys := make([]string, 0, len(c.Input.Cameras))
		for k := range c.Input.Cameras {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cam := c.Input.Cameras[k]
			cam.Key = k
			in.Cameras = append(in.Cameras, cam)
		}
		out, err := p.Pre(ctx, in)
		callErr = err
		if err == nil {
			got = map[string][]float32{"state": out.State}
		}
	case "post":
		in := &plugins.PostInput{RequestID: c.Name, Embodiment: c.Input.Embodiment, StateDType: c.Input.StateDType, State: st}
		if c.Input.ActionPredNPY != "" {
			a, err := ReadNPY(filepath.Join(filepath.Dir(c.file), c.Input.ActionPredNPY))
			if err != nil {
				return err
			}
			if len(a.Shape) != 2 {
				return fmt.Errorf("%s: shape %v, want [H, D]", c.Input.ActionPredNPY, a.Shape)
			}
			in.ActionPred, in.Horizon, in.Dim = a.Float32s(), a.Shape[0], a.Shape[1]
		} else {
			in.Horizon = len(c.Input.ActionPred)
			for _, r := range c.Input.ActionPred {
				in.Dim = len(r)
				in.ActionPred = append(in.ActionPred, r...)
			}
		}
		out, err := p.Post(ctx, in)
		callErr = err
		if err == nil {
			got = map[string][]float32{}
			for _, g := range out.Actions {
				got[g.Key] = g.Values
			}
		}
	}
	w := &c.Want
	switch {
	case w.Error != nil:
		var ge *plugins.GuestError
		if !errors.As(callErr, &ge) {
			return fmt.Errorf("want guest error %s at %s, got %v", w.Error.Code, w.Error.Field, callErr)
		}
		if ge.Code != w.Error.Code || ge.Field != w.Error.Field {
			return fmt.Errorf("want guest error %s at %s, got %v", w.Error.Code, w.Error.Field, ge)
		}
		return nil
	case w.CallError != "":
		kinds := map[string]error{"timeout": plugins.ErrTimeout, "trap": plugins.ErrTrap, "bad_pointer": plugins.ErrBadPointer}
		k, ok := kinds[w.CallError]
		if !ok {
			return fmt.Errorf("unknown call_error %q", w.CallError)
		}
		if !errors.Is(callErr, k) {
			return fmt.Errorf("want %v, got %v", k, callErr)
		}
		return nil
	}
	if callErr != nil {
		return callErr
	}
	cmp := func(name string, want []float64, g []float32) error {
		if len(g) != len(want) {
			return fmt.Errorf("%s: %d values, want %d", name, len(g), len(want))
		}
		for i := range want {
			d := math.Abs(float64(g[i]) - want[i])
			if math.IsNaN(d) {
				d = math.Inf(1)
			}
			res.MaxDiff = math.Max(res.MaxDiff, d)
			if d > w.Tolerance {
				return fmt.Errorf("%s[%d] = %v, want %v (|diff| %.3g > tolerance %.3g)", name, i, g[i], want[i], d, w.Tolerance)
			}
		}
		return nil
	}
	if w.State != nil {
		if err := cmp("state", w.State, got["state"]); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(w.Actions))
	for k := range w.Actions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var flat []float64
		for _, r := range w.Actions[k] {
			flat = append(flat, r...)
		}
		g, ok := got[k]
		if !ok {
			return fmt.Errorf("actions: no group %q in the result", k)
		}
		if err := cmp("actions."+k, flat, g); err != nil {
			return err
		}
	}
	return nil
}

// Report is the outcome of Verify.
type Report struct {
	Plugin      string
	Version     string
	SHA256      string
	Description *plugins.Description
	Cases       []CaseResult
}

// Failed returns the failing cases.
func (r *Report) Failed() []CaseResult {
	var out []CaseResult
	for _, c := range r.Cases {
		if c.Err != nil {
			out = append(out, c)
		}
	}
	return out
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	CasesDir      string // optional fixture directory
	CheckpointDir string // optional; default: CasesDir when it has statistics.json
	HostOptions   []plugins.Option
}

// Verify loads the .wasm at path under production limits and runs the
// fixture cases. The manifest is path's sibling plugin.yaml when it names
// this file; otherwise one is built from describe() (default limits). A
// load failure is returned as the error; case failures are in the report.
// After a failing case the next case runs on a replacement instance, so a
// report also shows that one bad request does not poison the plugin.
func Verify(ctx context.Context, path string, vo VerifyOptions) (*Report, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(filepath.Base(path), ".wasm")
	var m *plugins.Manifest
	if mm, err := plugins.ReadManifest(filepath.Dir(path)); err == nil && mm.WasmFile() == filepath.Base(path) {
		m = mm
	} else {
		d, err := plugins.Inspect(ctx, name, wasm, vo.HostOptions...)
		if err != nil {
			return nil, err
		}
		m = &plugins.Manifest{Name: d.Name, Version: d.Version, ABI: d.ABI, Embodiments: []string{d.Embodiment}}
	}
	sum := sha256Hex(wasm)
	m.SHA256 = sum
	opts := append([]plugins.Option(nil), vo.HostOptions...)
	ckDir := vo.CheckpointDir
	if ckDir == "" && vo.CasesDir != "" && fileExists(filepath.Join(vo.CasesDir, "statistics.json")) {
		ckDir = vo.CasesDir
	}
	if ckDir != "" {
		ck, err := plugins.ReadCheckpoint(ckDir)
		if err != nil {
			return nil, err
		}
		opts = append(opts, plugins.WithCheckpoint(ck))
	}
	p, err := plugins.New(ctx, m, wasm, opts...)
	if err != nil {
		return nil, err
	}
	defer p.Close(ctx)
	d := p.Describe()
	rep := &Report{Plugin: p.Name(), Version: p.Version(), SHA256: sum, Description: &d}
	if vo.CasesDir == "" {
		return rep, nil
	}
	cases, err := LoadCases(vo.CasesDir)
	if err != nil {
		return nil, err
	}
	for _, c := range cases {
		rep.Cases = append(rep.Cases, c.Run(ctx, p))
	}
	return rep, nil
}
