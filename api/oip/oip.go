// Package oip holds the Open Inference Protocol v2 (KServe V2, Triton's
// HTTP/REST API) vocabulary gr00tgw's server and its clients share: the
// input, output and parameter names, the tensor data types, the binary
// data extension's header, and the response object. It has no behaviour
// and imports nothing of the module, so a client can speak the protocol
// without linking the server (frontend/oip serves it, client/oipclient
// sends it).
package oip

import "encoding/json"

// HeaderContentLength is the binary data extension's header: the length
// of the JSON object at the start of a body that binary tensor data
// follows.
const HeaderContentLength = "Inference-Header-Content-Length"

// Input and output names. Cameras and state groups are named as in the
// model metadata (GET /v2/models/{name}): images.<camera>, state.<group>;
// outputs actions.<group>.
const (
	PrefixImages      = "images."
	PrefixState       = "state."
	PrefixActions     = "actions."
	InputInstruction  = "instruction"
	InputSeed         = "seed"
	InputNoise        = "noise"
	ParamBinarySize   = "binary_data_size"
	ParamBinary       = "binary_data"
	ParamBinaryOutput = "binary_data_output"
)

// Tensor data types gr00tgw's endpoint reads and writes.
const (
	TypeUINT8  = "UINT8"
	TypeFP32   = "FP32"
	TypeINT64  = "INT64"
	TypeUINT64 = "UINT64"
	TypeBYTES  = "BYTES"
)

// Response is the inference response object.
type Response struct {
	ModelName    string         `json:"model_name"`
	ModelVersion string         `json:"model_version,omitempty"`
	ID           *string        `json:"id,omitempty"`
	Parameters   map[string]any `json:"parameters,omitempty"`
	Outputs      []Tensor       `json:"outputs"`
}

// Tensor is one response output (or, for clients, a request input). Data
// is the JSON array of the values; it is empty when they travel as binary
// data (Parameters[ParamBinarySize] then gives their length).
type Tensor struct {
	Name       string          `json:"name"`
	Datatype   string          `json:"datatype"`
	Shape      []int           `json:"shape"`
	Parameters map[string]any  `json:"parameters,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
}
