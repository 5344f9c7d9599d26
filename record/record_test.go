package record

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testRecord is a DROID-shaped predict: frames of frameBytes each.
func testRecord(frameBytes int) *Record {
	seed := uint64(42)
	pred := make([]float32, 40*132)
	for i := range pred {
		pred[i] = float32(i)*0.001 - 2
	}
	pred[7] = float32(math.Copysign(0, -1)) // -0 survives bit for bit
	eef := make([]float32, 40*9)
	frames := make([]Frame, 4)
	for i := range frames {
		d := make([]byte, frameBytes)
		for j := range d {
			d[j] = byte(i*7 + j)
		}
		frames[i] = Frame{Camera: []string{"exterior_image_1_left", "wrist_image_left"}[i%2], Step: i / 2, Encoding: "jpeg", Data: d}
	}
	return &Record{
		TimeUnixNS: time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC).UnixNano(),
		RequestID:  "r-1", Session: "s-1", Protocol: "zmq",
		Request: Request{
			Instruction: "pick up the cup",
			Options:     map[string]any{"seed": int64(42), "return_normalized": true},
			State: []State{
				{Key: "eef_9d", Values: []float64{0.5, 0, 0.3, 1, 0, 0, 0, -1, 0}},
				{Key: "gripper_position", Steps: 2, Values: []float64{0.1, 0.2}},
			},
			Frames: frames,
		},
		NoiseSource: "seed", Seed: &seed,
		Embodiment: "oxe_droid_relative_eef_relative_joint", EmbodimentID: 24,
		Plugin:     Plugin{Name: "droid", Version: "1.0.0", SHA256: strings.Repeat("ab", 32)},
		Checkpoint: "sha256:" + strings.Repeat("cd", 32), Backend: "cpu", Model: "n17-tiny",
		ActionPred: ptr(Float32s(pred, 40, 132)),
		Actions:    []ActionGroup{{Key: "eef_9d", Tensor: Float32s(eef, 40, 9)}},
		Safety:     &Safety{Policy: "clamp", Clamped: 3, First: &Violation{Group: "joint_position", Step: 1, Dim: 6, Kind: "max_step_delta", Limit: 0.08, Value: 0.3}},
		TimingMS:   map[string]float64{"total": 12.5, "device": 9.25},
	}
}

func ptr[T any](v T) *T { return &v }

func TestMarshalRoundTrip(t *testing.T) {
	rec := testRecord(100)
	b, err := Marshal(rec)
	require.NoError(t, err)
	back, err := Unmarshal(b)
	require.NoError(t, err)
	assert.Equal(t, Format, back.Format)
	assert.Equal(t, Version, back.Version)
	// Options decode as msgpack's generic types; compare the rest exactly.
	assert.EqualValues(t, 42, back.Request.Options["seed"])
	assert.Equal(t, true, back.Request.Options["return_normalized"])
	back.Request.Options, rec.Request.Options = nil, nil
	assert.Equal(t, rec, back)
	p, err := back.ActionPred.Float32s()
	require.NoError(t, err)
	assert.Equal(t, math.Float32bits(float32(math.Copysign(0, -1))), math.Float32bits(p[7]))
}

func TestUnmarshalRefuses(t *testing.T) {
	good := testRecord(10)
	mod := func(f func(r *Record)) []byte {
		r := testRecord(10)
		f(r)
		b, err := Marshal(r)
		require.NoError(t, err)
		return b
	}
	b, err := Marshal(good)
	require.NoError(t, err)
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"trailing", append(slicesClone(b), 0xc0), "record: trailing bytes after the record"},
		{"truncated", b[:len(b)-5], "record: decode:"},
		{"data length", mod(func(r *Record) { r.ActionPred.Data = r.ActionPred.Data[:8] }), "record: action_pred: 8 data bytes, shape [40 132] of float32 needs 21120"},
		{"dtype", mod(func(r *Record) { r.Actions[0].Tensor.DType = "complex64" }), `record: actions.eef_9d: dtype "complex64"`},
		{"negative shape", mod(func(r *Record) { r.ActionPred.Shape = []int{-40, -132} }), "record: action_pred: shape [-40 -132]"},
		{"state steps", mod(func(r *Record) { r.Request.State[1].Steps = 3 }), "record: request.state[1] gripper_position: 2 values in 3 steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Unmarshal(tt.b)
			require.ErrorContains(t, err, tt.want)
		})
	}
	// A version this reader does not know.
	r := testRecord(1)
	b, err = Marshal(r)
	require.NoError(t, err)
	b = bytes.Replace(b, []byte("version\x01"), []byte("version\x02"), 1)
	_, err = Unmarshal(b)
	require.EqualError(t, err, "record: version 2, this reader reads 1")
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

func logBuffer() (*slog.Logger, *syncBuffer) {
	var buf syncBuffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func closeRec(t testing.TB, r *Recorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.Close(ctx))
}

