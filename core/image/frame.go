// Package image turns camera frames into the tensors GR00T N1.7's Qwen3-VL
// vision tower consumes, bit for bit as the Python reference does:
// PNG/JPEG decoding to 8-bit RGB, the GR00T eval chain (albumentations
// SmallestMaxSize with OpenCV 4.6 INTER_AREA, FractionalCenterCrop,
// optional LetterBoxPad), Qwen smart_resize with torch's uint8 antialiased
// bicubic, and the fused rescale/normalise + 2×2-merge patch flattening
// into pixel_values rows.
//
// Frames are validated before their pixels are decoded (side bounds,
// aspect acceptance) and every failure is a typed error that names the
// request field (see FrameError).
//
// Resizers and Workspaces own scratch memory and are not safe for
// concurrent use; Pipeline hands out one Workspace per call and is.
package image

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	goimage "image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"sync"

	"github.com/gr00tgw/gr00tgw/core/b64"
)

// RGB is an 8-bit RGB frame, rows top to bottom, pixels interleaved
// R,G,B (HWC); len(Pix) == W*H*3. The zero value is an empty frame.
type RGB struct {
	W, H int
	Pix  []uint8
}

// NewRGB allocates a black w×h frame.
func NewRGB(w, h int) *RGB { return &RGB{W: w, H: h, Pix: make([]uint8, w*h*3)} }

// setSize resizes f to w×h, reusing Pix's capacity.
func (f *RGB) setSize(w, h int) {
	f.W, f.H = w, h
	n := w * h * 3
	if cap(f.Pix) < n {
		f.Pix = make([]uint8, n)
	}
	f.Pix = f.Pix[:n]
}

// Sentinel errors callers branch on; the gateway maps all of them to HTTP
// 400. They are wrapped (errors.Is) by FrameError and by the decoders.
var (
	// ErrUndecodable: the bytes are not a PNG/JPEG we can decode (or not
	// valid base64).
	ErrUndecodable = errors.New("undecodable image")
	// ErrFrameSize: a side is outside [Limits.MinSide, Limits.MaxSide].
	ErrFrameSize = errors.New("frame size out of range")
	// ErrAspect: the frame's chain does not land on the layout's patch grid.
	ErrAspect = errors.New("frame aspect ratio not accepted")
	// ErrSizeMismatch: frames of one camera differ in size.
	ErrSizeMismatch = errors.New("frames of one camera differ in size")
)

// FrameError attributes an error to one frame of one camera; its message is
// "images.<camera>[<index>]: <err>", the request field path. Index < 0
// omits the brackets.
type FrameError struct {
	Camera string
	Index  int
	Err    error // wraps one of the sentinels above
}

// Error formats the field path and the cause.
func (e *FrameError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("images.%s: %v", e.Camera, e.Err)
	}
	return fmt.Sprintf("images.%s[%d]: %v", e.Camera, e.Index, e.Err)
}

// Unwrap returns the cause, so errors.Is matches the sentinels.
func (e *FrameError) Unwrap() error { return e.Err }

// Limits bounds frame sides in pixels (inclusive).
type Limits struct{ MinSide, MaxSide int }

// DefaultLimits is the reference server's frame rule: each side in
// [64, 4096].
var DefaultLimits = Limits{MinSide: 64, MaxSide: 4096}

// Check returns an error wrapping ErrFrameSize when w or h is outside the
// limits.
func (l Limits) Check(w, h int) error {
	if w < l.MinSide || h < l.MinSide || w > l.MaxSide || h > l.MaxSide {
		return fmt.Errorf("%w: %dx%d (width x height), each side must be in [%d, %d]", ErrFrameSize, w, h, l.MinSide, l.MaxSide)
	}
	return nil
}

// Config reads the format and size of an encoded PNG or JPEG from its
// header without decoding pixels.
func Config(data []byte) (format string, w, h int, err error) {
	if w, h, ok := pngHeaderSize(data); ok {
		return "png", w, h, nil
	}
	cfg, format, err := goimage.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return "", 0, 0, fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	return format, cfg.Width, cfg.Height, nil
}

