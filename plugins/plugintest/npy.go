package plugintest

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// NPY is a decoded .npy array (float32/float64/int64, C order), its values
// widened to float64.
type NPY struct {
	Shape []int
	DType string // numpy descr, e.g. "<f4"
	Data  []float64
}

var (
	reDescr = regexp.MustCompile(`'descr':\s*'([^']+)'`)
	reOrder = regexp.MustCompile(`'fortran_order':\s*(True|False)`)
	reShape = regexp.MustCompile(`'shape':\s*\(([^)]*)\)`)
)

// ReadNPY reads a version 1/2 .npy file holding <f4, <f8 or <i8 data in C
// order.
func ReadNPY(path string) (*NPY, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return nil, fmt.Errorf("npy: %s: bad magic", path)
	}
	var hl, off int
	switch b[6] {
	case 1:
		hl, off = int(binary.LittleEndian.Uint16(b[8:])), 10
	case 2, 3:
		hl, off = int(binary.LittleEndian.Uint32(b[8:])), 12
	default:
		return nil, fmt.Errorf("npy: %s: version %d", path, b[6])
	}
	if off+hl > len(b) {
		return nil, fmt.Errorf("npy: %s: header overruns file", path)
	}
	h := string(b[off : off+hl])
	d, o, s := reDescr.FindStringSubmatch(h), reOrder.FindStringSubmatch(h), reShape.FindStringSubmatch(h)
	if d == nil || o == nil || s == nil {
		return nil, fmt.Errorf("npy: %s: header %q", path, h)
	}
	if o[1] != "False" {
		return nil, fmt.Errorf("npy: %s: fortran order", path)
	}
	a := &NPY{DType: d[1]}
	n := 1
	for _, f := range strings.Split(s[1], ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("npy: %s: shape %q", path, s[1])
		}
		a.Shape = append(a.Shape, v)
		n *= v
	}
	data := b[off+hl:]
	var size int
	switch a.DType {
	case "<f4":
		size = 4
	case "<f8", "<i8":
		size = 8
	default:
		return nil, fmt.Errorf("npy: %s: dtype %s not supported", path, a.DType)
	}
	if len(data) != n*size {
		return nil, fmt.Errorf("npy: %s: %d data bytes, shape %v needs %d", path, len(data), a.Shape, n*size)
	}
	a.Data = make([]float64, n)
	for i := range a.Data {
		switch a.DType {
		case "<f4":
			a.Data[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
		case "<f8":
			a.Data[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		case "<i8":
			a.Data[i] = float64(int64(binary.LittleEndian.Uint64(data[8*i:])))
		}
	}
	return a, nil
}

// Float32s returns the data narrowed to float32 (exact for <f4 files).
func (a *NPY) Float32s() []float32 {
	out := make([]float32, len(a.Data))
	for i, v := range a.Data {
		out[i] = float32(v)
	}
	return out
}
