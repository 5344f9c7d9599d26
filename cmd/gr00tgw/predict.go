package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/gr00tgw/gr00tgw/core/tensor"
	"github.com/gr00tgw/gr00tgw/gateway"
)

func init() {
	register(&command{name: "predict", summary: "client: POST a /predict request to a running server and print the answer", run: runPredictClient})
}

const predictAbout = `Posts REQ.json (a /predict body) and prints the response JSON. Without
--request it fetches GET /demo, posts the demo request and compares the
actions with the demo's golden (prints a PASS/FAIL line; FAIL exits 1).
--msgpack sends and receives application/msgpack (frames as raw bytes).`

func runPredictClient(ctx context.Context, args []string) error {
	fs := newFlags("predict", "[--url URL] [--request REQ.json | -] [--msgpack] [--timeout D] [--out FILE]", predictAbout)
	url := fs.String("url", "http://127.0.0.1:20000", "server base URL")
	reqPath := fs.String("request", "", "request JSON file (- for stdin); empty: the server's GET /demo request")
	useMsgpack := fs.Bool("msgpack", false, "send and receive application/msgpack")
	timeout := fs.Duration("timeout", 120*time.Second, "client timeout (also sent as "+gateway.TimeoutHeader+")")
	out := fs.String("out", "", "write the response JSON here instead of stdout")
	rid := fs.String("request-id", "", "X-Request-ID to send")
	pccMin := fs.Float64("pcc-min", 0, "demo mode: PCC gate (0: the server's gate from /demo)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	base := strings.TrimRight(*url, "/")
	client := &http.Client{Timeout: *timeout}

	var body []byte
	var expected *demoExpected
	switch *reqPath {
	case "":
		req, exp, err := fetchDemo(ctx, client, base)
		if err != nil {
			return err
		}
		body, expected = req, exp
		if *pccMin > 0 {
			expected.Gates.PCCMin = *pccMin
		}
	case "-":
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("predict: stdin: %w", err)
		}
		body = b
	default:
		b, err := os.ReadFile(*reqPath)
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		body = b
	}

	ct := "application/json"
	if *useMsgpack {
		mp, err := jsonToMsgpack(body)
		if err != nil {
			return fmt.Errorf("predict: --msgpack: %w", err)
		}
		body, ct = mp, gateway.MIMEMsgpack
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/predict", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("predict: %w", err)
	}
	hreq.Header.Set("Content-Type", ct)
	hreq.Header.Set("Accept", ct)
	hreq.Header.Set(gateway.TimeoutHeader, fmt.Sprintf("%.3f", timeout.Seconds()))
	if *rid != "" {
		hreq.Header.Set(gateway.RequestIDHeader, *rid)
	}
	start := time.Now()
	resp, err := client.Do(hreq)
	if err != nil {
		return fmt.Errorf("predict: POST %s/predict: %w", base, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("predict: reading the response: %w", err)
	}
	wall := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("predict: %s (request id %s): %s", resp.Status, resp.Header.Get(gateway.RequestIDHeader), strings.TrimSpace(string(rb)))
	}
	if strings.Contains(resp.Header.Get("Content-Type"), "msgpack") {
		var v any
		if err := msgpack.Unmarshal(rb, &v); err != nil {
			return fmt.Errorf("predict: msgpack response: %w", err)
		}
		if rb, err = json.Marshal(v); err != nil {
			return fmt.Errorf("predict: msgpack response to JSON: %w", err)
		}
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, rb, "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(rb)
	}
	pretty.WriteByte('\n')
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("predict: %w", err)
		}
		defer f.Close()
		w = f
	}
	if expected == nil || *out != "" {
		if _, err := w.Write(pretty.Bytes()); err != nil {
			return err
		}
	}
	if expected != nil {
		return compareDemo(rb, expected, wall)
	}
	return nil
}

type demoExpected struct {
	Actions map[string][][]float64 `json:"actions"`
	Gates   struct {
		PCCMin float64 `json:"actions_pcc_min"`
	} `json:"gates"`
}

func fetchDemo(ctx context.Context, client *http.Client, base string) ([]byte, *demoExpected, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/demo", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("predict: GET %s/demo: %w", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("predict: GET /demo: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var d struct {
		Request  json.RawMessage `json:"request"`
		Expected demoExpected    `json:"expected"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("predict: GET /demo: %w", err)
	}
	return d.Request, &d.Expected, nil
}

// compareDemo prints the smoke line: PCC of all actions vs the golden and
// per group, and fails below the gate.
func compareDemo(resp []byte, exp *demoExpected, wall time.Duration) error {
	var r struct {
		Actions map[string][][]float64 `json:"actions"`
		Timing  map[string]any         `json:"timing_ms"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return fmt.Errorf("predict: response: %w", err)
	}
	keys := make([]string, 0, len(exp.Actions))
	for k := range exp.Actions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var all, allWant []float64
	var parts []string
	for _, k := range keys {
		var a, b []float64
		for i, row := range exp.Actions[k] {
			if i < len(r.Actions[k]) {
				a = append(a, r.Actions[k][i]...)
			}
			b = append(b, row...)
		}
		if len(a) != len(b) {
			return fmt.Errorf("predict: group %s: %d values, golden %d", k, len(a), len(b))
		}
		md := 0.0
		for i := range a {
			md = math.Max(md, math.Abs(a[i]-b[i]))
		}
		parts = append(parts, fmt.Sprintf("%s=%.5f/%.4f", k, tensor.PCC(a, b), md))
		all = append(all, a...)
		allWant = append(allWant, b...)
	}
	pcc := tensor.PCC(all, allWant)
	verdict := "PASS"
	if !(pcc >= exp.Gates.PCCMin) {
		verdict = "FAIL"
	}
	fmt.Printf("%s PCC(actions)=%.6f gate=%.4f device_ms=%v total_ms=%v wall_ms=%d per_group[%s]\n",
		verdict, pcc, exp.Gates.PCCMin, r.Timing["device"], r.Timing["total"], wall.Milliseconds(), strings.Join(parts, " "))
	if verdict == "FAIL" {
		return fmt.Errorf("predict: demo actions PCC %.6f below %.4f", pcc, exp.Gates.PCCMin)
	}
	return nil
}

// jsonToMsgpack re-encodes a /predict JSON body as msgpack, sending frames
// as raw bytes (bin) instead of base64 text.
func jsonToMsgpack(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if ims, ok := m["images"].(map[string]any); ok {
		for cam, v := range ims {
			list, ok := v.([]any)
			if !ok {
				continue
			}
			for i, f := range list {
				if s, ok := f.(string); ok {
					if raw, err := base64.StdEncoding.DecodeString(s); err == nil {
						list[i] = raw
					}
				}
			}
			ims[cam] = list
		}
	}
	return msgpack.Marshal(numbersToNative(m))
}

// numbersToNative turns json.Number leaves into int64 or float64.
func numbersToNative(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbersToNative(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = numbersToNative(e)
		}
		return x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u
		}
		f, _ := x.Float64()
		return f
	}
	return v
}