// Decode decodes a PNG or JPEG into dst (reusing dst.Pix when large
// enough), after checking the header's size against lim. Colour models
// become 8-bit RGB:
//   - 8-bit RGB(A), gray(+alpha), paletted (+tRNS): the stored colour
//     channels; alpha is dropped without compositing, as PIL
//     Image.convert("RGB") and cv2.imread(IMREAD_COLOR) do.
//   - 16-bit PNG: the high byte of each sample (v >> 8), as cv2.imread
//     and PIL's "RGB;16B" unpacker do (alpha dropped).
//   - JPEG YCbCr 4:4:4 / 4:2:2 / 4:2:0: Go's image/jpeg planes, then
//     libjpeg's fancy chroma upsampling and fixed-point colour tables (as
//     PIL and cv2 decode). Go's IDCT differs from libjpeg's, so results are
//     within ±3 levels of PIL (≈2 % of values differ), not bit-identical.
//     Other subsamplings and CMYK use Go's own conversion.
//   - PNG RGB/RGBA 8-bit non-interlaced takes a fast path (see pngFast)
//     that yields the same pixels as image/png.
//
// Errors wrap ErrUndecodable or ErrFrameSize; after an error dst's size and
// content are unspecified. Safe for concurrent use with distinct dst.
func Decode(dst *RGB, data []byte, lim Limits) error {
	format, w, h, err := Config(data)
	if err != nil {
		return err
	}
	if err := lim.Check(w, h); err != nil {
		return err
	}
	if format == "png" {
		fd := pngPool.Get().(*pngFast)
		ok := fd.decode(dst, data)
		pngPool.Put(fd)
		if ok {
			return nil
		}
	}
	if err := fitsEncoded(format, data, w, h); err != nil {
		return err
	}
	var img goimage.Image
	switch format {
	case "png":
		img, err = png.Decode(bytes.NewReader(data))
	case "jpeg":
		img, err = jpeg.Decode(bytes.NewReader(data))
	default:
		return fmt.Errorf("%w: format %q, want png or jpeg", ErrUndecodable, format)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUndecodable, format, err)
	}
	b := img.Bounds()
	if b.Dx() != w || b.Dy() != h {
		return fmt.Errorf("%w: %s: decoded %dx%d, header says %dx%d", ErrUndecodable, format, b.Dx(), b.Dy(), w, h)
	}
	toRGB(dst, img)
	return nil
}

// fitsEncoded refuses a frame whose encoded bytes cannot hold its header's
// size, before image/png or image/jpeg allocate the whole image (a 73-byte
// PNG declaring 4096×4096 cost 64–128 MiB before failing). The floors are
// what the formats cannot go below: DEFLATE expands at most 1032:1 (PNG:
// the IDAT bytes against the samples' bytes, filter bytes not counted),
// and a JPEG scan codes every 8×8 luma block with at least one bit (its
// DC code; a progressive JPEG's DC scan too).
func fitsEncoded(format string, data []byte, w, h int) error {
	switch format {
	case "png":
		idat, bits, ok := pngIDAT(data)
		if !ok {
			return nil // malformed: the decoder says how
		}
		need := (uint64(w)*uint64(bits) + 7) / 8 * uint64(h)
		if need > 1032*idat+1032 {
			return fmt.Errorf("%w: png: %d bytes of image data cannot hold %dx%d pixels", ErrUndecodable, idat, w, h)
		}
	case "jpeg":
		blocks := uint64((w+7)/8) * uint64((h+7)/8)
		if blocks > 8*uint64(len(data)) {
			return fmt.Errorf("%w: jpeg: %d bytes cannot hold %dx%d pixels", ErrUndecodable, len(data), w, h)
		}
	}
	return nil
}

// pngIDAT walks a PNG's chunks and returns its IDAT bytes and bits per
// pixel (IHDR); ok is false when the chunk structure cannot be walked.
func pngIDAT(data []byte) (idat uint64, bits int, ok bool) {
	if !bytes.HasPrefix(data, pngSig) {
		return 0, 0, false
	}
	for i := len(pngSig); i+8 <= len(data); {
		n := uint64(binary.BigEndian.Uint32(data[i:]))
		typ := string(data[i+4 : i+8])
		body := uint64(i) + 8
		if body+n > uint64(len(data)) {
			return 0, 0, false
		}
		switch typ {
		case "IHDR":
			if n < 13 {
				return 0, 0, false
			}
			depth, ctype := int(data[body+8]), data[body+9]
			channels := map[byte]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]
			if channels == 0 || depth == 0 {
				return 0, 0, false
			}
			bits = channels * depth
		case "IDAT":
			idat += n
		case "IEND":
			return idat, bits, bits > 0
		}
		i = int(body + n + 4) // and the CRC
	}
	return idat, bits, bits > 0
}

// pngPool holds fast-path PNG decoders (their inflater state is reused).
var pngPool = sync.Pool{New: func() any { return new(pngFast) }}

// rgbFrom32 copies the R, G, B bytes of the w×h 4-byte pixels in pix (rows
// stride bytes apart: RGBA or NRGBA) into the packed RGB p, as stored,
// dropping alpha.
func rgbFrom32(p, pix []uint8, stride, w, h int) {
	for y := 0; y < h; y++ {
		s := pix[y*stride : y*stride+4*w]
		d := p[y*w*3 : (y+1)*w*3]
		for x := 0; x < w; x++ {
			d[3*x], d[3*x+1], d[3*x+2] = s[4*x], s[4*x+1], s[4*x+2]
		}
	}
}

// rgbFrom64 is rgbFrom32 for 8-byte pixels (RGBA64, NRGBA64): the high
// byte of each big-endian 16-bit R, G, B.
func rgbFrom64(p, pix []uint8, stride, w, h int) {
	for y := 0; y < h; y++ {
		s := pix[y*stride : y*stride+8*w]
		d := p[y*w*3 : (y+1)*w*3]
		for x := 0; x < w; x++ {
			d[3*x], d[3*x+1], d[3*x+2] = s[8*x], s[8*x+2], s[8*x+4]
		}
	}
}

