package image

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	goimage "image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func pngBytes(t testing.TB, img goimage.Image) []byte {
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

// TestDecodeColourModels checks the RGB conversion of every PNG colour
// model Go's decoder produces (alpha dropped, 16-bit → high byte).
func TestDecodeColourModels(t *testing.T) {
	const w, h = 64, 64
	want := func(x, y int) (uint8, uint8, uint8) { return uint8(x * 4), uint8(y * 4), uint8(x ^ y) }
	rgba := goimage.NewRGBA(goimage.Rect(0, 0, w, h))
	nrgba := goimage.NewNRGBA(goimage.Rect(0, 0, w, h))
	rgba64 := goimage.NewRGBA64(goimage.Rect(0, 0, w, h))
	nrgba64 := goimage.NewNRGBA64(goimage.Rect(0, 0, w, h))
	gray := goimage.NewGray(goimage.Rect(0, 0, w, h))
	gray16 := goimage.NewGray16(goimage.Rect(0, 0, w, h))
	pal := make(color.Palette, 256)
	for i := range pal {
		pal[i] = color.NRGBA{uint8(i), uint8(255 - i), uint8(i * 3), uint8(i)} // with tRNS
	}
	paletted := goimage.NewPaletted(goimage.Rect(0, 0, w, h), pal)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r, g, b := want(x, y)
			rgba.SetRGBA(x, y, color.RGBA{r, g, b, 255})
			nrgba.SetNRGBA(x, y, color.NRGBA{r, g, b, uint8(x + y)}) // translucent
			rgba64.SetRGBA64(x, y, color.RGBA64{uint16(r)<<8 | 0xff, uint16(g) << 8, uint16(b)<<8 | 0x80, 0xffff})
			nrgba64.SetNRGBA64(x, y, color.NRGBA64{uint16(r)<<8 | 0x7f, uint16(g)<<8 | 1, uint16(b) << 8, 0x1234})
			gray.SetGray(x, y, color.Gray{r})
			gray16.SetGray16(x, y, color.Gray16{uint16(r)<<8 | 0xfe})
			paletted.SetColorIndex(x, y, uint8(x+y*w))
		}
	}
	check := func(name string, img goimage.Image, f func(x, y int) (uint8, uint8, uint8)) {
		t.Run(name, func(t *testing.T) {
			var out RGB
			require.NoError(t, Decode(&out, pngBytes(t, img), DefaultLimits))
			require.Equal(t, w, out.W)
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					r, g, b := f(x, y)
					i := (y*w + x) * 3
					require.Equal(t, []uint8{r, g, b}, out.Pix[i:i+3], "(%d,%d)", x, y)
				}
			}
		})
	}
	check("rgba", rgba, want)
	check("nrgba", nrgba, want)
	check("rgba64", rgba64, want)
	check("nrgba64", nrgba64, want)
	check("gray", gray, func(x, y int) (uint8, uint8, uint8) { r, _, _ := want(x, y); return r, r, r })
	check("gray16", gray16, func(x, y int) (uint8, uint8, uint8) { r, _, _ := want(x, y); return r, r, r })
	check("paletted", paletted, func(x, y int) (uint8, uint8, uint8) {
		i := uint8(x + y*w)
		return i, 255 - i, i * 3
	})
}

func TestDecodeJPEG(t *testing.T) {
	img := goimage.NewRGBA(goimage.Rect(0, 0, 96, 64))
	for i := range img.Pix {
		img.Pix[i] = 128
	}
	var buf bytes.Buffer
	require.NoError(t, jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95}))
	var out RGB
	require.NoError(t, Decode(&out, buf.Bytes(), DefaultLimits))
	require.Equal(t, 96, out.W)
	require.Equal(t, 64, out.H)
	for _, v := range out.Pix {
		require.InDelta(t, 128, int(v), 2)
	}
}

