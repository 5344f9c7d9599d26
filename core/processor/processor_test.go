package processor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/assets"
	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/npy"
	"github.com/gr00tgw/gr00tgw/core/text"
	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

const caseDir = "../../testdata/n17-tiny/caseA/"

var (
	procOnce sync.Once
	proc     *Processor
	procErr  error
)

func defaultProcessor(tb testing.TB) *Processor {
	tb.Helper()
	procOnce.Do(func() { proc, procErr = Open(defaultCheckpoint(tb), "", defaultTokenizer(tb)) })
	require.NoError(tb, procErr)
	return proc
}

type request struct {
	Images      map[string][]string `json:"images"`
	Instruction string              `json:"instruction"`
}

func caseARequest(tb testing.TB) *request {
	tb.Helper()
	raw, err := os.ReadFile(caseDir + "request.json")
	require.NoError(tb, err)
	var r request
	require.NoError(tb, json.Unmarshal(raw, &r))
	return &r
}

func readNpy(tb testing.TB, name string) *npy.Array {
	tb.Helper()
	a, err := npy.ReadFile(caseDir + name)
	require.NoError(tb, err)
	return a
}

func int64s(tb testing.TB, name string) ([]int64, []int) {
	a := readNpy(tb, name)
	v, err := a.Int64s()
	require.NoError(tb, err)
	return v, a.Shape
}

// TestCaseA runs the whole host pipeline on case A's /predict body and
// compares every golden: frames_eval bit-exact; frames_resized and
// pixel_values exact (tolerance: one uint8 step on < 0.05 % of values);
// input_ids, attention_mask, position_ids, image_grid_thw exact.
func TestCaseA(t *testing.T) {
	p := defaultProcessor(t)
	r := caseARequest(t)
	in, err := p.Process(&Observation{Images: r.Images, Instruction: r.Instruction}, Options{KeepFrames: true})
	require.NoError(t, err)
	t.Logf("seq_len %d, text tokens %d, timings %+v", in.SeqLen, in.TextTokens, in.Timings)

	require.Equal(t, []string{"exterior_image_1_left[-15]", "wrist_image_left[-15]", "exterior_image_1_left[0]", "wrist_image_left[0]"}, in.FrameOrder)

	// frames_eval: bit-exact.
	fe := readNpy(t, "frames_eval.npy")
	require.Equal(t, []int{4, 256, 455, 3}, fe.Shape)
	var got []uint8
	for _, f := range in.EvalFrames {
		got = append(got, f.Pix...)
	}
	require.Equal(t, fe.Data, got, "frames_eval")

	// frames_resized: within one step on < 0.05 %.
	fr := readNpy(t, "frames_resized.npy")
	require.Equal(t, []int{4, 256, 448, 3}, fr.Shape)
	got = got[:0]
	for _, f := range in.ResizedFrames {
		got = append(got, f.Pix...)
	}
	require.Len(t, got, len(fr.Data))
	off1, worse := 0, 0
	for i := range got {
		d := int(got[i]) - int(fr.Data[i])
		if d != 0 {
			if d == 1 || d == -1 {
				off1++
			} else {
				worse++
			}
		}
	}
	t.Logf("frames_resized: %d of %d values off by one", off1, len(got))
	require.Zero(t, worse)
	require.Less(t, float64(off1), 0.0005*float64(len(got)))

	// pixel_values: [1792, 1536] float32, one uint8 step = 1/127.5.
	pv := readNpy(t, "pixel_values.npy")
	require.Equal(t, []int{1792, 1536}, pv.Shape)
	want, err := pv.Float32s()
	require.NoError(t, err)
	require.Equal(t, 1792, in.Rows)
	require.Equal(t, 1536, in.RowWidth)
	require.Len(t, in.PixelValues, len(want))
	step, pvOff := float32(1/127.5)*1.001, 0
	for i := range want {
		if in.PixelValues[i] != want[i] {
			d := in.PixelValues[i] - want[i]
			require.LessOrEqual(t, d*d, step*step, "pixel_values[%d]", i)
			pvOff++
		}
	}
	t.Logf("pixel_values: %d of %d values differ (by one uint8 step)", pvOff, len(want))
	require.Less(t, float64(pvOff), 0.0005*float64(len(want)))

	thw, thwShape := int64s(t, "image_grid_thw.npy")
	require.Equal(t, []int{4, 3}, thwShape)
	for k, g := range in.ImageGridTHW {
		require.Equal(t, thw[3*k:3*k+3], []int64{int64(g.T), int64(g.H), int64(g.W)})
	}
	ids, idsShape := int64s(t, "input_ids.npy")
	require.Equal(t, []int{1, 469}, idsShape)
	require.Equal(t, ids, in.InputIDs)
	mask, _ := int64s(t, "attention_mask.npy")
	require.Equal(t, mask, in.AttentionMask)
	pos, posShape := int64s(t, "position_ids.npy")
	require.Equal(t, []int{3, 1, 469}, posShape)
	require.Equal(t, pos, in.PositionIDs)
	require.Equal(t, 469, in.SeqLen)
	require.Equal(t, 8, in.TextTokens)
	require.Equal(t, 448, in.ImageTokens)
	require.Equal(t, "put the blue block in the green bowl", in.Instruction)
}