func TestOffByDefault(t *testing.T) {
	r, err := New(Options{})
	require.NoError(t, err)
	require.Nil(t, r)
	assert.False(t, r.Want(""))
	assert.False(t, r.Enqueue(testRecord(1)))
	assert.Equal(t, Stats{}, r.Stats())
	require.NoError(t, r.Close(context.Background()))
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{Dir: dir}, "record: max_bytes 0: want > 0"},
		{Options{Dir: dir, MaxBytes: 1, Sample: 1.5}, "record: sample 1.5: want a fraction in (0, 1]"},
		{Options{Dir: dir, MaxBytes: 1, Sample: math.NaN()}, "record: sample NaN: want a fraction in (0, 1]"},
		{Options{Dir: dir, MaxBytes: 1, QueueLen: -1}, "record: queue length -1: want ≥ 0"},
	} {
		_, err := New(tt.o)
		require.EqualError(t, err, tt.want)
	}
}

func TestRecorderWritesFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec", "sub")
	log, logs := logBuffer()
	r, err := New(Options{Dir: dir, MaxBytes: 1 << 20, RedactInstruction: true, Logger: log})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		rec := testRecord(1000)
		rec.RequestID = string(rune('a' + i))
		require.True(t, r.Enqueue(rec))
	}
	closeRec(t, r)
	assert.Empty(t, logs.String())

	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	files, err := List(dir)
	require.NoError(t, err)
	require.Len(t, files, 3)
	var total int64
	for i, f := range files {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
		total += fi.Size()
		rec, err := ReadFile(f)
		require.NoError(t, err)
		assert.Equal(t, string(rune('a'+i)), rec.RequestID, "write order")
		assert.Empty(t, rec.Request.Instruction)
		assert.True(t, rec.Request.InstructionRedacted)
		assert.Equal(t, testRecord(1000).Request.Frames, rec.Request.Frames, "frames as sent")
	}
	assert.Equal(t, Stats{Written: 3, Bytes: total}, r.Stats())
	assert.False(t, r.Enqueue(testRecord(1)), "closed")
	assert.Equal(t, uint64(1), r.Stats().Dropped)
}

// TestRingBound: the files in the directory, temporary ones included,
// never exceed MaxBytes, and the oldest go first.
func TestRingBound(t *testing.T) {
	dir := t.TempDir()
	b, err := Marshal(testRecord(5000))
	require.NoError(t, err)
	size := int64(len(b))
	maxBytes := 3*size + size/2 // room for 3 files
	// A file from an earlier run, and a stale temporary file.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "0000000000000000001-000001.gwrec"), b, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".tmp-x.gwrec"), b, 0o600))

	r, err := New(Options{Dir: dir, MaxBytes: maxBytes, QueueLen: 100})
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, ".tmp-x.gwrec"))
	require.ErrorIs(t, err, os.ErrNotExist, "stale temporary file removed")

	stop := make(chan struct{})
	var peak int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // watch the directory while the writer works
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			peak = max(peak, dirBytes(dir))
		}
	}()
	for i := 0; i < 20; i++ {
		rec := testRecord(5000)
		rec.TimeUnixNS += int64(i)
		rec.RequestID = "x" // same size every time
		for !r.Enqueue(rec) {
			time.Sleep(time.Millisecond)
		}
	}
	closeRec(t, r)
	close(stop)
	wg.Wait()

	assert.LessOrEqual(t, peak, maxBytes)
	files, err := List(dir)
	require.NoError(t, err)
	require.Len(t, files, 3)
	st := r.Stats()
	assert.Equal(t, uint64(20), st.Written)
	assert.Equal(t, uint64(18), st.Evicted) // the old file and 17 new ones
	assert.Equal(t, dirBytes(dir), st.Bytes)
	last, err := ReadFile(files[2])
	require.NoError(t, err)
	assert.Equal(t, testRecord(1).TimeUnixNS+19, last.TimeUnixNS, "the newest survive")

	// A record larger than the whole ring is not written.
	r, err = New(Options{Dir: dir, MaxBytes: size / 2})
	require.NoError(t, err)
	require.True(t, r.Enqueue(testRecord(5000)))
	closeRec(t, r)
	assert.Equal(t, uint64(1), r.Stats().Failed)
	assert.Zero(t, r.Stats().Written)
}

func dirBytes(dir string) int64 {
	ents, _ := os.ReadDir(dir)
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestUnwritableDir: a directory the recorder cannot create or write is
// logged once, every record counted as failed, and Enqueue still returns
// at once.
func TestUnwritableDir(t *testing.T) {
	base := t.TempDir()
	var dir string
	if os.Geteuid() == 0 {
		// root writes through permission bits: a path under a regular file
		// can be neither created nor written.
		f := filepath.Join(base, "file")
		require.NoError(t, os.WriteFile(f, nil, 0o600))
		dir = filepath.Join(f, "rec")
	} else {
		dir = filepath.Join(base, "ro")
		require.NoError(t, os.Mkdir(dir, 0o500))
	}
	log, logs := logBuffer()
	r, err := New(Options{Dir: dir, MaxBytes: 1 << 20, Logger: log})
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		start := time.Now()
		require.True(t, r.Enqueue(testRecord(10)))
		assert.Less(t, time.Since(start), 100*time.Millisecond)
	}
	closeRec(t, r)
	assert.Equal(t, uint64(5), r.Stats().Failed)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
}

