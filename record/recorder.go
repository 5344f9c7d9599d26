package record

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Recorder (config keys record.*). The zero value
// (empty Dir) is off.
type Options struct {
	// Dir is the ring directory, created 0700 if absent. "" disables
	// recording (New returns a nil *Recorder, whose methods do nothing).
	Dir string
	// MaxBytes bounds the total size of the record files in Dir (the ring:
	// the oldest files are deleted first; a record larger than MaxBytes is
	// dropped and counted as failed). Required > 0 when Dir is set.
	MaxBytes int64
	// Sample is the fraction of predicts recorded, in (0, 1]; 0 means 1.
	Sample float64
	// Sessions, when not empty, limits recording to these session ids.
	Sessions []string
	// RedactInstruction drops the instruction from every record (the
	// record says it did).
	RedactInstruction bool
	// QueueLen is the number of records waiting for the writer; when full,
	// Enqueue drops (and counts) the record. Default 64.
	QueueLen int
	// Logger receives the first failure of an outage and its recovery.
	// Default slog.Default().
	Logger *slog.Logger
}

// Stats are the recorder's counters since New.
type Stats struct {
	Written uint64 // files written
	Dropped uint64 // records dropped: queue full or recorder closed
	Failed  uint64 // records not written: encode or file-system error, or larger than MaxBytes
	Evicted uint64 // old files deleted to stay within MaxBytes
	Bytes   int64  // bytes of record files in the directory now
}

// Recorder writes records from a bounded queue on one writer goroutine.
// Want and Enqueue are cheap and never block; all methods are safe for
// concurrent use and do nothing on a nil *Recorder.
type Recorder struct {
	opts     Options
	sessions map[string]struct{}
	log      *slog.Logger

	mu     sync.RWMutex // guards closed and sends on queue
	closed bool
	queue  chan *Record
	done   chan struct{}

	written, dropped, failed, evicted atomic.Uint64
	bytes                             atomic.Int64

	// Writer goroutine only.
	ring    list.List // of ringFile, oldest first
	used    int64
	seq     uint64
	failing bool // an outage is in progress (its first failure was logged)

	// create opens a new temporary file (os.OpenFile O_EXCL, 0600; tests
	// replace it to simulate a full disk).
	create func(path string) (io.WriteCloser, error)
}

func createFile(path string) (io.WriteCloser, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

type ringFile struct {
	path string
	size int64
}

// New starts a recorder over o.Dir, or returns nil, nil when o.Dir is "".
// It refuses invalid options; a directory it cannot create or read is
// logged and counted (every record then fails), not an error: recording
// never stops the server.
func New(o Options) (*Recorder, error) {
	if o.Dir == "" {
		return nil, nil
	}
	r, err := newRecorder(o)
	if err != nil {
		return nil, err
	}
	go r.run()
	return r, nil
}

// newRecorder is New without starting the writer.
func newRecorder(o Options) (*Recorder, error) {
	switch {
	case o.MaxBytes <= 0:
		return nil, fmt.Errorf("record: max_bytes %d: want > 0", o.MaxBytes)
	case o.Sample < 0 || o.Sample > 1 || o.Sample != o.Sample:
		return nil, fmt.Errorf("record: sample %v: want a fraction in (0, 1]", o.Sample)
	case o.QueueLen < 0:
		return nil, fmt.Errorf("record: queue length %d: want ≥ 0", o.QueueLen)
	}
	if o.Sample == 0 {
		o.Sample = 1
	}
	if o.QueueLen == 0 {
		o.QueueLen = 64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r := &Recorder{opts: o, log: o.Logger, queue: make(chan *Record, o.QueueLen), done: make(chan struct{}), create: createFile}
	if len(o.Sessions) > 0 {
		r.sessions = make(map[string]struct{}, len(o.Sessions))
		for _, s := range o.Sessions {
			r.sessions[s] = struct{}{}
		}
	}
	if err := r.scan(); err != nil {
		// Logged once here; the records that then fail are counted.
		r.failing = true
		r.log.Error("record: cannot use the record directory (requests are unaffected; records that fail are counted, not logged)", "dir", o.Dir, "err", err)
	}
	return r, nil
}

// scan creates the directory (0700) or adopts the record files already in
// it as the oldest of the ring, deleting stale temporary files.
func (r *Recorder) scan() error {
	dir := r.opts.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("record: dir %s: %w", dir, err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		r.log.Warn("record: directory is readable by others; records hold camera images", "dir", dir, "mode", fi.Mode().Perm().String())
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("record: dir %s: %w", dir, err)
	}
	for _, e := range ents { // ReadDir sorts by name: write order
		n := e.Name()
		switch {
		case strings.HasPrefix(n, ".tmp-") && e.Type().IsRegular():
			_ = os.Remove(filepath.Join(dir, n))
		case strings.HasSuffix(n, Ext) && e.Type().IsRegular():
			fi, err := e.Info()
			if err != nil {
				continue
			}
			r.ring.PushBack(ringFile{filepath.Join(dir, n), fi.Size()})
			r.used += fi.Size()
		}
	}
	r.bytes.Store(r.used)
	// Files from an earlier, larger max_bytes: trim now.
	return r.evict(0)
}

// Want reports whether a predict of session should be recorded (the
// session filter and the sample fraction). Call it before building a
// Record, so that unsampled predicts copy nothing.
func (r *Recorder) Want(session string) bool {
	if r == nil {
		return false
	}
	if r.sessions != nil {
		if _, ok := r.sessions[session]; !ok {
			return false
		}
	}
	return r.opts.Sample >= 1 || rand.Float64() < r.opts.Sample
}

// Enqueue hands rec to the writer and returns at once: false when the
// record was dropped (queue full, or the recorder closed), which is
// counted. The recorder owns rec and everything it references from here
// on: the caller copies buffers it does not own (a transport's reused
// request body) before building rec, and does not modify rec afterwards.
func (r *Recorder) Enqueue(rec *Record) bool {
	if r == nil {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		r.dropped.Add(1)
		return false
	}
	select {
	case r.queue <- rec:
		return true
	default:
		r.dropped.Add(1)
		return false
	}
}

// Close stops accepting records, writes those queued and waits for the
// writer until ctx ends.
func (r *Recorder) Close(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.queue)
	}
	r.mu.Unlock()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("record: close: %w", ctx.Err())
	}
}

