package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/gr00tgw/gr00tgw/service"
)

func init() {
	register(&command{name: "predict", summary: "client: POST a /predict request to a running server and print the answer", run: runPredictClient})
}

const predictAbout = `Posts REQ.json (a /predict body) and prints the response JSON. Without
--request it fetches GET /demo, posts the demo request and compares the
actions with the demo's golden (prints a PASS/FAIL line; FAIL exits 1).
--embodiment TAG picks the demo of TAG, or sets the request's embodiment.
--msgpack sends and receives application/msgpack (frames as raw bytes).`

func runPredictClient(ctx context.Context, args []string) error {
	fs := newFlags("predict", "[--url URL] [--request REQ.json | -] [--embodiment TAG] [--msgpack] [--timeout D] [--out FILE]", predictAbout)
	url := fs.String("url", "http://127.0.0.1:20000", "server base URL")
	reqPath := fs.String("request", "", "request JSON file (- for stdin); empty: the server's GET /demo request")
	useMsgpack := fs.Bool("msgpack", false, "send and receive application/msgpack")
	timeout := fs.Duration("timeout", 120*time.Second, "client timeout (also sent as "+service.TimeoutHeader+")")
	out := fs.String("out", "", "write the response JSON here instead of stdout")
	rid := fs.String("request-id", "", "X-Request-ID to send")
	pccMin := fs.Float64("pcc-min", 0, "demo mode: PCC gate (0: the server's gate from /demo)")
	embodiment := fs.String("embodiment", "", "embodiment tag: the demo of TAG, or the request's embodiment (empty: the server's default, or the request's)")
	auth := addAuthFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	base := strings.TrimRight(*url, "/")
	client, err := auth.httpClient(*timeout)
	if err != nil {
		return err
	}

	var body []byte
	var demo *demoCase
	switch *reqPath {
	case "":
		d, err := fetchDemo(ctx, client, base, *embodiment)
		if err != nil {
			return err
		}
		body, demo = d.Request, d
		if *pccMin > 0 {
			demo.PCCMin = *pccMin
		}
	case "-":
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
		body = b
	default:
		b, err := os.ReadFile(*reqPath)
		if err != nil {
			return err
		}
		body = b
	}

	if *embodiment != "" && demo == nil {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return fmt.Errorf("--embodiment: the request is not a JSON object: %w", err)
		}
		m["embodiment"], _ = json.Marshal(*embodiment)
		if body, err = json.Marshal(m); err != nil {
			return err
		}
	}
	ct := "application/json"
	if *useMsgpack {
		mp, err := jsonToMsgpack(body)
		if err != nil {
			return fmt.Errorf("--msgpack: %w", err)
		}
		body, ct = mp, service.MIMEMsgpack
	}
	rb, _, wall, err := postPredictBody(ctx, client, base, body, ct, *timeout, *rid)
	if err != nil {
		return err
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
			return err
		}
		defer f.Close()
		w = f
	}
	if demo == nil || *out != "" {
		if _, err := w.Write(pretty.Bytes()); err != nil {
			return err
		}
	}
	if demo != nil {
		return compareDemo(rb, demo, wall)
	}
	return nil
}

// compareDemo prints the demo line: PCC of all actions vs the golden and
// per group, and fails below the gate (or without a golden to compare
// with: `gr00tgw smoke` checks determinism then).
func compareDemo(resp []byte, d *demoCase, wall time.Duration) error {
	p, err := parsePrediction(resp)
	if err != nil {
		return err
	}
	if d.Golden == nil {
		return fmt.Errorf("the demo has no golden (%s); gr00tgw smoke checks determinism instead", d.Note)
	}
	c, err := compareGolden(p.Actions, d.Golden, p.Keys)
	if err != nil {
		return err
	}
	parts := make([]string, 0, len(c.Order))
	for _, k := range c.Order {
		parts = append(parts, fmt.Sprintf("%s=%.5f/%.4f", k, c.PerGroup[k].PCC, c.PerGroup[k].MaxAbs))
	}
	pcc := float64(c.PCC)
	verdict := "PASS"
	if !(pcc >= d.PCCMin) {
		verdict = "FAIL"
	}
	fmt.Printf("%s PCC(actions)=%.6f gate=%.4f device_ms=%v total_ms=%v wall_ms=%d per_group[%s]\n",
		verdict, pcc, d.PCCMin, p.Timing["device"], p.Timing["total"], wall.Milliseconds(), strings.Join(parts, " "))
	if verdict == "FAIL" {
		return fmt.Errorf("demo actions PCC %.6f below %.4f", pcc, d.PCCMin)
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
