// Package record is the flight recorder (issue 28 points 3 and 5): it
// writes one self-describing file per recorded predict, off the request
// path, into a size-bounded ring directory, and reads those files back
// (for `gr00tgw replay`).
//
// # File format
//
// One file per predict, named <unix-ns, 19 digits>-<seq, 6 digits>.gwrec
// (names sort in write order), holding one MessagePack map — the Record
// type, keys as its msgpack tags:
//
//	format       "gr00tgw.record"   (Format)
//	version      1                  (Version; readers refuse other versions)
//	time_unix_ns int                when the predict was received
//	request_id, session, protocol ("http", "oip", "zmq", "openpi", …)
//	request      {instruction, instruction_redacted, options (map, as sent),
//	              state [{key, steps, values [float64]}],
//	              frames [{camera, step, encoding ("png", "jpeg", "raw", …),
//	                       shape [int] (raw frames), data (bin, the bytes as sent)}]}
//	noise_source "seed" | "random" | "request" | …, seed (uint, absent if none),
//	noise        tensor (the initial noise, when the request sent it or the
//	             server recorded it)
//	embodiment, embodiment_id, plugin {name, version, sha256},
//	checkpoint (digest), backend, model
//	action_pred  tensor, the normalised chunk as denoised ([H, D] float32)
//	actions      [{key, tensor}] the physical actions sent, per group, in
//	             description order (after the safety gate)
//	safety       {policy, clamped, rejected, first {group, step, dim, kind,
//	             limit, value}}
//	timing_ms    {stage: milliseconds}
//	error        the request's error message, if it failed
//
// A tensor is {dtype ("float32", "float64", "uint8", "int64"), shape [int],
// data (bin: little-endian, row-major, exactly prod(shape)·size(dtype)
// bytes)}, so values round-trip bit for bit. Files are written to a
// temporary name (".tmp-…", 0600) and renamed into place: a reader never
// sees a half-written file.
package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// Format and Version identify the file format.
const (
	Format  = "gr00tgw.record"
	Version = 1
	// Ext is the extension of a complete record file.
	Ext = ".gwrec"
	// MaxFileBytes is the largest file Read accepts.
	MaxFileBytes = 256 << 20
)

// Record is one recorded predict. See the package doc for its encoding.
type Record struct {
	Format     string `msgpack:"format"`
	Version    int    `msgpack:"version"`
	TimeUnixNS int64  `msgpack:"time_unix_ns"`
	RequestID  string `msgpack:"request_id,omitempty"`
	Session    string `msgpack:"session,omitempty"`
	Protocol   string `msgpack:"protocol"`

	Request Request `msgpack:"request"`

	NoiseSource string  `msgpack:"noise_source,omitempty"`
	Seed        *uint64 `msgpack:"seed,omitempty"`
	Noise       *Tensor `msgpack:"noise,omitempty"`

	Embodiment   string `msgpack:"embodiment"`
	EmbodimentID int    `msgpack:"embodiment_id"`
	Plugin       Plugin `msgpack:"plugin"`
	Checkpoint   string `msgpack:"checkpoint,omitempty"`
	Backend      string `msgpack:"backend,omitempty"`
	Model        string `msgpack:"model,omitempty"`

	ActionPred *Tensor       `msgpack:"action_pred,omitempty"`
	Actions    []ActionGroup `msgpack:"actions,omitempty"`
	Safety     *Safety       `msgpack:"safety,omitempty"`
	TimingMS   Timings       `msgpack:"timing_ms,omitempty"`
	Error      string        `msgpack:"error,omitempty"`
}

// Timings are a predict's stage durations in milliseconds, by stage name.
// They are encoded with their keys sorted, so that a record's bytes do not
// depend on map order.
type Timings map[string]float64

// EncodeMsgpack writes the map with sorted keys.
func (t Timings) EncodeMsgpack(enc *msgpack.Encoder) error {
	if t == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeMapLen(len(t)); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := enc.EncodeFloat64(t[k]); err != nil {
			return err
		}
	}
	return nil
}

// Request is the predict request as received.
type Request struct {
	Instruction string `msgpack:"instruction"`
	// InstructionRedacted is true when the recorder dropped the
	// instruction (Options.RedactInstruction).
	InstructionRedacted bool           `msgpack:"instruction_redacted,omitempty"`
	Options             map[string]any `msgpack:"options,omitempty"`
	State               []State        `msgpack:"state"`
	Frames              []Frame        `msgpack:"frames"`
}

// State is one raw state group as sent: Steps 0 for a flat [D] list, else
// the number of timesteps (Values row-major).
type State struct {
	Key    string    `msgpack:"key"`
	Steps  int       `msgpack:"steps"`
	Values []float64 `msgpack:"values"`
}

// Frame is one camera frame, the bytes as the client sent them (no
// re-encode): an image file (Encoding "png", "jpeg", …), or raw pixels
// (Encoding "raw", Shape [H, W, C]).
type Frame struct {
	Camera   string `msgpack:"camera"`
	Step     int    `msgpack:"step"`
	Encoding string `msgpack:"encoding"`
	Shape    []int  `msgpack:"shape,omitempty"`
	Data     []byte `msgpack:"data"`
}

