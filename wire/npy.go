package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/gr00tgw/gr00tgw/core/npy"
)

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// MaxNPYHeader bounds a .npy header (bytes). NumPy's own np.load refuses
// headers over 10 000 bytes by default (max_header_size).
const MaxNPYHeader = 10000

// ParseNPY decodes the bytes of a .npy file (format 1.0, 2.0 or 3.0, as
// np.save writes it with allow_pickle=False): a little-endian or one-byte
// numeric or bool dtype, C order. The returned array's Data aliases b.
// Every error wraps ErrArray and names the header field at fault.
func ParseNPY(b []byte) (*Array, error) {
	fail := func(format string, args ...any) (*Array, error) {
		return nil, fmt.Errorf("%w: .npy: %s", ErrArray, fmt.Sprintf(format, args...))
	}
	hd, data, err := npy.Decode(b, MaxNPYHeader)
	if err != nil {
		return fail("%v", err)
	}
	if hd.Fortran {
		return fail("header: fortran_order True (want C order)")
	}
	d, err := normalizeDType(hd.Descr)
	if err != nil {
		return fail("header: descr: %v", err)
	}
	n, err := elements(hd.Shape)
	if err != nil {
		return fail("header: shape: %v", err)
	}
	if size := dtypes[d].size; len(data) != n*size {
		return fail("%d data bytes for %s %s (want %d)", len(data), dtypes[d].name, ShapeString(hd.Shape), n*size)
	}
	return &Array{DType: d, Shape: hd.Shape, Data: data}, nil
}

// AppendNPY appends a as a .npy file (format 1.0, the header padded to a
// multiple of 64 bytes, as NumPy writes it) to dst.
func AppendNPY(dst []byte, a *Array) []byte {
	var h bytes.Buffer
	fmt.Fprintf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", a.DType, ShapeString(a.Shape))
	total := 10 + h.Len() + 1
	pad := (64 - total%64) % 64
	hl := h.Len() + pad + 1
	dst = append(dst, npyMagic...)
	dst = append(dst, 1, 0)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(hl))
	dst = append(dst, h.Bytes()...)
	for range pad {
		dst = append(dst, ' ')
	}
	dst = append(dst, '\n')
	return append(dst, a.Data...)
}
