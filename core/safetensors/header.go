// Package safetensors reads Hugging Face safetensors checkpoints: single
// files and sharded sets described by model.safetensors.index.json. Files
// are memory-mapped read-only; headers are validated strictly before any
// tensor is exposed, so a truncated or malformed file fails at Open with one
// precise error instead of at first use.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// MaxHeaderSize bounds the JSON header, as the reference implementation does.
const MaxHeaderSize = 100_000_000

// DType names a tensor element type as spelled in the header ("BF16", "F32", …).
type DType string

// Element types this package knows the width of. Only BF16, F16 and F32
// can be widened to float32 by Set.Float32; the others can be read as raw bytes.
const (
	BOOL DType = "BOOL"
	U8   DType = "U8"
	I8   DType = "I8"
	F8E5 DType = "F8_E5M2"
	F8E4 DType = "F8_E4M3"
	I16  DType = "I16"
	U16  DType = "U16"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I32  DType = "I32"
	U32  DType = "U32"
	F32  DType = "F32"
	F64  DType = "F64"
	I64  DType = "I64"
	U64  DType = "U64"
)

var dtypeBits = map[DType]int{
	BOOL: 8, U8: 8, I8: 8, F8E5: 8, F8E4: 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
	I16: 16, U16: 16, F16: 16, BF16: 16,
	I32: 32, U32: 32, F32: 32,
	F64: 64, I64: 64, U64: 64, "C64": 64,
}

// Bits reports the element width of d in bits, or 0 for an unknown dtype.
func (d DType) Bits() int { return dtypeBits[d] }

// TensorInfo describes one tensor of a header. Begin and End are byte
// offsets relative to the start of the file's data buffer.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
	Begin int64
	End   int64
	// File is the path of the file holding the tensor (set by Set).
	File string
}

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int64 { return NumElements(t.Shape) }

// NumElements is the product of shape (1 for a scalar, an empty shape).
func NumElements(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// Header is a parsed and validated safetensors header.
type Header struct {
	// Tensors is sorted by Begin.
	Tensors []TensorInfo
	// Metadata is the optional "__metadata__" map.
	Metadata map[string]string
	// DataStart is the file offset of the data buffer (8 + header length).
	DataStart int64
}

// ErrHeader matches (errors.Is) every header validation error.
var ErrHeader = errors.New("safetensors: invalid header")

// HeaderError is a header validation failure. File is empty when the header
// was parsed from memory.
type HeaderError struct {
	File string
	Msg  string
}

func (e *HeaderError) Error() string {
	if e.File != "" {
		return "safetensors: file[" + e.File + "]: invalid header: " + e.Msg
	}
	return "safetensors: invalid header: " + e.Msg
}

// Is reports whether target is ErrHeader.
func (e *HeaderError) Is(target error) bool { return target == ErrHeader }

func headerErr(format string, a ...any) error {
	return &HeaderError{Msg: fmt.Sprintf(format, a...)}
}

type rawTensor struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// ParseHeader validates the first bytes of a safetensors file. prefix must
// hold at least the 8-byte length and the whole JSON header; fileSize is the
// size of the whole file, used to check that the data buffer is exactly
// covered by the tensors.
func ParseHeader(prefix []byte, fileSize int64) (*Header, error) {
	if len(prefix) < 8 {
		return nil, headerErr("file is %d bytes, shorter than the 8-byte length prefix", len(prefix))
	}
	n := binary.LittleEndian.Uint64(prefix[:8])
	if n > MaxHeaderSize {
		return nil, headerErr("header length %d exceeds %d", n, MaxHeaderSize)
	}
	if int64(n) > fileSize-8 {
		return nil, headerErr("header length %d runs past the end of a %d-byte file (truncated?)", n, fileSize)
	}
	if uint64(len(prefix)-8) < n {
		return nil, headerErr("need %d header bytes, have %d", n, len(prefix)-8)
	}
	js := prefix[8 : 8+n]
	if len(bytes.TrimSpace(js)) == 0 || bytes.TrimSpace(js)[0] != '{' {
		return nil, headerErr("header is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, headerErr("header JSON: %v", err)
	}
	// Only padding may follow (the writers pad with spaces); dec.More is
	// false before a stray '}' or ']', so look at the bytes themselves.
	if len(bytes.TrimSpace(js[dec.InputOffset():])) > 0 {
		return nil, headerErr("trailing data after the header JSON object")
	}
	h := &Header{DataStart: 8 + int64(n)}
	dataLen := fileSize - h.DataStart
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &h.Metadata); err != nil {
				return nil, headerErr("__metadata__ must map strings to strings: %v", err)
			}
			continue
		}
		var rt rawTensor
		d := json.NewDecoder(bytes.NewReader(msg))
		d.DisallowUnknownFields()
		if err := d.Decode(&rt); err != nil {
			return nil, headerErr("tensor[%s]: %v", name, err)
		}
		if rt.DType == nil || rt.Shape == nil || rt.DataOffsets == nil {
			return nil, headerErr("tensor[%s]: needs dtype, shape and data_offsets", name)
		}
		dt := DType(*rt.DType)
		bits := dt.Bits()
		if bits == 0 {
			return nil, headerErr("tensor[%s]: unknown dtype %q", name, *rt.DType)
		}
		if len(*rt.DataOffsets) != 2 {
			return nil, headerErr("tensor[%s]: data_offsets must hold 2 numbers, has %d", name, len(*rt.DataOffsets))
		}
		begin, end := (*rt.DataOffsets)[0], (*rt.DataOffsets)[1]
		if begin < 0 || end < begin {
			return nil, headerErr("tensor[%s]: bad data_offsets [%d, %d]", name, begin, end)
		}
		shape := make([]int, len(*rt.Shape))
		elems := uint64(1)
		for i, d := range *rt.Shape {
			if d < 0 || d > math.MaxInt32 {
				return nil, headerErr("tensor[%s]: bad dimension %d", name, d)
			}
			shape[i] = int(d)
			ovf, prod := mulOverflow(elems, uint64(d))
			if ovf {
				return nil, headerErr("tensor[%s]: shape %v overflows", name, *rt.Shape)
			}
			elems = prod
		}
		ovf, nbits := mulOverflow(elems, uint64(bits))
		if ovf || nbits%8 != 0 {
			return nil, headerErr("tensor[%s]: shape %v of %s is not a whole number of bytes", name, shape, dt)
		}
		if want := int64(nbits / 8); end-begin != want {
			return nil, headerErr("tensor[%s]: shape %v of %s needs %d bytes, data_offsets give %d", name, shape, dt, want, end-begin)
		}
		h.Tensors = append(h.Tensors, TensorInfo{Name: name, DType: dt, Shape: shape, Begin: begin, End: end})
	}
	sort.Slice(h.Tensors, func(i, j int) bool {
		if h.Tensors[i].Begin != h.Tensors[j].Begin {
			return h.Tensors[i].Begin < h.Tensors[j].Begin
		}
		return h.Tensors[i].End < h.Tensors[j].End
	})
	var pos int64
	for _, t := range h.Tensors {
		if t.Begin != pos {
			if t.Begin < pos {
				return nil, headerErr("tensor[%s]: data_offsets [%d, %d] overlap the previous tensor (ends at %d)", t.Name, t.Begin, t.End, pos)
			}
			return nil, headerErr("tensor[%s]: gap before data_offsets [%d, %d] (previous tensor ends at %d)", t.Name, t.Begin, t.End, pos)
		}
		pos = t.End
	}
	if pos != dataLen {
		if pos > dataLen {
			return nil, headerErr("tensors need %d data bytes, file has %d (truncated?)", pos, dataLen)
		}
		return nil, headerErr("tensors cover %d of %d data bytes", pos, dataLen)
	}
	return h, nil
}

