package service

import (
	"errors"
	"fmt"

	"github.com/gr00tgw/gr00tgw/wire"
)

// msgpackLimits are the HTTP body's decoding bounds: JSON's depth, the
// body's value bound, and duplicate keys kept (the last one wins, as in
// the JSON parser).
var msgpackLimits = wire.Limits{MaxDepth: maxJSONDepth, MaxElements: maxBodyValues, MaxValues: maxBodyValues, DuplicateKeys: true}

// parseMsgpack decodes exactly one msgpack value with the wire codec
// (wire.Decode: every declared length is checked against the bytes left
// before anything is allocated, so an 8-byte body declaring a
// 2³²-element array costs nothing) into the generic tree the request
// schema walks: map[string]any, []any, string, []byte (bin, copied out of
// the body), int64, uint64 (above math.MaxInt64), float32, float64, bool
// and nil. Extension types and non-str map keys are refused; a body over
// maxBodyValues values wraps errTooManyValues.
func parseMsgpack(b []byte) (any, error) {
	v, err := wire.Decode(b, msgpackLimits)
	if err != nil {
		var de *wire.DecodeError
		switch {
		case errors.As(err, &de) && de.OverLimit:
			return nil, fmt.Errorf("offset %d: %w", de.Offset, errTooManyValues)
		case errors.As(err, &de):
			return nil, fmt.Errorf("offset %d: %s", de.Offset, de.Msg)
		}
		return nil, err
	}
	return schemaTree(v)
}

// schemaTree turns wire.Decode's tree into parseMsgpack's.
func schemaTree(v any) (any, error) {
	switch x := v.(type) {
	case *wire.Map:
		m := make(map[string]any, x.Len())
		for i, k := range x.Keys {
			if k.Bin {
				return nil, fmt.Errorf("map key %q of type bytes, want string", k.Name)
			}
			c, err := schemaTree(x.Values[i])
			if err != nil {
				return nil, err
			}
			m[k.Name] = c
		}
		return m, nil
	case []any:
		for i, e := range x {
			c, err := schemaTree(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	case []byte:
		return append([]byte(nil), x...), nil
	}
	return v, nil
}