// Plugin names the plugin that served the predict.
type Plugin struct {
	Name    string `msgpack:"name"`
	Version string `msgpack:"version"`
	SHA256  string `msgpack:"sha256"`
}

// ActionGroup is one group of the physical actions sent.
type ActionGroup struct {
	Key    string `msgpack:"key"`
	Tensor Tensor `msgpack:"tensor"`
}

// Safety is the safety gate's verdict on the predict.
type Safety struct {
	Policy   string     `msgpack:"policy"`
	Clamped  int        `msgpack:"clamped"`
	Rejected bool       `msgpack:"rejected"`
	First    *Violation `msgpack:"first,omitempty"`
}

// Violation is the first value outside the limits (safety.Violation).
type Violation struct {
	Group string  `msgpack:"group"`
	Step  int     `msgpack:"step"`
	Dim   int     `msgpack:"dim"`
	Kind  string  `msgpack:"kind"`
	Limit float64 `msgpack:"limit"`
	Value float64 `msgpack:"value"`
}

// Tensor is a dense little-endian row-major array.
type Tensor struct {
	DType string `msgpack:"dtype"`
	Shape []int  `msgpack:"shape"`
	Data  []byte `msgpack:"data"`
}

var dtypeSize = map[string]int{"float32": 4, "float64": 8, "uint8": 1, "int64": 8}

// Float32s makes a float32 tensor of shape from v (copied).
func Float32s(v []float32, shape ...int) Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Tensor{DType: "float32", Shape: slices.Clone(shape), Data: b}
}

// Float32s returns a float32 tensor's values (an error for another dtype).
func (t *Tensor) Float32s() ([]float32, error) {
	if t.DType != "float32" {
		return nil, fmt.Errorf("record: tensor dtype %s, want float32", t.DType)
	}
	out := make([]float32, len(t.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// check validates dtype, shape and data length.
func (t *Tensor) check(name string) error {
	size, ok := dtypeSize[t.DType]
	if !ok {
		return fmt.Errorf("record: %s: dtype %q (want float32, float64, uint8 or int64)", name, t.DType)
	}
	if len(t.Shape) > 8 {
		return fmt.Errorf("record: %s: rank %d > 8", name, len(t.Shape))
	}
	n := int64(size)
	for _, d := range t.Shape {
		if d < 0 || int64(d) > MaxFileBytes {
			return fmt.Errorf("record: %s: shape %v", name, t.Shape)
		}
		n *= int64(d)
		if n > MaxFileBytes {
			return fmt.Errorf("record: %s: shape %v larger than a file", name, t.Shape)
		}
	}
	if int64(len(t.Data)) != n {
		return fmt.Errorf("record: %s: %d data bytes, shape %v of %s needs %d", name, len(t.Data), t.Shape, t.DType, n)
	}
	return nil
}

// Validate checks the record's format, version and tensors.
func (r *Record) Validate() error {
	switch {
	case r.Format != Format:
		return fmt.Errorf("record: format %q, want %q", r.Format, Format)
	case r.Version != Version:
		return fmt.Errorf("record: version %d, this reader reads %d", r.Version, Version)
	}
	if r.Noise != nil {
		if err := r.Noise.check("noise"); err != nil {
			return err
		}
	}
	if r.ActionPred != nil {
		if err := r.ActionPred.check("action_pred"); err != nil {
			return err
		}
	}
	for i := range r.Actions {
		if err := r.Actions[i].Tensor.check("actions." + r.Actions[i].Key); err != nil {
			return err
		}
	}
	for i, s := range r.Request.State {
		if rows := max(s.Steps, 1); s.Steps < 0 || len(s.Values)%rows != 0 {
			return fmt.Errorf("record: request.state[%d] %s: %d values in %d steps", i, s.Key, len(s.Values), s.Steps)
		}
	}
	return nil
}

// Marshal encodes r (Format and Version set to this package's).
func Marshal(r *Record) ([]byte, error) {
	r.Format, r.Version = Format, Version
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true) // deterministic files
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("record: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes and validates one record file's bytes. Unknown keys
// are refused.
func Unmarshal(b []byte) (*Record, error) {
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("record: %d bytes > %d", len(b), MaxFileBytes)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(true)
	var r Record
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("record: decode: %w", err)
	}
	if _, err := dec.PeekCode(); !errors.Is(err, io.EOF) {
		return nil, errors.New("record: trailing bytes after the record")
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// ReadFile reads and validates one record file.
func ReadFile(path string) (*Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("record: %s: %w", path, err)
	}
	r, err := Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return r, nil
}

// List returns the record files in dir (complete files only, *.gwrec), in
// write order.
func List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && strings.HasSuffix(n, Ext) && !strings.HasPrefix(n, ".") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	slices.Sort(out)
	return out, nil
}
