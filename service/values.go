package service

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The request schema's values: numbers of every JSON and msgpack width,
// state rows, raw frames, the seed, noise and RTC matrices and options.
// Wrong types are schema errors (422); values outside the contract are
// validation errors (400); both name the field.

// parseStateRows accepts [D numbers] or [[D numbers]] (one time step).
func parseStateRows(list []any, field string) ([]float64, error) {
	if len(list) > 0 {
		if inner, ok := list[0].([]any); ok {
			if len(list) != 1 {
				return nil, invalid(field, "%s: expected one time step, got %d rows", field, len(list))
			}
			list = inner
			field += "[0]"
		}
	}
	vals := make([]float64, len(list))
	for i, x := range list {
		f, err := number(x, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		vals[i] = f
	}
	return vals, nil
}

// number converts a JSON number (json.Number) or a msgpack numeric value to
// float64. Wrong types are schema errors (422); values JSON cannot carry as
// finite doubles (1e400) are validation errors (400).
// plainNumber is number's common case without an error path: a JSON
// number that parses, or a msgpack float.
func plainNumber(x any) (float64, bool) {
	switch n := x.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	}
	return 0, false
}

func number(x any, field string) (float64, error) {
	switch n := x.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return 0, invalid(field, "%s: %s is not a finite number", field, n)
		}
		return f, nil
	case float64:
		return n, nil
	case float32:
		return float64(n), nil
	case int8:
		return float64(n), nil
	case int16:
		return float64(n), nil
	case int32:
		return float64(n), nil
	case int64:
		return float64(n), nil
	case int:
		return float64(n), nil
	case uint8:
		return float64(n), nil
	case uint16:
		return float64(n), nil
	case uint32:
		return float64(n), nil
	case uint64:
		return float64(n), nil
	}
	return 0, schemaError(field, "%s: expected a number, got %s", field, typeName(x))
}

// parseRawFrame reads a raw frame (msgpack): {"data": bin (uint8 RGB,
// row-major), "shape": [H, W, 3], "dtype": "uint8" (optional)}.
func parseRawFrame(m map[string]any, field string) (*RawFrame, error) {
	for k := range m {
		if k != "data" && k != "shape" && k != "dtype" {
			return nil, schemaError(field+"."+k, "%s: unknown field %q in a raw frame (want data, shape, dtype)", field, k)
		}
	}
	data, ok := m["data"].([]byte)
	if !ok {
		return nil, schemaError(field+".data", "%s.data: expected bin (uint8 RGB bytes), got %s", field, typeName(m["data"]))
	}
	if dt, ok := m["dtype"]; ok && dt != "uint8" && dt != "|u1" {
		return nil, invalid(field+".dtype", "%s.dtype: %v, want uint8", field, dt)
	}
	shape, ok := m["shape"].([]any)
	if !ok || len(shape) != 3 {
		return nil, schemaError(field+".shape", "%s.shape: expected [height, width, 3]", field)
	}
	var dims [3]int
	for i, x := range shape {
		f, ok := plainInt(x)
		if !ok || f <= 0 || f > 1<<16 {
			return nil, invalid(field+".shape", "%s.shape: %v is not [height, width, 3] with positive sides", field, shape)
		}
		dims[i] = f
	}
	if dims[2] != 3 {
		return nil, invalid(field+".shape", "%s.shape: %v: %d channels, want 3 (RGB)", field, dims, dims[2])
	}
	if len(data) != dims[0]*dims[1]*3 {
		return nil, invalid(field+".data", "%s.data: %d bytes for shape %v (want %d)", field, len(data), dims, dims[0]*dims[1]*3)
	}
	return &RawFrame{Pix: data, Height: dims[0], Width: dims[1]}, nil
}

// plainInt reads a non-negative integer of any msgpack or JSON width.
func plainInt(x any) (int, bool) {
	switch n := x.(type) {
	case int64:
		return int(n), n >= 0 && n <= 1<<31
	case uint64:
		return int(n), n <= 1<<31
	case int:
		return n, n >= 0
	case int8, int16, int32, uint8, uint16, uint32:
		v, _ := number(n, "")
		return int(v), v >= 0
	case json.Number:
		v, err := strconv.Atoi(string(n))
		return v, err == nil && v >= 0
	}
	return 0, false
}

func parseSeed(x any) (uint64, error) {
	switch n := x.(type) {
	case json.Number:
		s := string(n)
		if strings.ContainsAny(s, ".eE") {
			return 0, schemaError(fieldSeed, "seed: expected an integer, got %s", s)
		}
		if strings.HasPrefix(s, "-") {
			return 0, invalid(fieldSeed, "seed: %s is negative (must be >= 0)", s)
		}
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, invalid(fieldSeed, "seed: %s does not fit in 64 bits", s)
		}
		return u, nil
	case int8, int16, int32, int64, int:
		var i int64
		switch v := n.(type) {
		case int8:
			i = int64(v)
		case int16:
			i = int64(v)
		case int32:
			i = int64(v)
		case int64:
			i = v
		case int:
			i = int64(v)
		}
		if i < 0 {
			return 0, invalid(fieldSeed, "seed: %d is negative (must be >= 0)", i)
		}
		return uint64(i), nil
	case uint8:
		return uint64(n), nil
	case uint16:
		return uint64(n), nil
	case uint32:
		return uint64(n), nil
	case uint64:
		return n, nil
	}
	return 0, schemaError(fieldSeed, "seed: expected an integer, got %s", typeName(x))
}