// TestDecodedFramesEqualImages: passing decoded frames gives the same
// inputs as passing the base64 PNGs.
func TestDecodedFramesEqualImages(t *testing.T) {
	p := defaultProcessor(t)
	r := caseARequest(t)
	a, err := p.Process(&Observation{Images: r.Images, Instruction: r.Instruction}, Options{})
	require.NoError(t, err)
	frames := map[string][]*image.RGB{}
	for cam, list := range r.Images {
		for _, s := range list {
			f := new(image.RGB)
			_, err := image.DecodeBase64(f, s, image.DefaultLimits, nil)
			require.NoError(t, err)
			frames[cam] = append(frames[cam], f)
		}
	}
	b, err := p.Process(&Observation{Frames: frames, Instruction: r.Instruction}, Options{})
	require.NoError(t, err)
	require.Equal(t, a.PixelValues, b.PixelValues)
	require.Equal(t, a.PositionIDs, b.PositionIDs)
}

func TestObservationErrors(t *testing.T) {
	p := defaultProcessor(t)
	r := caseARequest(t)
	ext, wrist := r.Images["exterior_image_1_left"], r.Images["wrist_image_left"]
	square := image.NewRGB(256, 256)
	small := image.NewRGB(32, 18)
	f320 := image.NewRGB(320, 180)
	f640 := image.NewRGB(640, 360)
	for _, c := range []struct {
		name  string
		obs   Observation
		want  error
		field string
	}{
		{"missing camera", Observation{Images: map[string][]string{"exterior_image_1_left": ext}, Instruction: "x"}, ErrMissingCamera, "images.wrist_image_left"},
		{"extra camera", Observation{Images: map[string][]string{"exterior_image_1_left": ext, "wrist_image_left": wrist, "top": ext}, Instruction: "x"}, ErrUnknownCamera, "images.top"},
		{"one frame", Observation{Images: map[string][]string{"exterior_image_1_left": ext[:1], "wrist_image_left": wrist}, Instruction: "x"}, ErrFrameCount, "images.exterior_image_1_left"},
		{"bad base64", Observation{Images: map[string][]string{"exterior_image_1_left": {ext[0], "!!"}, "wrist_image_left": wrist}, Instruction: "x"}, image.ErrUndecodable, "images.exterior_image_1_left[1]"},
		{"square", Observation{Frames: map[string][]*image.RGB{"exterior_image_1_left": {square, square}, "wrist_image_left": {f320, f320}}, Instruction: "x"}, image.ErrAspect, "images.exterior_image_1_left[0]"},
		{"too small", Observation{Frames: map[string][]*image.RGB{"exterior_image_1_left": {f320, f320}, "wrist_image_left": {small, small}}, Instruction: "x"}, image.ErrFrameSize, "images.wrist_image_left[0]"},
		{"size mismatch", Observation{Frames: map[string][]*image.RGB{"exterior_image_1_left": {f320, f640}, "wrist_image_left": {f320, f320}}, Instruction: "x"}, image.ErrSizeMismatch, "images.exterior_image_1_left[1]"},
		{"nil frame", Observation{Frames: map[string][]*image.RGB{"exterior_image_1_left": {f320, nil}, "wrist_image_left": {f320, f320}}, Instruction: "x"}, image.ErrUndecodable, "images.exterior_image_1_left[1]"},
		// Several faults: undecodable beats size mismatch beats limits/grid
		// beats the instruction, whatever the model order of the frames.
		{"undecodable after bad grid", Observation{Images: map[string][]string{"exterior_image_1_left": {ext[0], ext[1]}, "wrist_image_left": {wrist[0], "!!"}}, Instruction: strings.Repeat("block ", 60)}, image.ErrUndecodable, "images.wrist_image_left[1]"},
		{"mismatch after bad grid", Observation{Frames: map[string][]*image.RGB{"exterior_image_1_left": {square, square}, "wrist_image_left": {f320, f640}}, Instruction: "x"}, image.ErrSizeMismatch, "images.wrist_image_left[1]"},
		{"grid before instruction", Observation{Frames: map[string][]*image.RGB{"exterior_image_1_left": {f320, f320}, "wrist_image_left": {square, square}}, Instruction: strings.Repeat("block ", 60)}, image.ErrAspect, "images.wrist_image_left[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.Process(&c.obs, Options{})
			require.ErrorIs(t, err, c.want)
			var fe *image.FrameError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.True(t, strings.HasPrefix(err.Error(), c.field), err.Error())
			if c.want == image.ErrAspect {
				require.ErrorContains(t, err, "[1.686, 1.814]")
			}
		})
	}
	// Any landscape 16:9 size works: 640x360 lands on the 16x28 grid.
	frames := map[string][]*image.RGB{"exterior_image_1_left": {f640, f640}, "wrist_image_left": {f320, f320}}
	in, err := p.Process(&Observation{Frames: frames, Instruction: "go"}, Options{})
	require.NoError(t, err)
	require.Equal(t, 1792, in.Rows)
	// Instruction errors are text.InstructionError.
	for _, inst := range []string{"", "?!", strings.Repeat("block ", 60)} {
		_, err = p.Process(&Observation{Frames: frames, Instruction: inst}, Options{})
		var ie *text.InstructionError
		require.ErrorAs(t, err, &ie, "%q", inst)
		require.Equal(t, "instruction", ie.Field)
	}
	_, err = p.Process(&Observation{Frames: frames, Instruction: strings.Repeat("block ", 60)}, Options{})
	require.ErrorContains(t, err, "n_text exceeds L_max")
}

