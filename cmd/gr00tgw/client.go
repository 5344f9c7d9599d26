package main

// What predict, smoke and bench share on top of package client: the
// client flags, connecting with --wait, and the comparison of actions with
// a golden.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gr00tgw/gr00tgw/client"
	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// groupDiff is how one action group compares with the golden.
type groupDiff struct {
	PCC    jsonFloat `json:"pcc"`
	MaxAbs jsonFloat `json:"max_abs_diff"`
}

// goldenDiff is how a set of actions compares with the golden: all groups
// flattened together, and each group.
type goldenDiff struct {
	PCC      jsonFloat            `json:"pcc"`
	MaxAbs   jsonFloat            `json:"max_abs_diff"`
	PerGroup map[string]groupDiff `json:"per_group"`
	// Order is the golden's groups in report order.
	Order []string `json:"-"`
}

// compareGolden compares got with want group by group (order first, then
// any other golden group in name order). A group missing from got or of
// another shape is an error naming it.
func compareGolden(got, want map[string][][]float64, order []string) (goldenDiff, error) {
	d := goldenDiff{PerGroup: map[string]groupDiff{}, Order: reportOrder(want, order)}
	var all, allWant []float64
	maxAll := 0.0
	for _, k := range d.Order {
		g, ok := got[k]
		if !ok {
			return d, fmt.Errorf("group %s: in the golden, not in the answer", k)
		}
		a, err := flatRows(g, want[k])
		if err != nil {
			return d, fmt.Errorf("group %s: %w", k, err)
		}
		b := flatten(want[k])
		md := maxAbsDiff(a, b)
		d.PerGroup[k] = groupDiff{PCC: jsonFloat(tensor.PCC(a, b)), MaxAbs: jsonFloat(md)}
		maxAll = math.Max(maxAll, md)
		all, allWant = append(all, a...), append(allWant, b...)
	}
	d.PCC, d.MaxAbs = jsonFloat(tensor.PCC(all, allWant)), jsonFloat(maxAll)
	return d, nil
}

// reportOrder is the groups of m: those in order first, then the rest by
// name.
func reportOrder[V any](m map[string]V, order []string) []string {
	out := make([]string, 0, len(m))
	seen := map[string]bool{}
	for _, k := range order {
		if _, ok := m[k]; ok && !seen[k] {
			out, seen[k] = append(out, k), true
		}
	}
	for _, k := range sortedKeys(m) {
		if !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

// flatRows flattens got after checking it has want's shape.
func flatRows(got, want [][]float64) ([]float64, error) {
	if len(got) != len(want) {
		return nil, fmt.Errorf("%d steps, golden %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			return nil, fmt.Errorf("step %d: %d values, golden %d", i, len(got[i]), len(want[i]))
		}
	}
	return flatten(got), nil
}

func flatten(rows [][]float64) []float64 {
	var out []float64
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// maxAbsDiff is max|a−b| (NaN when any difference is NaN).
func maxAbsDiff(a, b []float64) float64 {
	md := 0.0
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.NaN()
		}
		md = math.Max(md, d)
	}
	return md
}

// actionsDiff compares two answers to the same request: whether they are
// bit-identical and their largest difference (+Inf when the groups or
// shapes differ).
func actionsDiff(a, b map[string][][]float64) (identical bool, maxDiff float64) {
	if len(a) != len(b) {
		return false, math.Inf(1)
	}
	identical = true
	for k, ra := range a {
		rb, ok := b[k]
		if !ok {
			return false, math.Inf(1)
		}
		fb, err := flatRows(rb, ra)
		if err != nil {
			return false, math.Inf(1)
		}
		fa := flatten(ra)
		for i := range fa {
			if math.Float64bits(fa[i]) != math.Float64bits(fb[i]) {
				identical = false
			}
		}
		maxDiff = math.Max(maxDiff, maxAbsDiff(fa, fb))
	}
	return identical, maxDiff
}

// jsonFloat is a float64 whose JSON form is null when it is not finite
// (a PCC of a constant group is NaN).
type jsonFloat float64

// MarshalJSON writes the number, or null for NaN and ±Inf.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

// clientOptions are the flags smoke and bench share.
type clientOptions struct {
	url, protocol, embodiment, out, demoURL string
	timeout, wait                           time.Duration
	auth                                    *authOptions
}

// addClientFlags defines the shared flags on fs.
func addClientFlags(fs *pflag.FlagSet) *clientOptions {
	o := &clientOptions{}
	fs.StringVar(&o.url, "url", "http://127.0.0.1:20000", "server address: http://HOST:PORT, tcp://HOST:PORT (zmq), ws://HOST:PORT (openpi)")
	fs.StringVar(&o.demoURL, "demo-url", "http://127.0.0.1:20000", "the gateway's HTTP API, for the demo and its reference (--protocol zmq|openpi)")
	fs.StringVar(&o.protocol, "protocol", "http", "wire protocol: "+strings.Join(client.Protocols, "|"))
	fs.StringVar(&o.embodiment, "embodiment", "", "embodiment tag whose demo to use (empty: the server's default)")
	fs.StringVar(&o.out, "out", "", "also write the report as JSON here")
	fs.DurationVar(&o.timeout, "timeout", 120*time.Second, "per-request timeout (also sent as "+client.TimeoutHeader+")")
	fs.DurationVar(&o.wait, "wait", 0, "retry fetching the demo this long while the server starts (0: no retry)")
	o.auth = addAuthFlags(fs)
	return o
}

// connect dials the protocol and fetches the demo, retrying the fetch for
// up to --wait while the server is not ready.
func (o *clientOptions) connect(ctx context.Context) (client.Protocol, *client.Demo, error) {
	opts, err := o.auth.options(o.timeout)
	if err != nil {
		return nil, nil, err
	}
	opts.DemoURL = o.demoURL
	p, err := client.Dial(ctx, o.protocol, o.url, opts)
	if errors.Is(err, client.ErrUnknownProtocol) {
		return nil, nil, fmt.Errorf("%w: --protocol %q: want one of %s", errUsage, o.protocol, strings.Join(client.Protocols, ", "))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--protocol %s: %w", o.protocol, err)
	}
	deadline := time.Now().Add(o.wait)
	for {
		d, err := p.Demo(ctx, o.embodiment)
		if err == nil {
			return p, d, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = p.Close()
			return nil, nil, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// writeJSONFile writes v, indented, to path.
func writeJSONFile(path string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
