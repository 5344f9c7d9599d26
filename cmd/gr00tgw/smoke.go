package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/gr00tgw/gr00tgw/client"
)

func init() {
	register(&command{name: "smoke", summary: "client: the demo smoke test of a running server (one PASS/FAIL line; FAIL exits 1)",
		run: func(ctx context.Context, args []string) error { return runSmoke(ctx, args, os.Stdout) }})
}

const smokeAbout = `The reference's smoke_test.py against a running server: fetches the demo
of the embodiment (GET /demo), posts its request with the reference noise
twice and a request with --seed instead of the noise twice, and prints one
line:

  PASS MODEL VERSION EMBODIMENT: PCC(actions)=… max|d|=… repeat_maxdiff=…
  seed_path_ok device_ms=A/B total_ms=A/B wall_ms=A/B per_group[G=PCC/max|d| …]

device_ms and total_ms are the server's (HTTP timing_ms, OIP parameters),
infer_ms openpi's server_timing; a protocol that reports none (ZeroMQ)
prints wall_ms only.

PASS needs actions PCC vs the golden >= the server's gate (or --pcc-min),
finite actions, bit-identical repeats and a working, deterministic seed
path. A demo without a golden (the server says so in expected.note) is
checked for determinism only, and the line says so. --out writes the same
as JSON. FAIL exits 1.`

// smokeSeed is the seed of the seed-path request (the reference's default
// seed for N1.7).
const smokeSeed = 42

// smokeReport is what smoke prints as its line and writes with --out.
type smokeReport struct {
	Verdict    string   `json:"verdict"`
	Line       string   `json:"line"`
	Failures   []string `json:"failures,omitempty"`
	URL        string   `json:"url"`
	Protocol   string   `json:"protocol"`
	Embodiment string   `json:"embodiment"`
	Model      string   `json:"model"`
	Version    string   `json:"version"`
	// Golden says whether the demo has golden actions; without one only
	// determinism is checked and Note says why.
	Golden  bool        `json:"golden"`
	Note    string      `json:"note,omitempty"`
	PCCMin  float64     `json:"actions_pcc_min"`
	Actions *goldenDiff `json:"actions_vs_golden,omitempty"`
	Repeat  repeatCheck `json:"repeat"`
	Seed    seedCheck   `json:"seed_path"`
	// TimingMS and WallMS are those of the two noise requests.
	TimingMS []map[string]float64 `json:"timing_ms"`
	WallMS   []float64            `json:"wall_ms"`
}

// repeatCheck compares two answers to one request.
type repeatCheck struct {
	BitIdentical bool      `json:"bit_identical"`
	MaxAbsDiff   jsonFloat `json:"max_abs_diff"`
}

// seedCheck is the seed path: the demo with seed instead of noise, twice.
type seedCheck struct {
	OK    bool   `json:"ok"`
	Seed  int    `json:"seed"`
	Error string `json:"error,omitempty"`
	repeatCheck
}

func runSmoke(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("smoke", "[--url URL] [--protocol http] [--embodiment TAG] [--out FILE.json] [--wait D]", smokeAbout)
	o := addClientFlags(fs)
	seed := fs.Int("seed", smokeSeed, "seed of the seed-path request")
	pccMin := fs.Float64("pcc-min", 0, "actions PCC gate (0: the server's gate from /demo)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *seed < 0 {
		return fmt.Errorf("%w: --seed %d: not negative", errUsage, *seed)
	}
	p, demo, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer p.Close()
	if *pccMin > 0 {
		demo.PCCMin = *pccMin
	}
	r := smoke(ctx, p, demo, *seed)
	r.URL, r.Protocol = o.url, o.protocol
	if r.Embodiment == "" {
		r.Embodiment = o.embodiment
	}
	fmt.Fprintln(stdout, r.Line)
	if o.out != "" {
		if err := writeJSONFile(o.out, r); err != nil {
			return err
		}
	}
	if r.Verdict != "PASS" {
		return fmt.Errorf("FAIL: %s", strings.Join(r.Failures, "; "))
	}
	return nil
}

