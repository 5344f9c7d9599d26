package pdk

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

type fake struct {
	got     *Observation
	preErr  error
	initCfg *abi.InitConfig
}

func (f *fake) Describe() abi.Description { return abi.Description{Name: "fake", Version: "1.0.0"} }
func (f *fake) Init(c *abi.InitConfig) error {
	f.initCfg = c
	return nil
}
func (f *fake) Pre(o *Observation) ([]float32, error) {
	cp := *o
	f.got = &cp
	if f.preErr != nil {
		return nil, f.preErr
	}
	return []float32{1, 2, 3}, nil
}
func (f *fake) Post(in *PostInput) (*Actions, error) {
	return &Actions{Groups: []ActionOutput{{Key: "a", Horizon: in.Horizon, Dim: 1, Values: in.ActionPred[:in.Horizon]}}}, nil
}

func decodeResult(t *testing.T, res []byte) (uint32, *envelope.Envelope) {
	t.Helper()
	require.GreaterOrEqual(t, len(res), abi.ResultHeaderSize)
	var e envelope.Envelope
	require.NoError(t, e.Decode(res[abi.ResultHeaderSize:]))
	return binary.LittleEndian.Uint32(res), &e
}

func TestRunner(t *testing.T) {
	f := &fake{}
	r := NewRunner(f)

	d := r.Describe()
	assert.Equal(t, uint32(0), binary.LittleEndian.Uint32(d))
	assert.JSONEq(t, `{"name":"fake","version":"1.0.0","abi":1,"embodiment":"","projector_slot":0,"cameras":null,"state":null,"actions":null,"language":{"key":"","min_chars":0,"max_chars":0},"action_horizon":0,"max_state_dim":0,"max_action_dim":0,"layout":{"name":"","frame_order":null,"vit_grid_thw":[0,0,0],"tokens_per_image":0,"l_max":0,"frame_aspect":[0,0],"frame_side":[0,0]}}`, string(d[8:]))

	res := r.Init([]byte(`{"embodiment":"e","statistics":{"state":{"s":{"q01":[1,2],"q99":[[1,2],[3,4]]}}},"processor":{"use_percentiles":true,"max_state_dim":132}}`))
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 0}, res, "status ok, empty body")
	s := f.initCfg.Statistics["state"]["s"]
	assert.Equal(t, abi.Array{Cols: 2, Data: []float64{1, 2}}, s.Q01)
	assert.Equal(t, abi.Array{Rows: 2, Cols: 2, Data: []float64{1, 2, 3, 4}}, s.Q99)
	assert.True(t, f.initCfg.Processor.UsePercentiles)

	var b envelope.Builder
	b.Attr(abi.AttrInstruction, "hi").Attr(abi.AttrStateDType, "float64")
	b.Descriptor("video.cam", envelope.Uint8, []int64{2, 10, 20, 3})
	b.Float64("state.a", []int64{1, 2}, []float64{5, 6})
	in, err := b.Bytes()
	require.NoError(t, err)
	st, e := decodeResult(t, r.Pre(in))
	require.Equal(t, abi.StatusOK, st)
	v, err := e.Tensor(abi.TensorState).Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, v)
	assert.Equal(t, "hi", f.got.Instruction)
	assert.Equal(t, "float64", f.got.StateDType)
	assert.Equal(t, []CameraInput{{Key: "cam", Frames: 2, Height: 10, Width: 20, Channels: 3}}, f.got.Cameras)
	assert.Equal(t, StateInput{Key: "a", Steps: 1, Dim: 2, Values: []float64{5, 6}}, f.got.State[0])

	f.preErr = Errorf(abi.CodeInvalidState, "state.a", "expected %d values, got %d", 9, 8)
	st, e = decodeResult(t, r.Pre(in))
	assert.Equal(t, abi.StatusInvalid, st)
	code, _ := e.Attr(abi.AttrCode)
	field, _ := e.Attr(abi.AttrField)
	msg, _ := e.Attr(abi.AttrMessage)
	assert.Equal(t, []string{"invalid_state", "state.a", "expected 9 values, got 8"}, []string{code, field, msg})

	f.preErr = errors.New("boom")
	st, e = decodeResult(t, r.Pre(in))
	assert.Equal(t, abi.StatusPluginError, st)
	msg, _ = e.Attr(abi.AttrMessage)
	assert.Equal(t, "boom", msg)

	st, _ = decodeResult(t, r.Pre([]byte("garbage")))
	assert.Equal(t, abi.StatusPluginError, st)

	b.Reset()
	b.Float32(abi.TensorActionPred, []int64{2, 2}, []float32{7, 8, 9, 10})
	in, _ = b.Bytes()
	st, e = decodeResult(t, r.Post(in))
	require.Equal(t, abi.StatusOK, st)
	a, _ := e.Tensor("action.a").Float32s()
	assert.Equal(t, []float32{7, 8}, a)
}