func TestConcurrentProcess(t *testing.T) {
	p := defaultProcessor(t)
	r := caseARequest(t)
	ref, err := p.Process(&Observation{Images: r.Images, Instruction: r.Instruction}, Options{})
	require.NoError(t, err)
	n := 4
	if testing.Short() {
		n = 2
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	outs := make([]*Inputs, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = p.Process(&Observation{Images: r.Images, Instruction: r.Instruction}, Options{})
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, ref.PixelValues, outs[i].PixelValues)
		require.Equal(t, ref.InputIDs, outs[i].InputIDs)
	}
}

// defaultCheckpoint and defaultTokenizer are the embedded default's
// n17-tiny checkpoint and Qwen3 tokenizer.json (package assets).
func defaultCheckpoint(tb testing.TB) string {
	tb.Helper()
	p, err := assets.Path(assets.CheckpointDir)
	require.NoError(tb, err)
	return p
}

func defaultTokenizer(tb testing.TB) string {
	tb.Helper()
	p, err := assets.Path(assets.TokenizerDir)
	require.NoError(tb, err)
	return filepath.Join(p, "tokenizer.json")
}

// BenchmarkEncodeDROID: decode 4 × 320×180 PNG + eval chain + smart_resize
// + patchify + tokenize + mRoPE for case A.
func BenchmarkEncodeDROID(b *testing.B) {
	p := defaultProcessor(b)
	r := caseARequest(b)
	obs := &Observation{Images: r.Images, Instruction: r.Instruction}
	benchProcess(b, p, obs)
}

// benchProcess reports the stage timings as extra metrics and reuses the
// pixel_values buffer as a serving loop would.
func benchProcess(b *testing.B, p *Processor, obs *Observation) {
	var buf []float32
	var sum Timings
	n := 0
	b.ReportAllocs()
	defer benchcpu.Report(b, benchcpu.Now())
	for b.Loop() {
		in, err := p.Process(obs, Options{PixelValues: buf})
		if err != nil {
			b.Fatal(err)
		}
		buf = in.PixelValues
		sum.Decode += in.Timings.Decode
		sum.Images += in.Timings.Images
		sum.Tokenize += in.Timings.Tokenize
		sum.Rope += in.Timings.Rope
		n++
	}
	b.ReportMetric(float64(sum.Decode.Microseconds())/float64(n), "decode-µs/op")
	b.ReportMetric(float64(sum.Images.Microseconds())/float64(n), "images-µs/op")
	b.ReportMetric(float64(sum.Tokenize.Microseconds())/float64(n), "tokenize-µs/op")
	b.ReportMetric(float64(sum.Rope.Microseconds())/float64(n), "rope-µs/op")
}

// BenchmarkEncodeDROIDDecoded is the same without PNG decoding.
func BenchmarkEncodeDROIDDecoded(b *testing.B) {
	p := defaultProcessor(b)
	r := caseARequest(b)
	frames := map[string][]*image.RGB{}
	for cam, list := range r.Images {
		for _, s := range list {
			f := new(image.RGB)
			if _, err := image.DecodeBase64(f, s, image.DefaultLimits, nil); err != nil {
				b.Fatal(err)
			}
			frames[cam] = append(frames[cam], f)
		}
	}
	benchProcess(b, p, &Observation{Frames: frames, Instruction: r.Instruction})
}

