// Package oip serves the Open Inference Protocol v2 (KServe V2, Triton's
// HTTP/REST API) inference endpoint on the gateway's HTTP listener:
// POST /v2/models/{name}/infer and the server metadata GET /v2. The
// health and model routes (/v2/health/live, /v2/health/ready,
// /v2/models/{name}, /v2/models/{name}/ready) are the gateway's own.
//
// {name} is an embodiment tag, or the model's name for the default
// embodiment. Inputs are named as the model metadata lists them:
// images.<camera> (UINT8 [T, H, W, 3] raw RGB, or BYTES [T] PNG/JPEG —
// base64 strings in JSON, raw bytes in binary data), state.<group> (FP32
// [D]), instruction (BYTES [1], UTF-8 text), and optionally seed (INT64 or
// UINT64 [1]) or noise (FP32 [horizon, D], the model's whole denoised
// chunk). Outputs are actions.<group>, FP32 [horizon, D], in the
// embodiment's physical units. The request "id" is echoed. The binary
// tensor data extension is supported both ways: inputs with
// parameters.binary_data_size after the JSON object
// (Inference-Header-Content-Length), outputs as binary data on request
// (outputs[].parameters.binary_data, or parameters.binary_data_output).
//
// The front end only translates: the request becomes a service.Request
// (the same one /predict, ZeroMQ and openpi produce), so the actions are
// bit-identical to /predict's for the same pixels, state, instruction and
// seed or noise. Errors are the gateway's, rendered once at its edge:
// {"error": "..."} (plus code and field) with /predict's status codes —
// 400 naming the input, 404 for an unknown model, 413, 422 for a body that
// is not an inference request object, 503 while starting or when the
// queue is full.
package oip

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"

	oipapi "github.com/gr00tgw/gr00tgw/api/oip"
	httpfront "github.com/gr00tgw/gr00tgw/frontend/http"
	"github.com/gr00tgw/gr00tgw/service"
)

// HeaderContentLength is the binary data extension's header: the length
// of the JSON object at the start of a body that binary tensor data
// follows (api/oip's).
const HeaderContentLength = oipapi.HeaderContentLength

// Protocol is the predictions metric's protocol label.
const Protocol = "oip"

// Extensions are the protocol extensions GET /v2 lists.
var Extensions = []string{"binary_tensor_data"}

// Mount registers GET /v2 and POST /v2/models/{name}/infer on srv's
// app. Call it once, after httpfront.New and before Serve.
func Mount(srv *httpfront.Server) {
	core := srv.Service()
	app := srv.App()
	app.Get("/v2", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"name": "gr00tgw", "version": core.Version(), "extensions": Extensions})
	})
	app.Post("/v2/models/:model/infer", srv.PredictHandler(httpfront.FrontEnd{
		Protocol:   Protocol,
		Embodiment: func(c *fiber.Ctx) (string, error) { return core.ModelTag(c.Params("model")) },
		Decode: func(c *fiber.Ctx, tag string, body []byte) (*service.Request, httpfront.Responder, error) {
			return decode(core, c, tag, body)
		},
		Rename: renameParams,
	}))
}

func decode(g service.Service, c *fiber.Ctx, tag string, body []byte) (*service.Request, httpfront.Responder, error) {
	ct, err := g.Contract(tag)
	if err != nil {
		return nil, nil, err
	}
	headerLen := -1
	if h := c.Get(HeaderContentLength); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 {
			return nil, nil, &service.HandlerError{Status: http.StatusBadRequest, Code: service.CodeInvalid, Field: HeaderContentLength,
				Err: fmt.Errorf("header %s: %q is not a byte count", HeaderContentLength, h)}
		}
		headerLen = n
	}
	inf, err := Parse(body, headerLen, ct)
	if err != nil {
		return nil, nil, err
	}
	model := c.Params("model")
	return inf.Request, func(c *fiber.Ctx, resp *service.PredictResponse) error {
		b, jsonLen, err := Encode(inf, model, resp)
		if err != nil {
			return err
		}
		if jsonLen < len(b) {
			c.Set(HeaderContentLength, strconv.Itoa(jsonLen))
			c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
		} else {
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		}
		return c.Send(b)
	}, nil
}

// Response is the inference response object (api/oip's).
type Response = oipapi.Response

// Tensor is one response output (api/oip's).
type Tensor = oipapi.Tensor

// Encode writes the inference response of a served prediction: one FP32
// [horizon, D] output per requested action group (all, in the
// embodiment's order, by default), as JSON numbers (shortest form that
// reads back as the same float32) or as binary data (little-endian)
// after the JSON object. It returns the body and the JSON object's length
// (len(body) when no output is binary). Parameters carry the embodiment,
// the noise source, the seed, the gateway's request id, its timings
// (device_ms, total_ms: timing_ms.device and .total of /predict) and,
// when the safety gate is on, safety_policy, safety_clamped and
// safety_first (the first violation, as SafetyViolation.String).
func Encode(inf *Infer, model string, resp *service.PredictResponse) ([]byte, int, error) {
	outs := inf.Outputs
	if outs == nil {
		for _, k := range resp.ActionKeys {
			outs = append(outs, Output{Name: PrefixActions + k})
		}
	}
	r := Response{ModelName: model, ModelVersion: resp.Version, Outputs: make([]Tensor, 0, len(outs)),
		Parameters: map[string]any{"embodiment": resp.Embodiment, "noise_source": resp.NoiseSource, "request_id": resp.RequestID,
			"device_ms": resp.TimingMS.Device, "total_ms": resp.TimingMS.Total}}
	if inf.HasID {
		id := inf.ID
		r.ID = &id
	}
	if resp.Seed != nil {
		r.Parameters["seed"] = *resp.Seed
	}
	if sr := resp.Safety; sr != nil { // the safety gate's report, as scalar parameters
		r.Parameters["safety_policy"], r.Parameters["safety_clamped"] = sr.Policy, sr.Clamped
		if sr.First != nil {
			r.Parameters["safety_first"] = sr.First.String()
		}
	}
	var bin []byte
	for _, o := range outs {
		key := o.Name[len(PrefixActions):]
		rows, ok := resp.Actions[key]
		if !ok {
			return nil, 0, fmt.Errorf("oip: output[%s]: the prediction has no action group %q", o.Name, key)
		}
		d := 0
		if len(rows) > 0 {
			d = len(rows[0])
		}
		t := Tensor{Name: o.Name, Datatype: TypeFP32, Shape: []int{len(rows), d}}
		binaryOut := inf.BinaryOutput
		if o.Binary != nil {
			binaryOut = *o.Binary
		}
		if binaryOut {
			n := len(bin)
			for _, row := range rows {
				for _, x := range row {
					bin = binary.LittleEndian.AppendUint32(bin, math.Float32bits(float32(x)))
				}
			}
			t.Parameters = map[string]any{ParamBinarySize: len(bin) - n}
		} else {
			data := make([]byte, 0, 12*len(rows)*d+2)
			data = append(data, '[')
			for i, row := range rows {
				for j, x := range row {
					f := float32(x)
					if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
						return nil, 0, fmt.Errorf("oip: output[%s][%d][%d]: %v is not finite", o.Name, i, j, f)
					}
					if i+j > 0 {
						data = append(data, ',')
					}
					data = strconv.AppendFloat(data, float64(f), 'g', -1, 32)
				}
			}
			t.Data = append(data, ']')
		}
		r.Outputs = append(r.Outputs, t)
	}
	js, err := json.Marshal(r)
	if err != nil {
		return nil, 0, fmt.Errorf("oip: encode response: %w", err)
	}
	return append(js, bin...), len(js), nil
}