func TestNumericHelpers(t *testing.T) {
	assert.True(t, IsClose(0.500004, 0.5))
	assert.False(t, IsClose(0.50001, 0.5))

	dst := make([]float32, 3)
	NormalizeMinMax32(dst, []float32{0, 2, 1}, []float64{0, 0, 1}, []float64{1, 1, 1}, true)
	assert.Equal(t, []float32{-1, 1, 0}, dst)
	NormalizeMinMax64(dst, []float64{0.5, -3, 1}, []float64{0, 0, 1}, []float64{1, 1, 1}, true)
	assert.Equal(t, []float32{0, -1, 0}, dst)

	assert.Equal(t, 2.0, UnnormalizeMinMax(5, -2, 2))
	assert.Equal(t, -2.0, UnnormalizeMinMax(-1, -2, 2))

	// A rotation survives rot6d decoding and the quaternion round trip.
	th := 0.7
	R := Mat3{math.Cos(th), -math.Sin(th), 0, math.Sin(th), math.Cos(th), 0, 0, 0, 1}
	got := Rot6DToMat64(R[:6])
	rt := QuatRoundTrip(&got)
	for i := range R {
		assert.InDelta(t, R[i], rt[i], 1e-15)
	}
	// All four branches of QuatFromMat (trace and each diagonal).
	for _, m := range []Mat3{
		{1, 0, 0, 0, 1, 0, 0, 0, 1},
		{1, 0, 0, 0, -1, 0, 0, 0, -1},
		{-1, 0, 0, 0, 1, 0, 0, 0, -1},
		{-1, 0, 0, 0, -1, 0, 0, 0, 1},
	} {
		rt := QuatRoundTrip(&m)
		for i := range m {
			assert.InDelta(t, m[i], rt[i], 1e-15)
		}
	}
	f32 := Rot6DToMat32([]float32{2, 0, 0, 1, 1, 0})
	assert.Equal(t, Mat3{1, 0, 0, 0, 1, 0, 0, 0, 1}, f32)
}

// quatFromMatIndexed is QuatFromMat as first written (computed indices),
// kept as the reference for TestQuatFromMatMatchesIndexed.
func quatFromMatIndexed(m *Mat3) [4]float64 {
	dec := [4]float64{m[0], m[4], m[8], float64(m[0]+m[4]) + m[8]}
	c := 0
	for i := 1; i < 4; i++ {
		if dec[i] > dec[c] {
			c = i
		}
	}
	var q [4]float64
	if c != 3 {
		i, j, k := c, (c+1)%3, (c+2)%3
		q[i] = float64(1-dec[3]) + float64(2*m[4*i])
		q[j] = m[3*j+i] + m[3*i+j]
		q[k] = m[3*k+i] + m[3*i+k]
		q[3] = m[3*k+j] - m[3*j+k]
	} else {
		q[0], q[1], q[2], q[3] = m[7]-m[5], m[2]-m[6], m[3]-m[1], 1+dec[3]
	}
	n := math.Sqrt(float64(float64(float64(q[0]*q[0])+float64(q[1]*q[1]))+float64(q[2]*q[2])) + float64(q[3]*q[3]))
	return [4]float64{q[0] / n, q[1] / n, q[2] / n, q[3] / n}
}

