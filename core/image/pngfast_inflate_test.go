package image

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// pngChunk appends one chunk with its CRC.
func pngChunk(b []byte, typ string, body []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	start := len(b)
	b = append(b, typ...)
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// rawPNG builds a truecolour PNG of w×h from an explicit zlib IDAT stream.
func rawPNG(w, h int, idat []byte) []byte {
	b := append([]byte(nil), pngSig...)
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	b = pngChunk(b, "IHDR", ihdr)
	b = pngChunk(b, "IDAT", idat)
	return pngChunk(b, "IEND", nil)
}

func zlibOf(t *testing.T, p []byte) []byte {
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	_, err := zw.Write(p)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestPNGFastInflateEdges: stream/size mismatches and trailing bytes are
// left to image/png; a huge IHDR with a tiny stream is refused before any
// buffer is allocated.
func TestPNGFastInflateEdges(t *testing.T) {
	var fd pngFast
	var got RGB
	// 2×2, every row filter 0.
	rows := []byte{0, 1, 2, 3, 4, 5, 6, 0, 7, 8, 9, 10, 11, 12}
	require.True(t, fd.decode(&got, rawPNG(2, 2, zlibOf(t, rows))))
	require.Equal(t, []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, got.Pix)
	require.False(t, fd.decode(&got, rawPNG(2, 2, zlibOf(t, rows[:13]))), "short stream")
	require.False(t, fd.decode(&got, rawPNG(2, 2, zlibOf(t, append(rows, 0)))), "long stream")
	require.False(t, fd.decode(&got, rawPNG(2, 2, append(zlibOf(t, rows), 0))), "trailing byte")
	bad := append([]byte(nil), rows...)
	bad[7] = 5 // filter type 5
	require.False(t, fd.decode(&got, rawPNG(2, 2, zlibOf(t, bad))), "bad filter type")

	allocs := testing.AllocsPerRun(3, func() {
		if fd.decode(&got, rawPNG(1<<16, 1<<16, zlibOf(t, rows))) {
			t.Fatal("huge image handled")
		}
	})
	require.Less(t, allocs, 40.0) // the test's own PNG building, not a 12 GiB buffer
	require.Less(t, cap(fd.raw), 1<<20)
}
