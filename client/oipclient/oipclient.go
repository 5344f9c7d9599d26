// Package oipclient builds Open Inference Protocol v2 inference requests
// for gr00tgw's /v2/models/{name}/infer from a raw observation and reads
// the responses: what the protocol tests, `gr00tgw smoke --protocol oip`
// and `gr00tgw bench --protocol oip` send. It speaks the vocabulary of
// api/oip and links no server code.
package oipclient

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/gr00tgw/gr00tgw/api/oip"
	"github.com/gr00tgw/gr00tgw/client/rawobs"
)

// Options shape a request.
type Options struct {
	// ID is the request's "id" ("" sends none).
	ID string
	// Seed, when set, is sent as the seed input (UINT64 [1]).
	Seed *uint64
	// Binary sends the frames (UINT8) and the state (FP32) as binary
	// tensor data after the JSON object, and asks for binary outputs.
	Binary bool
}

type input struct {
	Name       string         `json:"name"`
	Shape      []int          `json:"shape"`
	Datatype   string         `json:"datatype"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Data       any            `json:"data,omitempty"`
}

// Request builds the body of an inference request for o: every camera as
// UINT8 [T, H, W, 3], every state group as FP32 [D] (in sorted key order),
// the instruction, and the seed when opts has one. It returns the body and
// the value of the Inference-Header-Content-Length header (-1: send none).
func Request(o *rawobs.Observation, opts Options) ([]byte, int, error) {
	var ins []input
	var bin []byte
	add := func(in input, raw []byte, json any) {
		if opts.Binary {
			in.Parameters = map[string]any{oip.ParamBinarySize: len(raw)}
			bin = append(bin, raw...)
		} else {
			in.Data = json
		}
		ins = append(ins, in)
	}
	for _, cam := range o.Cameras() {
		pix, shape, err := rawobs.Stack(o.Frames[cam])
		if err != nil {
			return nil, 0, fmt.Errorf("oipclient: camera %s: %w", cam, err)
		}
		var js []int
		if !opts.Binary {
			js = make([]int, len(pix))
			for i, b := range pix {
				js[i] = int(b)
			}
		}
		add(input{Name: oip.PrefixImages + cam, Shape: shape, Datatype: oip.TypeUINT8}, pix, js)
	}
	for _, g := range slices.Sorted(maps.Keys(o.State)) {
		vals := o.State[g]
		raw := make([]byte, 0, 4*len(vals))
		f := make([]float32, len(vals))
		for i, v := range vals {
			f[i] = float32(v)
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f[i]))
		}
		add(input{Name: oip.PrefixState + g, Shape: []int{len(vals)}, Datatype: oip.TypeFP32}, raw, f)
	}
	ins = append(ins, input{Name: oip.InputInstruction, Shape: []int{1}, Datatype: oip.TypeBYTES, Data: []string{o.Instruction}})
	if opts.Seed != nil {
		ins = append(ins, input{Name: oip.InputSeed, Shape: []int{1}, Datatype: oip.TypeUINT64, Data: []uint64{*opts.Seed}})
	}
	req := map[string]any{"inputs": ins}
	if opts.ID != "" {
		req["id"] = opts.ID
	}
	if opts.Binary {
		req["parameters"] = map[string]any{oip.ParamBinaryOutput: true}
	}
	js, err := json.Marshal(req)
	if err != nil {
		return nil, 0, fmt.Errorf("oipclient: %w", err)
	}
	if !opts.Binary {
		return js, -1, nil
	}
	return append(js, bin...), len(js), nil
}

// Result is a parsed inference response.
type Result struct {
	// ID is the echoed request id.
	ID string
	// ModelName is the response's model_name.
	ModelName string
	// Actions maps action group (the output name without "actions.") to
	// its values, row-major, with Shapes its [horizon, D].
	Actions map[string][]float32
	Shapes  map[string][]int
	// Parameters are the response's parameters.
	Parameters map[string]any
}

// ParseResponse reads an inference response body; headerLen is its
// Inference-Header-Content-Length ("" when absent).
func ParseResponse(body []byte, headerLen string) (*Result, error) {
	js, bin := body, []byte(nil)
	if headerLen != "" {
		n, err := strconv.Atoi(headerLen)
		if err != nil || n < 0 || n > len(body) {
			return nil, fmt.Errorf("oipclient: %s %q for a %d-byte body", oip.HeaderContentLength, headerLen, len(body))
		}
		js, bin = body[:n], body[n:]
	}
	var r oip.Response
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	if err := d.Decode(&r); err != nil {
		return nil, fmt.Errorf("oipclient: response: %w", err)
	}
	res := &Result{ModelName: r.ModelName, Parameters: r.Parameters, Actions: map[string][]float32{}, Shapes: map[string][]int{}}
	if r.ID != nil {
		res.ID = *r.ID
	}
	for _, o := range r.Outputs {
		if o.Datatype != oip.TypeFP32 || len(o.Shape) != 2 {
			return nil, fmt.Errorf("oipclient: output[%s]: %s %v, want FP32 [horizon, D]", o.Name, o.Datatype, o.Shape)
		}
		if h, d := o.Shape[0], o.Shape[1]; h < 0 || d < 0 || (d > 0 && h > len(body)/d) {
			return nil, fmt.Errorf("oipclient: output[%s]: shape %v: negative, or more values than the %d-byte body holds", o.Name, o.Shape, len(body))
		}
		n := o.Shape[0] * o.Shape[1]
		var vals []float32
		if size, ok := o.Parameters[oip.ParamBinarySize]; ok {
			s, err := strconv.Atoi(fmt.Sprint(size))
			if err != nil || s != 4*n || s > len(bin) {
				return nil, fmt.Errorf("oipclient: output[%s]: binary_data_size %v for %d values (%d bytes left)", o.Name, size, n, len(bin))
			}
			vals = make([]float32, n)
			for i := range vals {
				vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(bin[4*i:]))
			}
			bin = bin[s:]
		} else {
			var nums []json.Number
			if err := json.Unmarshal(o.Data, &nums); err != nil || len(nums) != n {
				return nil, fmt.Errorf("oipclient: output[%s]: data: want %d numbers: %v", o.Name, n, err)
			}
			vals = make([]float32, n)
			for i, x := range nums {
				f, err := strconv.ParseFloat(string(x), 32)
				if err != nil {
					return nil, fmt.Errorf("oipclient: output[%s][%d]: %w", o.Name, i, err)
				}
				vals[i] = float32(f)
			}
		}
		key := o.Name
		if len(key) > len(oip.PrefixActions) && key[:len(oip.PrefixActions)] == oip.PrefixActions {
			key = key[len(oip.PrefixActions):]
		}
		res.Actions[key], res.Shapes[key] = vals, o.Shape
	}
	if len(bin) != 0 {
		return nil, fmt.Errorf("oipclient: %d bytes of binary data left over", len(bin))
	}
	return res, nil
}