// smoke runs the checks on demo through p and returns the report, its
// line included.
func smoke(ctx context.Context, p client.Protocol, demo *client.Demo, seed int) *smokeReport {
	r := &smokeReport{Embodiment: demo.Embodiment, Golden: demo.Golden != nil, Note: demo.Note, PCCMin: demo.PCCMin}
	r.Seed.Seed = seed
	fail := func(format string, a ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, a...)) }

	var first, second *client.Prediction
	for i, dst := range []**client.Prediction{&first, &second} {
		pr, err := p.Predict(ctx, demo.Request)
		if err != nil {
			fail("demo request %d: %v", i+1, err)
			break
		}
		*dst = pr
		r.TimingMS = append(r.TimingMS, pr.Timing)
		r.WallMS = append(r.WallMS, ms(pr.Wall))
	}
	if first != nil {
		r.Model, r.Version = first.Model, first.Version
		if first.Embodiment != "" {
			r.Embodiment = first.Embodiment
		}
		if bad := nonFinite(first.Actions); bad != "" {
			fail("non-finite action %s", bad)
		}
		if demo.Golden != nil {
			c, err := compareGolden(first.Actions, demo.Golden, first.Keys)
			if err != nil {
				fail("actions vs golden: %v", err)
			} else {
				r.Actions = &c
				if !(float64(c.PCC) >= demo.PCCMin) {
					fail("actions PCC %.6f below %.4f", float64(c.PCC), demo.PCCMin)
				}
			}
		}
	}
	if second != nil {
		ident, md := actionsDiff(first.Actions, second.Actions)
		r.Repeat = repeatCheck{BitIdentical: ident, MaxAbsDiff: jsonFloat(md)}
		if !ident {
			fail("repeat not bit-identical (max|d| %.3g)", md)
		}
	}

	if err := seedPath(ctx, p, demo.Request, &r.Seed); err != nil {
		r.Seed.Error = err.Error()
		fail("seed path: %v", err)
	}
	r.Verdict = "PASS"
	if len(r.Failures) > 0 {
		r.Verdict = "FAIL"
	}
	r.Line = smokeLine(r)
	return r
}

// seedPath posts req with seed instead of noise twice: both must succeed
// and agree bit for bit.
func seedPath(ctx context.Context, p client.Protocol, req json.RawMessage, c *seedCheck) error {
	body, err := client.WithSeed(req, c.Seed)
	if err != nil {
		return err
	}
	a, err := p.Predict(ctx, body)
	if err != nil {
		return err
	}
	b, err := p.Predict(ctx, body)
	if err != nil {
		return fmt.Errorf("repeat: %w", err)
	}
	if bad := nonFinite(a.Actions); bad != "" {
		return fmt.Errorf("non-finite action %s", bad)
	}
	ident, md := actionsDiff(a.Actions, b.Actions)
	c.repeatCheck = repeatCheck{BitIdentical: ident, MaxAbsDiff: jsonFloat(md)}
	if !ident {
		return fmt.Errorf("repeat not bit-identical (max|d| %.3g)", md)
	}
	c.OK = true
	return nil
}

// nonFinite names the first NaN or infinite action ("" when none).
func nonFinite(actions map[string][][]float64) string {
	for _, k := range sortedKeys(actions) {
		for i, row := range actions[k] {
			for j, v := range row {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Sprintf("%s[%d][%d]=%v", k, i, j, v)
				}
			}
		}
	}
	return ""
}

// smokeLine is the reference smoke test's one line.
func smokeLine(r *smokeReport) string {
	var b strings.Builder
	b.WriteString(r.Verdict)
	for _, s := range []string{r.Model, r.Version, r.Embodiment} {
		if s != "" {
			b.WriteString(" " + s)
		}
	}
	b.WriteString(":")
	switch {
	case r.Actions != nil:
		fmt.Fprintf(&b, " PCC(actions)=%.6f max|d|=%.4g", float64(r.Actions.PCC), float64(r.Actions.MaxAbs))
	case !r.Golden:
		note := r.Note
		if note == "" {
			note = "the server sent none"
		}
		fmt.Fprintf(&b, " no golden, determinism only (%s)", note)
	}
	if len(r.WallMS) == 2 {
		fmt.Fprintf(&b, " repeat_maxdiff=%.1e", float64(r.Repeat.MaxAbsDiff))
	}
	if r.Seed.OK {
		b.WriteString(" seed_path_ok")
	} else {
		b.WriteString(" seed_path_FAIL")
	}
	pair := func(name string, get func(i int) float64) {
		var vs []string
		for i := range r.WallMS {
			vs = append(vs, fmt.Sprintf("%.2f", get(i)))
		}
		if len(vs) > 0 {
			fmt.Fprintf(&b, " %s=%s", name, strings.Join(vs, "/"))
		}
	}
	// The server's timings as the protocol reports them (HTTP timing_ms,
	// OIP parameters, openpi server_timing; ZeroMQ reports none): a figure
	// is printed only when both requests carried it.
	for _, k := range []string{"device", "total", "infer"} {
		if reported(r.TimingMS, k) {
			pair(k+"_ms", func(i int) float64 { return r.TimingMS[i][k] })
		}
	}
	pair("wall_ms", func(i int) float64 { return r.WallMS[i] })
	if r.Actions != nil {
		parts := make([]string, 0, len(r.Actions.Order))
		for _, k := range r.Actions.Order {
			g := r.Actions.PerGroup[k]
			parts = append(parts, fmt.Sprintf("%s=%.5f/%.4f", k, float64(g.PCC), float64(g.MaxAbs)))
		}
		fmt.Fprintf(&b, " per_group[%s]", strings.Join(parts, " "))
	}
	if len(r.Failures) > 0 {
		fmt.Fprintf(&b, " failures[%s]", strings.Join(r.Failures, "; "))
	}
	return b.String()
}

// reported says whether every timing map has key k.
func reported(ts []map[string]float64, k string) bool {
	for _, t := range ts {
		if _, ok := t[k]; !ok {
			return false
		}
	}
	return len(ts) > 0
}
