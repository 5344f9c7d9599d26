package rawobs

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pngB64 is a w×h PNG whose pixel (x, y) is (x, y, x+y), base64-encoded.
func pngB64(t testing.TB, w, h int) string {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x), uint8(y), uint8(x + y), 255})
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// TestFromPredictJSON: frames decoded to RGB in order, state, the
// instruction under any of its names, embodiment, seed and whether the
// body carried noise.
func TestFromPredictJSON(t *testing.T) {
	f := pngB64(t, 66, 64) // core/image's smallest side is 64
	body := fmt.Sprintf(`{"images":{"wrist":["%s","data:image/png;base64,%s"],"ext":["%s"]},"state":{"arm":[1,2.5]},
		"prompt":"pick","embodiment":"bot","seed":7,"noise":[[0.1]]}`, f, f, f)
	o, err := FromPredictJSON([]byte(body))
	require.NoError(t, err)
	assert.Equal(t, []string{"ext", "wrist"}, o.Cameras())
	require.Len(t, o.Frames["wrist"], 2)
	fr := o.Frames["wrist"][0]
	assert.Equal(t, []int{64, 66, 64 * 66 * 3}, []int{fr.Height, fr.Width, len(fr.Pix)})
	for _, xy := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {65, 63}} {
		i := (xy[1]*66 + xy[0]) * 3
		assert.Equal(t, []byte{uint8(xy[0]), uint8(xy[1]), uint8(xy[0] + xy[1])}, fr.Pix[i:i+3], "pixel %v", xy)
	}
	assert.Equal(t, fr, o.Frames["wrist"][1], "a data: URI decodes the same")
	assert.Equal(t, map[string][]float64{"arm": {1, 2.5}}, o.State)
	assert.Equal(t, "pick", o.Instruction)
	assert.Equal(t, "bot", o.Embodiment)
	require.NotNil(t, o.Seed)
	assert.Equal(t, uint64(7), *o.Seed)
	assert.True(t, o.HasNoise)

	for _, c := range []struct{ body, instruction string }{
		{`{"instruction":"a"}`, "a"},
		{`{"language":"b"}`, "b"},
		{`{"noise":null}`, ""},
	} {
		o, err := FromPredictJSON([]byte(c.body))
		require.NoError(t, err, c.body)
		assert.Equal(t, c.instruction, o.Instruction, c.body)
		assert.False(t, o.HasNoise, c.body)
		assert.Nil(t, o.Seed, c.body)
	}
}

// TestFromPredictJSONErrors name the failing frame.
func TestFromPredictJSONErrors(t *testing.T) {
	for _, c := range []struct{ body, err string }{
		{`[1]`, "rawobs: /predict body: json: cannot unmarshal"},
		{`{"images":{"cam":["@@@"]}}`, "rawobs: images.cam[0]: "},
		{`{"images":{"cam":["` + pngB64(t, 64, 64) + `","aGVsbG8="]}}`, "rawobs: images.cam[1]: "},
		{`{"images":{"cam":["` + pngB64(t, 8, 8) + `"]}}`, "rawobs: images.cam[0]: frame size out of range"},
		{`{"seed":-1}`, "rawobs: /predict body: json: cannot unmarshal number -1"},
	} {
		_, err := FromPredictJSON([]byte(c.body))
		assert.ErrorContains(t, err, c.err, c.body)
	}
}

// TestStack: frames of one size concatenate to [T, H, W, 3]; others are
// an error naming the frame.
func TestStack(t *testing.T) {
	a := Frame{Pix: []byte{1, 2, 3, 4, 5, 6}, Height: 1, Width: 2}
	b := Frame{Pix: []byte{7, 8, 9, 10, 11, 12}, Height: 1, Width: 2}
	pix, shape, err := Stack([]Frame{a, b})
	require.NoError(t, err)
	assert.Equal(t, []int{2, 1, 2, 3}, shape)
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, pix)

	for _, c := range []struct {
		name   string
		frames []Frame
		err    string
	}{
		{"none", nil, "rawobs: no frames"},
		{"other size", []Frame{a, {Pix: make([]byte, 6), Height: 2, Width: 1}}, "rawobs: frame 1 is 1x2, frame 0 2x1"},
		{"short pixels", []Frame{a, {Pix: make([]byte, 5), Height: 1, Width: 2}}, "rawobs: frame 1 is 2x1, frame 0 2x1"},
	} {
		_, _, err := Stack(c.frames)
		assert.EqualError(t, err, c.err, c.name)
	}
}

// FuzzFromPredictJSON: any body decodes or fails with an error, and every
// decoded camera's frames either stack or fail with an error.
func FuzzFromPredictJSON(f *testing.F) {
	f.Add([]byte(`{"images":{"cam":["` + pngB64(f, 64, 64) + `"]},"state":{"a":[1]},"instruction":"x","seed":1}`))
	f.Add([]byte(`{"images":{"cam":["data:,"]}}`))
	f.Add([]byte(`{"prompt":null,"noise":0}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := FromPredictJSON(body)
		if err != nil {
			return
		}
		for _, cam := range o.Cameras() {
			pix, shape, err := Stack(o.Frames[cam])
			if err == nil && len(pix) != shape[0]*shape[1]*shape[2]*3 {
				t.Fatalf("camera %s: %d bytes for shape %v", cam, len(pix), shape)
			}
		}
	})
}
