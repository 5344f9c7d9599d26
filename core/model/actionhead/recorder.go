package actionhead

import (
	"slices"
	"sync"
)

// Recorder is a Tapper that keeps a copy of every tap, for tests and
// `gr00tgw run --taps`. It is safe for concurrent use. The zero value is
// ready to use.
type Recorder struct {
	mu    sync.Mutex
	order []string
	taps  map[string]*recorded
}

type recorded struct {
	shape []int
	steps [][]float32 // one entry per Tap call, in call order
}

// Tap implements Tapper by copying data.
func (r *Recorder) Tap(name string, step int, shape []int, data []float32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.taps == nil {
		r.taps = map[string]*recorded{}
	}
	t, ok := r.taps[name]
	if !ok {
		t = &recorded{shape: slices.Clone(shape)}
		r.taps[name] = t
		r.order = append(r.order, name)
	}
	t.steps = append(t.steps, slices.Clone(data))
}

// Names returns the recorded tap names in first-seen order.
func (r *Recorder) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

// Stacked returns a recorded tap as one array in the golden files' layout:
// a tap reported once keeps its shape; a tap reported n > 1 times (the
// per-step taps) is stacked to [n, shape...]. ok is false if the name was
// never tapped.
func (r *Recorder) Stacked(name string) (shape []int, data []float32, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, found := r.taps[name]
	if !found {
		return nil, nil, false
	}
	if len(t.steps) == 1 {
		return slices.Clone(t.shape), slices.Clone(t.steps[0]), true
	}
	shape = append([]int{len(t.steps)}, t.shape...)
	for _, s := range t.steps {
		data = append(data, s...)
	}
	return shape, data, true
}

// Reset forgets every recorded tap.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order, r.taps = nil, nil
}