// TestQuatFromMatMatchesIndexed: the per-case QuatFromMat returns the
// same bits as the index-based formulation, on random rotations (every
// branch) and on matrices with ties and NaN on the diagonal.
func TestQuatFromMatMatchesIndexed(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	branches := map[int]int{}
	check := func(m Mat3) {
		t.Helper()
		got, want := QuatFromMat(&m), quatFromMatIndexed(&m)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
				t.Fatalf("%v: got %v, want %v", m, got, want)
			}
		}
	}
	for range 200_000 {
		var a [6]float64
		for i := range a {
			a[i] = rng.NormFloat64()
		}
		m := Rot6DToMat64(a[:])
		t3 := m[0] + m[4] + m[8]
		switch {
		case t3 > m[0] && t3 > m[4] && t3 > m[8]:
			branches[3]++
		case m[0] >= m[4] && m[0] >= m[8]:
			branches[0]++
		case m[4] >= m[8]:
			branches[1]++
		default:
			branches[2]++
		}
		check(m)
	}
	for b := range 4 {
		require.Greater(t, branches[b], 1000, "branch %d", b)
	}
	nan := math.NaN()
	for _, m := range []Mat3{
		{1, 0, 0, 0, 1, 0, 0, 0, 1}, {0, 0, 0, 0, 0, 0, 0, 0, 0}, {-1, 0, 0, 0, -1, 0, 0, 0, -1},
		{nan, 0, 0, 0, 1, 0, 0, 0, 1}, {1, 0, 0, 0, nan, 0, 0, 0, 1}, {0.5, 0, 0, 0, 0.5, 0, 0, 0, -1},
	} {
		check(m)
	}
}

// described is fake with state and camera groups in its Description.
type described struct{ fake }

var describedState, describedCam = "joint_position", "wrist_image_left"

func (d *described) Describe() abi.Description {
	return abi.Description{Name: "d", Version: "1.0.0",
		State:   []abi.StateGroup{{Key: describedState, Dim: 2}},
		Cameras: []abi.Camera{{Key: describedCam}}}
}

// TestRunnerCanonicalKeys: decoded state and camera keys that the
// Description names are handed over as the plugin's own strings (same
// data pointer, so pdk.Equal needs no byte compare in a wasm guest), on
// the first decode and on layout reuse; other keys keep their bytes.
func TestRunnerCanonicalKeys(t *testing.T) {
	f := &described{}
	r := NewRunner(f)
	var eb envelope.Builder
	eb.Attr(abi.AttrInstruction, "go")
	eb.Descriptor(abi.VideoPrefix+"wrist_image_left", envelope.Uint8, []int64{1, 64, 64, 3})
	eb.Float64(abi.StatePrefix+"joint_position", []int64{2}, []float64{1, 2})
	eb.Float64(abi.StatePrefix+"other", []int64{1}, []float64{3})
	msg, err := eb.Bytes()
	require.NoError(t, err)
	for call := range 2 {
		buf := append([]byte(nil), msg...) // keys alias this buffer
		status, _ := decodeResult(t, r.Pre(buf))
		require.Equal(t, abi.StatusOK, status)
		o := f.got
		require.Len(t, o.State, 2)
		assert.Same(t, unsafe.StringData(describedState), unsafe.StringData(o.State[0].Key), "call %d", call)
		assert.Same(t, unsafe.StringData(describedCam), unsafe.StringData(o.Cameras[0].Key), "call %d", call)
		assert.Equal(t, "other", o.State[1].Key)
		assert.NotSame(t, unsafe.StringData("other"), unsafe.StringData(o.State[1].Key))
	}
}