// TestLetterBoxLayout: with letter_box_transform (the April–June upstream
// behaviour) every frame becomes 256x256 → grid 16x16 → 64 tokens; the
// served grid follows the config.
func TestLetterBoxLayout(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"processor_kwargs":{"letter_box_transform":true}}`), "")
	require.NoError(t, err)
	p, err := New(cfg, defaultProcessor(t).Tokenizer())
	require.NoError(t, err)
	r := caseARequest(t)
	in, err := p.Process(&Observation{Images: r.Images, Instruction: r.Instruction}, Options{})
	require.NoError(t, err)
	require.Equal(t, 3+4*(64+2)+8+2, in.SeqLen)
	require.Equal(t, 4*256, in.Rows)
	for _, g := range in.ImageGridTHW {
		require.Equal(t, image.Grid{T: 1, H: 16, W: 16}, g)
	}
	require.Equal(t, in.SeqLen*3, len(in.PositionIDs))
}

// TestMaxSeqLen: with no L_max but a backend sequence limit, a prompt that
// does not fit is an instruction over the derived L_max; frames that alone
// exceed it are a frame-size error.
func TestMaxSeqLen(t *testing.T) {
	base := defaultProcessor(t)
	cfg := base.Config()
	cfg.MaxTextTokens = 0
	cfg.MaxSeqLen = 470 // the demo prompt is 469 tokens, 8 of them text
	p, err := New(cfg, base.Tokenizer())
	require.NoError(t, err)
	r := caseARequest(t)
	in, err := p.Process(&Observation{Images: r.Images, Instruction: r.Instruction}, Options{})
	require.NoError(t, err)
	require.Equal(t, 469, in.SeqLen)
	_, err = p.Process(&Observation{Images: r.Images, Instruction: r.Instruction + " now please"}, Options{})
	var ie *text.InstructionError
	require.ErrorAs(t, err, &ie)
	require.ErrorIs(t, err, text.ErrInstructionTooLong)
	require.Equal(t, "instruction", ie.Field)
	require.Equal(t, 9, ie.LMax)
	cfg.MaxSeqLen = 400
	p, err = New(cfg, base.Tokenizer())
	require.NoError(t, err)
	_, err = p.Process(&Observation{Images: r.Images, Instruction: r.Instruction}, Options{})
	require.ErrorIs(t, err, image.ErrFrameSize)
	require.ErrorContains(t, err, "serves at most 400")
}

// TestFreeGridSamePixels: without a served grid (frames patchified after
// the layout is known) pixel_values equal the fixed-grid path's (frames
// patchified inside their jobs).
func TestFreeGridSamePixels(t *testing.T) {
	base := defaultProcessor(t)
	require.NotEqual(t, image.Grid{}, base.Config().RequireGrid)
	cfg := base.Config()
	cfg.RequireGrid = image.Grid{}
	free, err := New(cfg, base.Tokenizer())
	require.NoError(t, err)
	r := caseARequest(t)
	obs := &Observation{Images: r.Images, Instruction: r.Instruction}
	a, err := base.Process(obs, Options{})
	require.NoError(t, err)
	b, err := free.Process(obs, Options{})
	require.NoError(t, err)
	require.Equal(t, a.Rows, b.Rows)
	require.Equal(t, a.PixelValues, b.PixelValues)
	require.Equal(t, a.PositionIDs, b.PositionIDs)
}

// TestEachPanic: a frame job that panics (a decoder bug) re-panics in the
// caller only once every other job has stopped, with the job's message,
// so the caller's recovery (the gateway's) runs with no job still running.
func TestEachPanic(t *testing.T) {
	p := &Processor{parallel: 4}
	jobs := make([]frameJob, 8)
	var running, done atomic.Int32
	got := func() (v any) {
		defer func() { v = recover() }()
		p.each(jobs, func(j *frameJob) {
			running.Add(1)
			defer running.Add(-1)
			if j == &jobs[3] {
				panic("boom")
			}
			time.Sleep(5 * time.Millisecond)
			done.Add(1)
		})
		return nil
	}()
	require.NotNil(t, got)
	assert.Contains(t, fmt.Sprint(got), "processor: frame job: boom")
	assert.Zero(t, running.Load(), "no job runs once the panic reaches the caller")
	assert.Equal(t, int32(7), done.Load())
}