// TestFullDisk: writes failing with ENOSPC are logged once per outage and
// counted; no temporary file is left; the next success is logged as the
// recovery.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	log, logs := logBuffer()
	r, err := newRecorder(Options{Dir: dir, MaxBytes: 1 << 20, Logger: log, QueueLen: 10})
	require.NoError(t, err)
	full := true
	r.create = func(p string) (io.WriteCloser, error) {
		f, err := createFile(p)
		if err != nil || !full {
			return f, err
		}
		return failingWriter{f}, nil
	}
	for i := 0; i < 4; i++ {
		require.True(t, r.Enqueue(testRecord(10)))
	}
	for r.run1() { // the writer, inline: 4 failures
	}
	full = false
	require.True(t, r.Enqueue(testRecord(10)))
	r.run1()
	assert.Equal(t, Stats{Written: 1, Failed: 4, Bytes: dirBytes(dir)}, r.Stats())
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
	assert.Contains(t, logs.String(), "no space left on device")
	assert.Equal(t, 1, strings.Count(logs.String(), "writing records again"))
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, files, 1, "no temporary files left")
}

type failingWriter struct{ f io.WriteCloser }

func (w failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }
func (w failingWriter) Close() error              { return w.f.Close() }

// run1 handles one queued record without blocking; false when none.
func (r *Recorder) run1() bool {
	select {
	case rec := <-r.queue:
		r.handle(rec)
		return true
	default:
		return false
	}
}

func TestQueueFullDrops(t *testing.T) {
	r, err := newRecorder(Options{Dir: t.TempDir(), MaxBytes: 1 << 20, QueueLen: 2})
	require.NoError(t, err)
	// No writer yet: the queue holds 2, the rest are dropped at once.
	got := 0
	for i := 0; i < 5; i++ {
		if r.Enqueue(testRecord(10)) {
			got++
		}
	}
	assert.Equal(t, 2, got)
	go r.run()
	closeRec(t, r)
	assert.Equal(t, Stats{Written: 2, Dropped: 3, Bytes: r.Stats().Bytes}, r.Stats())
}

func TestWant(t *testing.T) {
	r, err := newRecorder(Options{Dir: t.TempDir(), MaxBytes: 1, Sessions: []string{"a", "b"}})
	require.NoError(t, err)
	assert.True(t, r.Want("a"))
	assert.True(t, r.Want("b"))
	assert.False(t, r.Want("c"))
	assert.False(t, r.Want(""))

	r, err = newRecorder(Options{Dir: t.TempDir(), MaxBytes: 1, Sample: 0.25})
	require.NoError(t, err)
	n := 0
	for i := 0; i < 20000; i++ {
		if r.Want("") {
			n++
		}
	}
	assert.InDelta(t, 5000, n, 500) // ~9 standard deviations
}

// TestConcurrentEnqueue (run with -race): many request goroutines, one
// writer, Close while they run.
func TestConcurrentEnqueue(t *testing.T) {
	r, err := New(Options{Dir: t.TempDir(), MaxBytes: 1 << 20, QueueLen: 8})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if r.Want("") && r.Enqueue(testRecord(100)) {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
				_ = r.Stats()
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	closeRec(t, r)
	wg.Wait()
	st := r.Stats()
	assert.Equal(t, uint64(accepted), st.Written)
	assert.Equal(t, uint64(400), st.Written+st.Dropped)
	files, err := List(r.opts.Dir)
	require.NoError(t, err)
	assert.Len(t, files, int(st.Written)-int(st.Evicted))
}

func TestListSkipsOthers(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.gwrec", "a.gwrec", ".tmp-c.gwrec", "notes.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), nil, 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d.gwrec"), 0o700))
	files, err := List(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "a.gwrec"), filepath.Join(dir, "b.gwrec")}, files)
	_, err = ReadFile(filepath.Join(dir, "a.gwrec"))
	require.ErrorContains(t, err, "record: decode: EOF (file ")
	_, err = List(filepath.Join(dir, "none"))
	require.True(t, errors.Is(err, os.ErrNotExist))
}

func FuzzUnmarshal(f *testing.F) {
	b, err := Marshal(testRecord(3))
	require.NoError(f, err)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte{0x80})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Unmarshal(b)
		if err != nil {
			return
		}
		// What reads, re-encodes to a file that reads back the same.
		b2, err := Marshal(r)
		require.NoError(t, err)
		r2, err := Unmarshal(b2)
		require.NoError(t, err)
		b3, err := Marshal(r2)
		require.NoError(t, err)
		require.Equal(t, b2, b3)
	})
}

// TestWarnsOpenDir: an existing directory others can read is used, with a
// warning (records hold camera images).
func TestWarnsOpenDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	log, logs := logBuffer()
	r, err := New(Options{Dir: dir, MaxBytes: 1 << 20, Logger: log})
	require.NoError(t, err)
	closeRec(t, r)
	assert.Contains(t, logs.String(), "level=WARN msg=\"record: directory is readable by others")
}