func TestDecodeBase64(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(caseADir, "frame_0_exterior_image_1_left_t-15.png"))
	require.NoError(t, err)
	var direct, a, b RGB
	require.NoError(t, Decode(&direct, raw, DefaultLimits))
	s := base64.StdEncoding.EncodeToString(raw)
	scratch, err := DecodeBase64(&a, s, DefaultLimits, nil)
	require.NoError(t, err)
	require.Equal(t, direct, a)
	_, err = DecodeBase64(&b, "data:image/png;base64,"+s, DefaultLimits, scratch)
	require.NoError(t, err)
	require.Equal(t, direct, b)

	_, err = DecodeBase64(&b, "data:text/plain;base64,"+s, DefaultLimits, nil)
	require.ErrorIs(t, err, ErrUndecodable)
	_, err = DecodeBase64(&b, "%%%", DefaultLimits, nil)
	require.ErrorIs(t, err, ErrUndecodable)
	require.ErrorContains(t, err, "base64")
}

func TestDecodeRejectsBeforeDecoding(t *testing.T) {
	// A PNG header claiming 100000×10 with no pixel data: rejected on size,
	// proving the check runs on the header alone.
	full := pngBytes(t, goimage.NewGray(goimage.Rect(0, 0, 100, 10)))
	hdr := append([]byte(nil), full[:33]...) // signature + IHDR
	hdr[16], hdr[17], hdr[18], hdr[19] = 0, 1, 0x86, 0xa0
	binary.BigEndian.PutUint32(hdr[29:], crc32.ChecksumIEEE(hdr[12:29]))
	var out RGB
	err := Decode(&out, hdr, DefaultLimits)
	require.ErrorIs(t, err, ErrFrameSize)
	require.ErrorContains(t, err, "100000x10")

	err = Decode(&out, pngBytes(t, goimage.NewGray(goimage.Rect(0, 0, 64, 63))), DefaultLimits)
	require.ErrorIs(t, err, ErrFrameSize)
	require.ErrorIs(t, Decode(&out, full[:60], Limits{1, 4096}), ErrUndecodable)
}

// TestDecodeRefusesTooFewBytes: a frame whose bytes cannot hold its
// header's size (deflate's 1032:1 for PNG, a bit per 8×8 block for JPEG)
// is refused before a decoder allocates the whole image (a 4096×4096
// header with a few bytes of data cost 16–128 MiB before failing).
func TestDecodeRefusesTooFewBytes(t *testing.T) {
	var jbuf bytes.Buffer
	require.NoError(t, jpeg.Encode(&jbuf, goimage.NewGray(goimage.Rect(0, 0, 4096, 4096)), nil))
	cases := map[string][]byte{
		"png rgba8":      headerOnlyPNG(4096, 4096, 8, 6, 0),
		"png rgba16":     headerOnlyPNG(4096, 4096, 16, 6, 0),
		"png palette":    headerOnlyPNG(4096, 4096, 8, 3, 0),
		"png interlaced": headerOnlyPNG(4096, 4096, 8, 2, 1),
		"jpeg cut":       jbuf.Bytes()[:600],
	}
	lim := Limits{MinSide: 1, MaxSide: 4096}
	for name, data := range cases {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var out RGB
		err := Decode(&out, data, lim)
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, ErrUndecodable, name)
		require.ErrorContains(t, err, "cannot hold 4096x4096 pixels", name)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), name)
	}
	// A real image near the PNG bound still decodes: one colour compresses
	// close to 1032:1.
	var out RGB
	require.NoError(t, Decode(&out, pngBytes(t, goimage.NewNRGBA(goimage.Rect(0, 0, 2048, 2048))), lim))
	require.NoError(t, Decode(&out, jbuf.Bytes(), lim))
}

// headerOnlyPNG is a PNG of the given IHDR whose IDAT is a tiny zlib
// stream (1000 zero bytes): far too little data for the size.
func headerOnlyPNG(w, h uint32, depth, ctype, interlace byte) []byte {
	chunk := func(buf *bytes.Buffer, typ string, body []byte) {
		_ = binary.Write(buf, binary.BigEndian, uint32(len(body)))
		c := append([]byte(typ), body...)
		buf.Write(c)
		_ = binary.Write(buf, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(make([]byte, 1000))
	_ = zw.Flush()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ih := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, w), h)
	chunk(&b, "IHDR", append(ih, depth, ctype, 0, 0, interlace))
	if ctype == 3 {
		chunk(&b, "PLTE", make([]byte, 3))
	}
	chunk(&b, "IDAT", z.Bytes())
	chunk(&b, "IEND", nil)
	return b.Bytes()
}