// Stats returns the counters.
func (r *Recorder) Stats() Stats {
	if r == nil {
		return Stats{}
	}
	return Stats{Written: r.written.Load(), Dropped: r.dropped.Load(), Failed: r.failed.Load(),
		Evicted: r.evicted.Load(), Bytes: r.bytes.Load()}
}

func (r *Recorder) run() {
	defer close(r.done)
	for rec := range r.queue {
		r.handle(rec)
	}
}

// handle writes one record and keeps the counters and the outage state.
func (r *Recorder) handle(rec *Record) {
	if err := r.write(rec); err != nil {
		r.failure(err)
		return
	}
	r.written.Add(1)
	if r.failing {
		r.failing = false
		r.log.Info("record: writing records again", "dir", r.opts.Dir)
	}
}

// failure counts a record not written and logs the first failure of an
// outage (the next success ends the outage).
func (r *Recorder) failure(err error) {
	r.failed.Add(1)
	if !r.failing {
		r.failing = true
		r.log.Error("record: cannot write records (requests are unaffected; further failures are counted, not logged)", "dir", r.opts.Dir, "err", err)
	}
}

var errTooLarge = errors.New("record larger than max_bytes")

// write encodes rec and writes it as the ring's newest file: evict the
// oldest files until it fits, write a temporary file 0600, rename it.
func (r *Recorder) write(rec *Record) error {
	if r.opts.RedactInstruction && rec.Request.Instruction != "" {
		rec.Request.Instruction, rec.Request.InstructionRedacted = "", true
	}
	b, err := Marshal(rec)
	if err != nil {
		return err
	}
	n := int64(len(b))
	if n > r.opts.MaxBytes {
		return fmt.Errorf("record: %d bytes: %w %d", n, errTooLarge, r.opts.MaxBytes)
	}
	if err := r.evict(n); err != nil {
		return err
	}
	r.seq++
	ts := rec.TimeUnixNS
	if ts <= 0 {
		ts = time.Now().UnixNano()
	}
	name := fmt.Sprintf("%019d-%06d%s", ts, r.seq%1_000_000, Ext)
	dir := r.opts.Dir
	tmp := filepath.Join(dir, ".tmp-"+name)
	f, err := r.create(tmp)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// The directory went away (or was never made): make it again.
			if err2 := os.MkdirAll(dir, 0o700); err2 == nil {
				f, err = r.create(tmp)
			}
		}
		if err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	// The temporary file counts against the bound while it exists.
	r.used += n
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		r.used -= n
		r.bytes.Store(r.used)
		return fmt.Errorf("record: %s: %w", name, err)
	}
	r.ring.PushBack(ringFile{filepath.Join(dir, name), n})
	r.bytes.Store(r.used)
	return nil
}

// evict deletes the oldest files until used + n ≤ MaxBytes.
func (r *Recorder) evict(n int64) error {
	for r.used+n > r.opts.MaxBytes {
		e := r.ring.Front()
		if e == nil {
			return fmt.Errorf("record: %d bytes do not fit max_bytes %d", r.used+n, r.opts.MaxBytes)
		}
		f := e.Value.(ringFile)
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("record: evict %s: %w", filepath.Base(f.path), err)
		}
		r.ring.Remove(e)
		r.used -= f.size
		r.evicted.Add(1)
		r.bytes.Store(r.used)
	}
	return nil
}
