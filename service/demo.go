package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// Demo is an embodiment's demo observation and, usually, its golden
// actions. Warm-up posts Request through the full request path and gates
// the actions (against Golden, or for determinism without one); GET /demo
// returns both.
type Demo struct {
	// Request is a ready-to-post /predict JSON body.
	Request json.RawMessage
	// Golden maps action group → [horizon][dim] reference actions; nil
	// when the demo has none for this checkpoint.
	Golden map[string][][]float64
	// Source says where the demo came from (a directory), for logs and /info.
	Source string
	// Note says what the golden is when it is not an independent
	// reference (actions.json's "golden" member, e.g. a regression golden
	// recorded by gr00tgw itself), or why there is none.
	Note string
}

// LoadDemo reads dir/request.json (a /predict body) and, when present,
// dir/actions.json ({"actions": {group: [[...]]}, "golden": note}) — the
// layout of testdata/n17-tiny/caseA and of the reference server's demo/n17.
func LoadDemo(dir string) (*Demo, error) {
	req, err := os.ReadFile(filepath.Join(dir, "request.json"))
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if !json.Valid(req) {
		return nil, fmt.Errorf("demo: %s: not valid JSON", filepath.Join(dir, "request.json"))
	}
	d := &Demo{Request: req, Source: dir}
	raw, err := os.ReadFile(filepath.Join(dir, "actions.json"))
	if errors.Is(err, os.ErrNotExist) {
		d.Note = "no golden (actions.json) in " + dir
		return d, nil
	}
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	var golden struct {
		Actions map[string][][]float64 `json:"actions"`
		Golden  string                 `json:"golden"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		return nil, fmt.Errorf("demo: %s: %w", filepath.Join(dir, "actions.json"), err)
	}
	if len(golden.Actions) == 0 {
		return nil, fmt.Errorf("demo: %s: no actions", filepath.Join(dir, "actions.json"))
	}
	d.Golden, d.Note = golden.Actions, golden.Golden
	return d, nil
}

// Comparison is how one set of actions compares with the golden.
type Comparison struct {
	PCC     float64            `json:"pcc"`
	MaxAbs  float64            `json:"max_abs_diff"`
	PerPCC  map[string]float64 `json:"per_group_pcc"`
	PerMax  map[string]float64 `json:"per_group_max_abs_diff"`
	Missing []string           `json:"missing,omitempty"`
}

// compareActions flattens both sides group by group in order and compares.
func compareActions(order []Group, got map[string][][]float64, want map[string][][]float64) (Comparison, error) {
	c := Comparison{PerPCC: map[string]float64{}, PerMax: map[string]float64{}}
	var fa, fb []float64
	for _, g := range order {
		w, ok := want[g.Key]
		if !ok {
			c.Missing = append(c.Missing, g.Key)
			continue
		}
		gv := got[g.Key]
		if len(gv) != len(w) {
			return c, fmt.Errorf("group[%s]: %d steps, golden has %d", g.Key, len(gv), len(w))
		}
		var ga, gb []float64
		for i := range w {
			if len(gv[i]) != len(w[i]) {
				return c, fmt.Errorf("group[%s] step[%d]: %d values, golden has %d", g.Key, i, len(gv[i]), len(w[i]))
			}
			ga = append(ga, gv[i]...)
			gb = append(gb, w[i]...)
		}
		md := 0.0
		for i := range ga {
			md = math.Max(md, math.Abs(ga[i]-gb[i]))
		}
		c.PerPCC[g.Key] = jsonSafe(tensor.PCC(ga, gb))
		c.PerMax[g.Key] = md
		c.MaxAbs = math.Max(c.MaxAbs, md)
		fa = append(fa, ga...)
		fb = append(fb, gb...)
	}
	if len(fa) == 0 {
		return c, fmt.Errorf("no action group in common with the golden")
	}
	c.PCC = tensor.PCC(fa, fb)
	return c, nil
}

// jsonSafe maps NaN (a constant group) to 0 so the value encodes as JSON.
func jsonSafe(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}
