package record

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// requestInputs is what the request path holds when it records a DROID
// predict: four JPEG frames (in a transport-owned body buffer), the state,
// the [40, 132] action_pred and the decoded [40, 17] actions.
type requestInputs struct {
	frames [][]byte
	state  []State
	pred   []float32
	eef    []float32
	grip   []float32
	joint  []float32
}

func droidInputs(frameBytes int) *requestInputs {
	in := &requestInputs{pred: make([]float32, 40*132), eef: make([]float32, 40*9), grip: make([]float32, 40), joint: make([]float32, 40*7)}
	for i := 0; i < 4; i++ {
		in.frames = append(in.frames, make([]byte, frameBytes))
	}
	in.state = []State{
		{Key: "eef_9d", Values: make([]float64, 9)},
		{Key: "gripper_position", Values: make([]float64, 1)},
		{Key: "joint_position", Values: make([]float64, 7)},
	}
	return in
}

// enqueue is the request path's whole recording cost: the Want decision,
// copying what the transport owns, building the record, Enqueue.
func enqueue(r *Recorder, in *requestInputs) bool {
	if !r.Want("s") {
		return false
	}
	rec := &Record{TimeUnixNS: time.Now().UnixNano(), RequestID: "r", Session: "s", Protocol: "http",
		Embodiment: "oxe_droid_relative_eef_relative_joint", EmbodimentID: 24,
		Plugin: Plugin{Name: "droid", Version: "1.0.0"}, NoiseSource: "seed"}
	rec.Request.Instruction = "pick up the cup"
	rec.Request.Frames = make([]Frame, len(in.frames))
	for i, f := range in.frames {
		rec.Request.Frames[i] = Frame{Camera: "exterior_image_1_left", Step: i, Encoding: "jpeg", Data: slices.Clone(f)}
	}
	rec.Request.State = make([]State, len(in.state))
	for i, s := range in.state {
		rec.Request.State[i] = State{Key: s.Key, Values: slices.Clone(s.Values)}
	}
	p := Float32s(in.pred, 40, 132)
	rec.ActionPred = &p
	rec.Actions = []ActionGroup{
		{Key: "eef_9d", Tensor: Float32s(in.eef, 40, 9)},
		{Key: "gripper_position", Tensor: Float32s(in.grip, 40, 1)},
		{Key: "joint_position", Tensor: Float32s(in.joint, 40, 7)},
	}
	rec.TimingMS = Timings{"total": 10, "device": 8}
	return r.Enqueue(rec)
}

// BenchmarkRecordRequestPath is the recording cost a request pays for a
// DROID predict with four 50 KB frames (target, issue 28: ≤ 0.2 ms at p50).
// "drained": the queue is emptied by a goroutine that discards the records
// (the request path alone); "writing": the real writer runs beside it, one
// predict per millisecond (the pause is not timed), files into a 64 MiB ring.
func BenchmarkRecordRequestPath(b *testing.B) {
	in := droidInputs(50 << 10)
	run := func(b *testing.B, r *Recorder, pace time.Duration) {
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if pace > 0 {
				b.StopTimer()
				time.Sleep(pace)
				b.StartTimer()
			}
			t0 := time.Now()
			enqueue(r, in)
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
	b.Run("drained", func(b *testing.B) {
		r, err := newRecorder(Options{Dir: filepath.Join(b.TempDir(), "rec"), MaxBytes: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			for range r.queue {
			}
			close(done)
		}()
		run(b, r, 0)
		r.mu.Lock()
		r.closed = true
		close(r.queue)
		r.mu.Unlock()
		<-done
		if r.Stats().Dropped != 0 {
			b.Logf("dropped %d of %d", r.Stats().Dropped, b.N)
		}
	})
	b.Run("writing", func(b *testing.B) {
		r, err := New(Options{Dir: filepath.Join(b.TempDir(), "rec"), MaxBytes: 64 << 20})
		if err != nil {
			b.Fatal(err)
		}
		run(b, r, time.Millisecond)
		closeRec(b, r)
		st := r.Stats()
		b.ReportMetric(float64(st.Dropped), "dropped")
		if st.Failed != 0 {
			b.Fatalf("failed %d", st.Failed)
		}
	})
}