// parseNoise accepts [H][D] or [1][H][D] numbers; the shape is checked
// against the model later (validate).
func parseNoise(r *Request, x any) error {
	vals, shape, err := parseMatrix(x, fieldNoise)
	if err != nil {
		return err
	}
	r.Noise, r.NoiseShape = vals, shape
	return nil
}

// parseOptions reads a request's options: the RTC keys under upstream's
// names, integers for the steps, a number for the ramp rate; any other key
// is refused, naming it.
func parseOptions(x any) (*RTCOptions, error) {
	m, err := asObject(x, fieldOptions)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	o := &RTCOptions{}
	for _, k := range keys {
		v, field := m[k], fieldOptions+"."+k
		switch k {
		case optHorizon, optOverlap, optFrozen:
			if a, ok := v.(string); ok && a == optAuto && k != optHorizon {
				if k == optOverlap {
					o.OverlapAuto = true
				} else {
					o.FrozenAuto = true
				}
				continue
			}
			n, err := integer(v, field)
			if err != nil {
				return nil, err
			}
			switch k {
			case optHorizon:
				o.Horizon = &n
			case optOverlap:
				o.Overlap = &n
			default:
				o.Frozen = &n
			}
		case optRampRate:
			f, err := number(v, field)
			if err != nil {
				return nil, err
			}
			o.RampRate = &f
		default:
			return nil, schemaError(field, "options: unknown key %q (want %s)", k, strings.Join(rtcOptionKeys, ", "))
		}
	}
	return o, nil
}

// integer reads an integer option (JSON without fraction or exponent, a
// msgpack int) that fits an int.
func integer(x any, field string) (int, error) {
	if n, ok := x.(json.Number); ok {
		if i, err := strconv.Atoi(string(n)); err == nil {
			return i, nil
		}
		return 0, schemaError(field, "%s: expected an integer, got %s", field, n)
	}
	f, err := number(x, field)
	if err != nil {
		return 0, err
	}
	switch x.(type) {
	case float32, float64:
		return 0, schemaError(field, "%s: expected an integer, got %v", field, f)
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return 0, schemaError(field, "%s: expected an integer, got %v", field, f)
	}
	return int(f), nil
}

// parseMatrix accepts [H][D] or [1][H][D] finite float32 numbers (field
// names the body key in errors) and returns them flattened with the shape
// as sent.
func parseMatrix(x any, field string) ([]float32, []int, error) {
	rows, ok := x.([]any)
	if !ok {
		return nil, nil, schemaError(field, "%s: expected an array, got %s", field, typeName(x))
	}
	var shape []int
	prefix := field // the JSON path of the [H][D] rows, for error fields
	if len(rows) == 1 {
		if inner, ok := rows[0].([]any); ok && len(inner) > 0 {
			if _, ok := inner[0].([]any); ok {
				rows = inner
				shape = []int{1}
				prefix = field + "[0]"
			}
		}
	}
	if len(rows) == 0 {
		return nil, nil, invalid(field, "%s: empty", field)
	}
	first, ok := rows[0].([]any)
	if !ok {
		what := "rows"
		if field == fieldNoise {
			what = "horizon"
		}
		return nil, nil, invalid(field, "%s: expected [%s, action_dim] or [1, %s, action_dim], got a flat array", field, what, what)
	}
	d := len(first)
	shape = append(shape, len(rows), d)
	out := make([]float32, 0, len(rows)*d)
	for i, rv := range rows {
		row, ok := rv.([]any)
		if !ok {
			return nil, nil, schemaError(fmt.Sprintf("%s[%d]", prefix, i), "%s[%d]: expected an array, got %s", prefix, i, typeName(rv))
		}
		if len(row) != d {
			return nil, nil, invalid(field, "%s: ragged: row %d has %d values, row 0 has %d", field, i, len(row), d)
		}
		for j, v := range row {
			// The field name is formatted only on failure: a DROID noise
			// array has 5280 values.
			f, ok := plainNumber(v)
			if !ok {
				var err error
				if f, err = number(v, fmt.Sprintf("%s[%d][%d]", prefix, i, j)); err != nil {
					return nil, nil, err
				}
			}
			f32 := float32(f)
			if math.IsNaN(f) || math.IsInf(float64(f32), 0) {
				return nil, nil, invalid(field, "%s[%d][%d]: %v is not a finite float32", prefix, i, j, f)
			}
			out = append(out, f32)
		}
	}
	return out, shape, nil
}
