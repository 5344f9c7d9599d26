package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// RawJSON is a raw JSON value carried through unchanged.
type RawJSON = json.RawMessage

// Array is a 1-D or 2-D float64 array decoded from JSON ([D] or [H][D]),
// stored row-major in Data with its shape in Rows and Cols (Rows is 0 for a
// 1-D array).
type Array struct {
	Rows int       // 0 for 1-D arrays
	Cols int       // D
	Data []float64 // len = Cols, or Rows·Cols
}

// Len returns the number of elements.
func (a Array) Len() int { return len(a.Data) }

// Row returns row i of a 2-D array, or the whole array when it is 1-D.
func (a Array) Row(i int) []float64 {
	if a.Rows == 0 {
		return a.Data
	}
	return a.Data[i*a.Cols : (i+1)*a.Cols]
}

// UnmarshalJSON accepts [D] and [H][D] (rectangular) float arrays.
func (a *Array) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*a = Array{}
		return nil
	}
	var flat []float64
	if err := json.Unmarshal(b, &flat); err == nil {
		*a = Array{Cols: len(flat), Data: flat}
		return nil
	}
	var rows [][]float64
	if err := json.Unmarshal(b, &rows); err != nil {
		return fmt.Errorf("abi: array: want [D] or [H][D] numbers: %w", err)
	}
	out := Array{Rows: len(rows)}
	for i, r := range rows {
		if i == 0 {
			out.Cols = len(r)
			out.Data = make([]float64, 0, len(rows)*len(r))
		} else if len(r) != out.Cols {
			return fmt.Errorf("abi: array: row[%d] has %d values, row[0] has %d", i, len(r), out.Cols)
		}
		out.Data = append(out.Data, r...)
	}
	*a = out
	return nil
}

// MarshalJSON writes the array back in its original nesting.
func (a Array) MarshalJSON() ([]byte, error) {
	if a.Rows == 0 {
		if a.Data == nil {
			return []byte("null"), nil
		}
		return json.Marshal(a.Data)
	}
	rows := make([][]float64, a.Rows)
	for i := range rows {
		rows[i] = a.Row(i)
	}
	return json.Marshal(rows)
}