// toRGB converts any decoded image to 8-bit RGB, dropping alpha.
func toRGB(dst *RGB, img goimage.Image) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dst.setSize(w, h)
	p := dst.Pix
	switch m := img.(type) {
	case *goimage.RGBA:
		rgbFrom32(p, m.Pix, m.Stride, w, h)
	case *goimage.NRGBA:
		rgbFrom32(p, m.Pix, m.Stride, w, h)
	case *goimage.Gray:
		for y := 0; y < h; y++ {
			s := m.Pix[y*m.Stride : y*m.Stride+w]
			d := p[y*w*3 : (y+1)*w*3]
			for x, v := range s {
				d[3*x], d[3*x+1], d[3*x+2] = v, v, v
			}
		}
	case *goimage.RGBA64:
		rgbFrom64(p, m.Pix, m.Stride, w, h)
	case *goimage.NRGBA64:
		rgbFrom64(p, m.Pix, m.Stride, w, h)
	case *goimage.Gray16:
		for y := 0; y < h; y++ {
			s := m.Pix[y*m.Stride : y*m.Stride+2*w]
			d := p[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				v := s[2*x]
				d[3*x], d[3*x+1], d[3*x+2] = v, v, v
			}
		}
	case *goimage.Paletted:
		var lut [256][3]uint8
		for i, c := range m.Palette {
			r, g, bl := straightRGB(c)
			lut[i] = [3]uint8{r, g, bl}
		}
		for y := 0; y < h; y++ {
			s := m.Pix[y*m.Stride : y*m.Stride+w]
			d := p[y*w*3 : (y+1)*w*3]
			for x, v := range s {
				c := lut[v]
				d[3*x], d[3*x+1], d[3*x+2] = c[0], c[1], c[2]
			}
		}
	case *goimage.YCbCr:
		if ycbcrToRGBLibjpeg(dst, m) {
			return
		}
		for y := 0; y < h; y++ {
			d := p[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := m.COffset(b.Min.X+x, b.Min.Y+y)
				d[3*x], d[3*x+1], d[3*x+2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			}
		}
	default:
		for y := 0; y < h; y++ {
			d := p[y*w*3 : (y+1)*w*3]
			for x := 0; x < w; x++ {
				r, g, bl := straightRGB(img.At(b.Min.X+x, b.Min.Y+y))
				d[3*x], d[3*x+1], d[3*x+2] = r, g, bl
			}
		}
	}
}

// straightRGB returns the non-premultiplied 8-bit colour channels of c.
func straightRGB(c color.Color) (uint8, uint8, uint8) {
	switch v := c.(type) {
	case color.NRGBA:
		return v.R, v.G, v.B
	case color.RGBA:
		if v.A == 255 || v.A == 0 {
			return v.R, v.G, v.B
		}
	case color.Gray:
		return v.Y, v.Y, v.Y
	}
	n := color.NRGBA64Model.Convert(c).(color.NRGBA64)
	return uint8(n.R >> 8), uint8(n.G >> 8), uint8(n.B >> 8)
}

// DecodeBase64 decodes a standard-alphabet base64 string (with padding),
// optionally prefixed by "data:image/<type>;base64,", then the image as
// Decode does. scratch, when non-nil, is reused for the decoded bytes and
// returned (grown if needed) so callers can keep it across calls.
func DecodeBase64(dst *RGB, s string, lim Limits, scratch []byte) ([]byte, error) {
	raw, scratch, err := decodeBase64(s, scratch)
	if err != nil {
		return scratch, err
	}
	return scratch, Decode(dst, raw, lim)
}

// decodeBase64 strips an optional data-URL prefix and decodes s into
// scratch, returning the decoded bytes and the (possibly grown) scratch.
func decodeBase64(s string, scratch []byte) ([]byte, []byte, error) {
	if strings.HasPrefix(s, "data:") {
		i := strings.Index(s, ",")
		if i < 0 || !strings.HasSuffix(s[:i], ";base64") || !strings.HasPrefix(s, "data:image/") {
			return nil, scratch, fmt.Errorf("%w: malformed data URL prefix (want data:image/<type>;base64,)", ErrUndecodable)
		}
		s = s[i+1:]
	}
	n := b64.DecodedLen(len(s))
	if cap(scratch) < n {
		scratch = make([]byte, n)
	}
	scratch = scratch[:n]
	m, err := b64.DecodeString(scratch, s)
	if err != nil {
		return nil, scratch, fmt.Errorf("%w: base64: %v", ErrUndecodable, err)
	}
	return scratch[:m], scratch, nil
}

// CheckSameSize returns a *FrameError wrapping ErrSizeMismatch naming the
// first frame of camera whose size differs from frame 0's; nil frames are
// skipped.
func CheckSameSize(camera string, frames []*RGB) error {
	var first *RGB
	for i, f := range frames {
		if f == nil {
			continue
		}
		if first == nil {
			first = f
			continue
		}
		if f.W != first.W || f.H != first.H {
			return &FrameError{Camera: camera, Index: i, Err: fmt.Errorf("%w: %dx%d, earlier frame is %dx%d", ErrSizeMismatch, f.W, f.H, first.W, first.H)}
		}
	}
	return nil
}