func TestCheckSameSize(t *testing.T) {
	a, b := NewRGB(320, 180), NewRGB(320, 180)
	require.NoError(t, CheckSameSize("wrist_image_left", []*RGB{a, b}))
	err := CheckSameSize("wrist_image_left", []*RGB{a, NewRGB(640, 360)})
	require.ErrorIs(t, err, ErrSizeMismatch)
	require.EqualError(t, err, "images.wrist_image_left[1]: frames of one camera differ in size: 640x360, earlier frame is 320x180")
}

func FuzzDecode(f *testing.F) {
	f.Add(pngBytes(f, goimage.NewRGBA(goimage.Rect(0, 0, 64, 64))))
	f.Add(pngBytes(f, goimage.NewPaletted(goimage.Rect(0, 0, 70, 64), color.Palette{color.Black, color.White})))
	var jb bytes.Buffer
	_ = jpeg.Encode(&jb, goimage.NewGray(goimage.Rect(0, 0, 64, 80)), nil)
	f.Add(jb.Bytes())
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	for _, n := range []string{"jpeg_420.jpg", "jpeg_422.jpg"} {
		if b, err := os.ReadFile(filepath.Join("../../testdata/image", n)); err == nil {
			f.Add(b)
		}
	}
	rule, err := NewAspectRule(DefaultDROIDChain(), 16, 28, DefaultLimits)
	if err != nil {
		f.Fatal(err)
	}
	lim := Limits{MinSide: 1, MaxSide: 512}
	f.Fuzz(func(t *testing.T, b []byte) {
		var out RGB
		if err := Decode(&out, b, lim); err == nil {
			if len(out.Pix) != out.W*out.H*3 || out.W < 1 || out.H < 1 || out.W > 512 || out.H > 512 {
				t.Fatalf("bad frame %dx%d with %d bytes", out.W, out.H, len(out.Pix))
			}
		}
		_ = rule.DecodeFrame(&out, "cam", 0, b)
		_, _ = DecodeBase64(&out, string(b), lim, nil)
	})
}

// TestJPEGCloseToPillow decodes Pillow-encoded JPEGs (4:2:0, 4:2:2, 4:4:4,
// odd sizes) and compares with Pillow's own decode: within ±3 levels (the
// IDCTs differ), while Go's stock replicating upsampler is far off on 4:2:0.
func TestJPEGCloseToPillow(t *testing.T) {
	for _, name := range []string{"420", "422", "444"} {
		jb, err := os.ReadFile(filepath.Join("../../testdata/image", "jpeg_"+name+".jpg"))
		require.NoError(t, err)
		pb, err := os.ReadFile(filepath.Join("../../testdata/image", "jpeg_"+name+"_pil.png"))
		require.NoError(t, err)
		var got, want RGB
		require.NoError(t, Decode(&got, jb, Limits{1, 4096}))
		require.NoError(t, Decode(&want, pb, Limits{1, 4096}))
		require.Equal(t, [2]int{161, 97}, [2]int{got.W, got.H})
		maxd, n := 0, 0
		for i := range want.Pix {
			d := int(want.Pix[i]) - int(got.Pix[i])
			d = max(d, -d)
			maxd = max(maxd, d)
			if d > 0 {
				n++
			}
		}
		t.Logf("jpeg %s: %d/%d values differ from Pillow, max %d", name, n, len(want.Pix), maxd)
		require.LessOrEqual(t, maxd, 3, name)
		require.Less(t, float64(n)/float64(len(want.Pix)), 0.05, name)
		if name == "420" {
			img, err := jpeg.Decode(bytes.NewReader(jb))
			require.NoError(t, err)
			stock := 0
			for y := 0; y < 97; y++ {
				for x := 0; x < 161; x++ {
					r, g, b, _ := img.At(x, y).RGBA()
					for c, v := range []uint32{r, g, b} {
						d := int(v>>8) - int(want.Pix[(y*161+x)*3+c])
						stock = max(stock, d, -d)
					}
				}
			}
			t.Logf("jpeg 420 with Go's stock conversion: max diff %d", stock)
			require.Greater(t, stock, 3, "stock conversion should be worse")
		}
	}
}
