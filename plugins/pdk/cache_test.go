package pdk

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
)

// varying returns whatever out/err hold, for the result-cache test.
type varying struct {
	fake
	state []float32
	out   *Actions
	err   error
}

func (v *varying) Pre(*Observation) ([]float32, error) { return v.state, v.err }
func (v *varying) Post(*PostInput) (*Actions, error)   { return v.out, v.err }

// TestResultCache: results that reuse the previous layout are byte-for-
// byte what a fresh Runner encodes, and layout changes, errors and the
// other stage in between are all handled.
func TestResultCache(t *testing.T) {
	v := &varying{}
	r := NewRunner(v)
	var eb envelope.Builder
	eb.Float32(abi.TensorActionPred, []int64{2, 2}, []float32{0, 0, 0, 0})
	postMsg, err := eb.Bytes()
	require.NoError(t, err)
	postMsg = append([]byte(nil), postMsg...)
	eb.Reset()
	eb.Attr(abi.AttrInstruction, "x")
	preMsg, err := eb.Bytes()
	require.NoError(t, err)

	fresh := func(stage string) []byte {
		f := NewRunner(v)
		if stage == "pre" {
			return append([]byte(nil), f.Pre(preMsg)...)
		}
		return append([]byte(nil), f.Post(postMsg)...)
	}
	check := func(stage string) {
		t.Helper()
		want := fresh(stage)
		var got []byte
		if stage == "pre" {
			got = r.Pre(preMsg)
		} else {
			got = r.Post(postMsg)
		}
		require.Equal(t, want, got, stage)
	}
	a := func(key string, h, d int, base float32) ActionOutput {
		vals := make([]float32, h*d)
		for i := range vals {
			vals[i] = base + float32(i)
		}
		return ActionOutput{Key: key, Horizon: h, Dim: d, Values: vals}
	}
	v.out = &Actions{Groups: []ActionOutput{a("x", 2, 3, 0), a("g", 2, 1, 10)}}
	check("post")
	v.out = &Actions{Groups: []ActionOutput{a("x", 2, 3, 100), a("g", 2, 1, 110)}} // same layout
	check("post")
	v.state = []float32{1, 2, 3}
	check("pre")
	v.state = []float32{4, 5, 6}
	check("pre")
	v.state = []float32{4, 5, 6, 7} // new length
	check("pre")
	check("post")
	v.out = &Actions{Groups: []ActionOutput{a("y", 2, 3, 0), a("g", 2, 1, 10)}} // new key, same length
	check("post")
	v.out = &Actions{Groups: []ActionOutput{a("y", 3, 2, 0), a("g", 2, 1, 10)}} // new shape
	check("post")
	v.out = &Actions{Groups: []ActionOutput{a("y", 3, 2, 0)}} // fewer groups
	check("post")
	bad := a("y", 3, 2, 0)
	bad.Values = bad.Values[:5]
	v.out = &Actions{Groups: []ActionOutput{bad}} // same layout, wrong length
	check("post")
	v.err = errors.New("boom")
	check("post")
	check("pre")
	v.err = nil
	v.out = &Actions{Groups: []ActionOutput{a("y", 3, 2, 7)}}
	check("post")
	check("pre")
}

// recorder keeps a deep copy of every input and then scribbles over it
// (a plugin may modify what it is handed).
type recorder struct {
	fake
	obs  []string
	post []string
}

func (r *recorder) Pre(o *Observation) ([]float32, error) {
	r.obs = append(r.obs, fmt.Sprintf("%+v", *o))
	for i := range o.State {
		o.State[i].Key, o.State[i].Dim = "scribbled", -1
	}
	o.Cameras = o.Cameras[:0]
	return []float32{1}, nil
}

func (r *recorder) Post(p *PostInput) (*Actions, error) {
	r.post = append(r.post, fmt.Sprintf("%+v", *p))
	for i := range p.State {
		p.State[i].Key = "scribbled"
	}
	p.Horizon = -1
	return &Actions{Groups: []ActionOutput{{Key: "a", Horizon: 1, Dim: 1, Values: []float32{2}}}}, nil
}

// TestInputReuse: a Runner fed its inputs in one reused buffer (as the
// host does) hands the plugin exactly what a fresh Runner would, whether
// the layout repeats (tensors kept, attributes re-read) or changes, and
// however the plugin modified its previous input.
func TestInputReuse(t *testing.T) {
	pre := func(instr string, state []float64, frames int64) []byte {
		var b envelope.Builder
		b.Attr(abi.AttrRequestID, "id-1").Attr(abi.AttrInstruction, instr)
		b.Descriptor(abi.VideoPrefix+"cam", envelope.Uint8, []int64{frames, 4, 4, 3})
		b.Float64(abi.StatePrefix+"s", []int64{int64(len(state))}, state)
		out, err := b.Bytes()
		require.NoError(t, err)
		return append([]byte(nil), out...)
	}
	post := func(id string, pred []float32) []byte {
		var b envelope.Builder
		b.Attr(abi.AttrRequestID, id)
		b.Float32(abi.TensorActionPred, []int64{1, int64(len(pred))}, pred)
		b.Float64(abi.StatePrefix+"s", []int64{1, 2}, []float64{3, 4})
		out, err := b.Bytes()
		require.NoError(t, err)
		return append([]byte(nil), out...)
	}
	msgs := []struct {
		pre  bool
		body []byte
	}{
		{true, pre("pick", []float64{1, 2}, 2)},
		{false, post("id-1", []float32{1, 2})},
		{true, pre("pick", []float64{5, 6}, 2)}, // same layout, new data
		{false, post("id-2", []float32{3, 4})},  // same layout, new attr and data
		{true, pre("drop", []float64{5, 6}, 2)}, // same-length attr change
		{true, pre("drop", []float64{5, 6}, 3)}, // table change
		{true, pre("drop", []float64{5, 6, 7}, 3)},
		{false, post("id-22", []float32{3, 4})}, // attrs length change
		{false, post("id-22", []float32{5, 6})},
		{true, pre("drop", []float64{8, 9, 7}, 3)},
	}
	reused, ref := &recorder{}, &recorder{}
	r := NewRunner(reused)
	buf := make([]uint64, 512) // 8-byte aligned, like a gw_alloc buffer
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 8*len(buf))
	for i, m := range msgs {
		in := mem[:len(m.body)]
		copy(in, m.body)
		f := NewRunner(ref)
		if m.pre {
			require.Equal(t, f.Pre(in), r.Pre(in), "msg %d", i)
			require.Equal(t, ref.obs[len(ref.obs)-1], reused.obs[len(reused.obs)-1], "msg %d", i)
		} else {
			require.Equal(t, f.Post(in), r.Post(in), "msg %d", i)
			require.Equal(t, ref.post[len(ref.post)-1], reused.post[len(reused.post)-1], "msg %d", i)
		}
	}
	require.True(t, r.decPre.Reused() || r.decPost.Reused(), "the test exercises reuse")
}