// mulOverflow returns (overflowed, a*b).
func mulOverflow(a, b uint64) (bool, uint64) {
	if a == 0 || b == 0 {
		return false, 0
	}
	c := a * b
	return c/b != a, c
}

// Encode writes a safetensors file image holding the given tensors in order,
// with the header padded to a multiple of 8 bytes. It is used by tests and
// by tools that generate checkpoints; data[i] must match infos[i]'s size.
func Encode(infos []TensorInfo, data [][]byte, metadata map[string]string) ([]byte, error) {
	if len(infos) != len(data) {
		return nil, fmt.Errorf("safetensors: encode: %d infos, %d data blobs", len(infos), len(data))
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		mb, err := json.Marshal(metadata)
		if err != nil {
			return nil, fmt.Errorf("safetensors: encode metadata: %w", err)
		}
		buf.WriteString(`"__metadata__":`)
		buf.Write(mb)
		first = false
	}
	var off int64
	for i, t := range infos {
		want := t.NumElements() * int64(t.DType.Bits()) / 8
		if int64(len(data[i])) != want {
			return nil, fmt.Errorf("safetensors: encode tensor[%s]: %d bytes, shape needs %d", t.Name, len(data[i]), want)
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		nb, _ := json.Marshal(t.Name)
		buf.Write(nb)
		buf.WriteString(`:{"dtype":"` + string(t.DType) + `","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&buf, `],"data_offsets":[%d,%d]}`, off, off+want)
		off += want
	}
	buf.WriteByte('}')
	for buf.Len()%8 != 0 {
		buf.WriteByte(' ')
	}
	out := make([]byte, 8, 8+buf.Len()+int(off))
	binary.LittleEndian.PutUint64(out, uint64(buf.Len()))
	out = append(out, buf.Bytes()...)
	for _, d := range data {
		out = append(out, d...)
	}
	return out, nil
}
