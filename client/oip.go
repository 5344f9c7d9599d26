package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gr00tgw/gr00tgw/api/oip"
	"github.com/gr00tgw/gr00tgw/client/oipclient"
	"github.com/gr00tgw/gr00tgw/client/rawobs"
)

// oipTransport is the Open Inference Protocol v2 (--protocol oip): POST
// /v2/models/<embodiment>/infer on the gateway's own HTTP port, raw uint8
// frames and float32 state as binary tensor data, binary outputs.
type oipTransport struct{ endpoint }

func newOIP(url string, o Options) *oipTransport { return &oipTransport{newEndpoint(url, o)} }

func (t *oipTransport) send(ctx context.Context, o *rawobs.Observation, tag string, seed uint64, _ []string) (map[string][][]float64, map[string]float64, error) {
	body, hl, err := oipclient.Request(o, oipclient.Options{Seed: &seed, Binary: true})
	if err != nil {
		return nil, nil, err
	}
	if t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/v2/models/"+tag+"/infer", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(oip.HeaderContentLength, strconv.Itoa(hl))
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s (request id %s): %s", resp.Status, resp.Header.Get(RequestIDHeader), strings.TrimSpace(string(rb)))
	}
	r, err := oipclient.ParseResponse(rb, resp.Header.Get(oip.HeaderContentLength))
	if err != nil {
		return nil, nil, err
	}
	timing := map[string]float64{}
	for _, k := range []string{"device", "total"} { // the gateway's parameters device_ms, total_ms
		if n, ok := r.Parameters[k+"_ms"].(json.Number); ok { // oipclient decodes numbers as json.Number
			if v, err := n.Float64(); err == nil {
				timing[k] = v
			}
		}
	}
	acts := make(map[string][][]float64, len(r.Actions))
	for k, v := range r.Actions {
		h, d := r.Shapes[k][0], r.Shapes[k][1]
		rows := make([][]float64, h)
		for i := range rows {
			rows[i] = make([]float64, d)
			for j := range rows[i] {
				rows[i][j] = float64(v[i*d+j])
			}
		}
		acts[k] = rows
	}
	return acts, timing, nil
}

func (t *oipTransport) close() error {
	t.client.CloseIdleConnections()
	return nil
}
