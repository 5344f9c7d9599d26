package session

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a fake Config.Now, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// evictLog records OnEvict calls.
type evictLog struct {
	mu  sync.Mutex
	got []string
}

func (l *evictLog) add(id string, r EvictReason) {
	l.mu.Lock()
	l.got = append(l.got, id+":"+r.String())
	l.mu.Unlock()
}

func (l *evictLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.got
	l.got = nil
	return g
}

func newStore(tb testing.TB, cfg Config) (*Store, *clock, *evictLog) {
	tb.Helper()
	c, l := newClock(), &evictLog{}
	cfg.Now, cfg.OnEvict = c.Now, l.add
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s, c, l
}

// chunk returns a rows×cols chunk whose values encode seed, row and column.
func chunk(seed, rows, cols int) []float32 {
	c := make([]float32, rows*cols)
	for i := range c {
		c[i] = float32(seed) + float32(i)/float32(len(c))
	}
	return c
}

func upd(emb, ver string, seed int) Update {
	return Update{Embodiment: emb, PluginVersion: ver, ActionPred: chunk(seed, 40, 132), Rows: 40, Cols: 132}
}

func mustUpdate(tb testing.TB, s *Store, id string, u Update) State {
	tb.Helper()
	st, err := s.Update(id, u)
	if err != nil {
		tb.Fatalf("Update(%s): %v", id, err)
	}
	return st
}

func TestNewConfig(t *testing.T) {
	t.Parallel()
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config()
	if c.MaxSessions != 1024 || c.TTL != 5*time.Minute || c.MaxBytes != 64<<20 || c.LatencyAlpha != 0.25 || c.Now == nil {
		t.Errorf("defaults: %+v", c)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative max sessions", Config{MaxSessions: -1}, "max_sessions -1"},
		{"negative ttl", Config{TTL: -time.Second}, "ttl -1s"},
		{"negative max bytes", Config{MaxBytes: -1}, "max_bytes -1"},
		{"alpha above 1", Config{LatencyAlpha: 1.5}, "latency_alpha 1.5"},
		{"alpha NaN", Config{LatencyAlpha: math.NaN()}, "latency_alpha NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
			}
		})
	}
}

func TestUpdateLookup(t *testing.T) {
	t.Parallel()
	s, c, _ := newStore(t, Config{})
	if _, ok := s.Lookup("r1", "droid", "1.0.0"); ok {
		t.Fatal("Lookup of an unknown session: ok")
	}
	u := upd("droid", "1.0.0", 1)
	u.Latency = 120 * time.Millisecond
	produced := c.Now().Add(-5 * time.Millisecond)
	u.ProducedAt = produced
	mustUpdate(t, s, "r1", u)
	u.ActionPred[0] = 99 // the store copied it
	c.Advance(time.Second)

	st, ok := s.Lookup("r1", "droid", "1.0.0")
	if !ok {
		t.Fatal("Lookup after Update: not found")
	}
	want := State{
		ID: "r1", Embodiment: "droid", PluginVersion: "1.0.0",
		Chunk: chunk(1, 40, 132), Rows: 40, Cols: 132, ProducedAt: produced,
		Latency: 120 * time.Millisecond, LatencySamples: 1, LastUsed: c.Now(),
	}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("Lookup = %+v\nwant %+v", summary(st), summary(want))
	}
	// A zero ProducedAt is the store's clock.
	st = mustUpdate(t, s, "r1", upd("droid", "1.0.0", 2))
	if !st.ProducedAt.Equal(c.Now()) {
		t.Errorf("ProducedAt = %v, want now %v", st.ProducedAt, c.Now())
	}
	// Get does not mark the session used.
	c.Advance(time.Second)
	if g, _ := s.Get("r1"); !g.LastUsed.Equal(c.Now().Add(-time.Second)) {
		t.Errorf("Get moved LastUsed to %v", g.LastUsed)
	}
}

func summary(s State) string {
	return fmt.Sprintf("{%s %s %s rows %d cols %d len %d produced %v latency %v/%d used %v dropped %q}",
		s.ID, s.Embodiment, s.PluginVersion, s.Rows, s.Cols, len(s.Chunk), s.ProducedAt, s.Latency, s.LatencySamples, s.LastUsed, s.Dropped)
}

func TestDropRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		emb, ver string
		want     DropReason
	}{
		{"same", "droid", "1.0.0", DropNone},
		{"other plugin version", "droid", "1.1.0", DropPluginVersion},
		{"other embodiment", "libero_sim", "1.0.0", DropEmbodiment},
		{"both changed: embodiment named", "libero_sim", "2.0.0", DropEmbodiment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _, _ := newStore(t, Config{})
			mustUpdate(t, s, "r", upd("droid", "1.0.0", 7))
			for range 2 { // reported again until an Update replaces the chunk
				st, ok := s.Lookup("r", tc.emb, tc.ver)
				if !ok || st.Dropped != tc.want {
					t.Fatalf("Lookup(%s, %s) = ok %v dropped %q, want %q", tc.emb, tc.ver, ok, st.Dropped, tc.want)
				}
				if (st.Chunk == nil) != (tc.want != DropNone) || (tc.want != DropNone && (st.Rows != 0 || st.Cols != 0)) {
					t.Fatalf("Lookup(%s, %s): chunk len %d rows %d cols %d with dropped %q", tc.emb, tc.ver, len(st.Chunk), st.Rows, st.Cols, st.Dropped)
				}
			}
			// The stored chunk is untouched (a refused request changes nothing).
			if g, _ := s.Get("r"); !reflect.DeepEqual(g.Chunk, chunk(7, 40, 132)) || g.Dropped != DropNone {
				t.Fatalf("Get after Lookup: stored chunk changed (dropped %q)", g.Dropped)
			}
			wantDrops := uint64(0)
			if tc.want != DropNone {
				wantDrops = 2
			}
			if d := s.Stats().Drops; d != wantDrops {
				t.Errorf("Stats.Drops = %d, want %d", d, wantDrops)
			}
			// After an Update by the new embodiment/version the chunk is used again.
			mustUpdate(t, s, "r", upd(tc.emb, tc.ver, 8))
			if st, _ := s.Lookup("r", tc.emb, tc.ver); st.Dropped != DropNone || !reflect.DeepEqual(st.Chunk, chunk(8, 40, 132)) {
				t.Errorf("after Update: dropped %q, chunk len %d", st.Dropped, len(st.Chunk))
			}
		})
	}
	// A session without a chunk drops nothing.
	s, _, _ := newStore(t, Config{})
	mustUpdate(t, s, "r", Update{Embodiment: "droid", PluginVersion: "1.0.0"})
	if st, ok := s.Lookup("r", "libero_sim", "9.9.9"); !ok || st.Dropped != DropNone {
		t.Errorf("no chunk: ok %v dropped %q", ok, st.Dropped)
	}
}

func TestLatencyEstimate(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t, Config{})
	ms := time.Millisecond
	mustUpdate(t, s, "r", upd("droid", "1", 0))
	if st, _ := s.Get("r"); st.Latency != 0 || st.LatencySamples != 0 {
		t.Fatalf("no sample: %v/%d", st.Latency, st.LatencySamples)
	}
	steps := []struct {
		sample, want time.Duration
	}{
		{100 * ms, 100 * ms},                    // first sample as is
		{200 * ms, 125 * ms},                    // 100 + 0.25·100
		{200 * ms, 143750 * time.Microsecond},   // 125 + 0.25·75
		{-ms, 143750 * time.Microsecond},        // ignored
		{0, 143750 * time.Microsecond},          // ignored
		{100 * ms, 132812500 * time.Nanosecond}, // 143.75 − 0.25·43.75
	}
	n := 0
	for i, step := range steps {
		if i%2 == 0 {
			u := upd("droid", "1", i)
			u.Latency = step.sample
			mustUpdate(t, s, "r", u)
		} else {
			s.ObserveLatency("r", step.sample)
		}
		if step.sample > 0 {
			n++
		}
		st, _ := s.Get("r")
		if st.Latency != step.want || st.LatencySamples != n {
			t.Fatalf("after sample %d (%v): %v/%d, want %v/%d", i, step.sample, st.Latency, st.LatencySamples, step.want, n)
		}
	}
	if s.ObserveLatency("unknown", ms) {
		t.Error("ObserveLatency of an unknown session reported true")
	}
	// Another embodiment starts the estimate afresh; another version does not.
	u := upd("droid", "2", 0)
	u.Latency = 300 * ms
	if st := mustUpdate(t, s, "r", u); st.LatencySamples != n+1 {
		t.Errorf("version change reset the estimate: %d samples", st.LatencySamples)
	}
	u = upd("libero_sim", "2", 0)
	u.Latency = 50 * ms
	if st := mustUpdate(t, s, "r", u); st.Latency != 50*ms || st.LatencySamples != 1 {
		t.Errorf("embodiment change: %v/%d, want 50ms/1", st.Latency, st.LatencySamples)
	}
	// α = 1 follows the last sample.
	s1, _, _ := newStore(t, Config{LatencyAlpha: 1})
	for _, d := range []time.Duration{10 * ms, 70 * ms} {
		u := upd("droid", "1", 0)
		u.Latency = d
		if st := mustUpdate(t, s1, "r", u); st.Latency != d {
			t.Errorf("alpha 1: %v, want %v", st.Latency, d)
		}
	}
}

func TestUpdateErrors(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t, Config{MaxBytes: 4096})
	mustUpdate(t, s, "ok", Update{Embodiment: "e", PluginVersion: "1", ActionPred: chunk(1, 2, 3), Rows: 2, Cols: 3})
	before := s.Stats()
	nan := chunk(1, 2, 3)
	nan[4] = float32(math.NaN())
	inf := chunk(1, 2, 3)
	inf[0] = float32(math.Inf(-1))
	for _, tc := range []struct {
		name string
		id   string
		u    Update
		is   error
		want string
	}{
		{"bad id", "a b", Update{}, ErrInvalidID, "session: "},
		{"empty id", "", Update{}, ErrInvalidID, "session: empty"},
		{"short chunk", "ok", Update{ActionPred: chunk(1, 2, 3)[:5], Rows: 2, Cols: 3}, ErrChunkShape, "session[ok]: action_pred: 5 values for [2, 3]"},
		{"rows without cols", "ok", Update{Rows: 2}, ErrChunkShape, "[2, 0]"},
		{"negative rows", "ok", Update{Rows: -1, Cols: -3, ActionPred: chunk(1, 1, 3)}, ErrChunkShape, "[-1, -3]"},
		{"NaN", "ok", Update{ActionPred: nan, Rows: 2, Cols: 3}, ErrChunkNonFinite, "action_pred[1][1] = NaN"},
		{"Inf", "ok", Update{ActionPred: inf, Rows: 2, Cols: 3}, ErrChunkNonFinite, "action_pred[0][0] = -Inf"},
		{"too large", "big", Update{ActionPred: chunk(1, 40, 132), Rows: 40, Cols: 132}, ErrTooLarge, "session[big]: 21379 bytes, max_bytes 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Update(tc.id, tc.u)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Update = %v, want %v containing %q", err, tc.is, tc.want)
			}
		})
	}
	if after := s.Stats(); after != before {
		t.Errorf("refused updates changed the store: %+v → %+v", before, after)
	}
	if st, _ := s.Get("ok"); !reflect.DeepEqual(st.Chunk, chunk(1, 2, 3)) {
		t.Error("refused update changed the session's chunk")
	}
}

func TestTTL(t *testing.T) {
	t.Parallel()
	s, c, l := newStore(t, Config{TTL: time.Minute})
	mustUpdate(t, s, "a", upd("e", "1", 1))
	c.Advance(30 * time.Second)
	mustUpdate(t, s, "b", upd("e", "1", 2))
	c.Advance(30 * time.Second) // a is exactly TTL old: kept
	if _, ok := s.Get("a"); !ok {
		t.Fatal("a expired at exactly TTL")
	}
	c.Advance(time.Nanosecond)
	if _, ok := s.Get("a"); ok {
		t.Fatal("a not expired after TTL")
	}
	if got := l.take(); !reflect.DeepEqual(got, []string{"a:ttl"}) {
		t.Errorf("OnEvict = %v", got)
	}
	// A Lookup restarts b's TTL.
	c.Advance(20 * time.Second)
	if _, ok := s.Lookup("b", "e", "1"); !ok {
		t.Fatal("b expired early")
	}
	c.Advance(50 * time.Second)
	if s.Len() != 1 {
		t.Fatalf("Len = %d after b's Lookup, want 1", s.Len())
	}
	// Sweep removes what is due without a lookup.
	c.Advance(11 * time.Second)
	if n := s.Sweep(); n != 1 || s.Len() != 0 {
		t.Fatalf("Sweep = %d, Len = %d", n, s.Len())
	}
	st := s.Stats()
	if st.Evictions[EvictTTL] != 2 || st.Bytes != 0 || st.Sessions != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestLRUCapacity(t *testing.T) {
	t.Parallel()
	s, c, l := newStore(t, Config{MaxSessions: 3})
	for _, id := range []string{"a", "b", "c"} {
		mustUpdate(t, s, id, upd("e", "1", 0))
		c.Advance(time.Millisecond)
	}
	s.Lookup("a", "e", "1") // a is now the most recently used; b the least
	mustUpdate(t, s, "d", upd("e", "1", 0))
	mustUpdate(t, s, "c", upd("e", "1", 0)) // an update of a held session evicts nothing
	mustUpdate(t, s, "e", upd("e", "1", 0))
	if got := l.take(); !reflect.DeepEqual(got, []string{"b:capacity", "a:capacity"}) {
		t.Errorf("evicted %v, want b then a", got)
	}
	for id, want := range map[string]bool{"a": false, "b": false, "c": true, "d": true, "e": true} {
		if _, ok := s.Get(id); ok != want {
			t.Errorf("Get(%s) ok = %v, want %v", id, ok, want)
		}
	}
	if st := s.Stats(); st.Evictions[EvictCapacity] != 2 || st.Sessions != 3 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestMaxBytes(t *testing.T) {
	t.Parallel()
	const one = EntryOverhead + 1 + 1 + 1 + 40*132*4 // id, embodiment, version of one byte each
	s, _, l := newStore(t, Config{MaxBytes: 3*one + one/2})
	for _, id := range []string{"a", "b", "c"} {
		mustUpdate(t, s, id, upd("e", "1", 0))
	}
	if st := s.Stats(); st.Bytes != 3*one {
		t.Fatalf("Bytes = %d, want %d", st.Bytes, 3*one)
	}
	mustUpdate(t, s, "d", upd("e", "1", 0))
	if got := l.take(); !reflect.DeepEqual(got, []string{"a:bytes"}) {
		t.Errorf("evicted %v, want a", got)
	}
	// Growing a session's chunk is charged too; shrinking it is credited.
	mustUpdate(t, s, "d", Update{Embodiment: "e", PluginVersion: "1", ActionPred: chunk(0, 1, 1), Rows: 1, Cols: 1})
	if st := s.Stats(); st.Bytes != 2*one+EntryOverhead+3+4 {
		t.Errorf("after shrinking d: Bytes = %d", st.Bytes)
	}
	if !s.Reset("b") || s.Reset("b") {
		t.Error("Reset: want true, then false")
	}
	if st := s.Stats(); st.Bytes != one+EntryOverhead+3+4 || st.Resets != 1 || st.Sessions != 2 || st.Evictions[EvictBytes] != 1 {
		t.Errorf("after Reset: %+v", st)
	}
	if got := l.take(); len(got) != 0 {
		t.Errorf("Reset called OnEvict: %v", got)
	}
}

// TestOnEvictMayCallStore: the callback runs after the lock is released.
func TestOnEvictMayCallStore(t *testing.T) {
	t.Parallel()
	var s *Store
	var lens []int
	s, err := New(Config{MaxSessions: 1, OnEvict: func(string, EvictReason) { lens = append(lens, s.Len()) }})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, "a", upd("e", "1", 0))
	mustUpdate(t, s, "b", upd("e", "1", 0))
	if !reflect.DeepEqual(lens, []int{1}) {
		t.Errorf("Len in OnEvict = %v, want [1]", lens)
	}
}

// TestConcurrent hammers one store from many goroutines (run with -race):
// the bounds hold at every observation and the accounting adds up.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	const goroutines = 32
	iters := 2000
	if testing.Short() {
		iters = 200
	}
	var evictions atomic.Int64
	c := newClock()
	s, err := New(Config{MaxSessions: 48, TTL: 50 * time.Millisecond, Now: c.Now,
		OnEvict: func(string, EvictReason) { evictions.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range iters {
				id := fmt.Sprintf("robot-%d", (g*7+i)%64)
				emb := []string{"droid", "libero_sim"}[i%2]
				switch i % 5 {
				case 0, 1:
					st, err := s.Update(id, Update{Embodiment: emb, PluginVersion: "1", ActionPred: chunk(g, 4, 3), Rows: 4, Cols: 3, Latency: time.Duration(i) * time.Microsecond})
					if err != nil || len(st.Chunk) != 12 {
						t.Errorf("Update: %v", err)
						return
					}
				case 2:
					if st, ok := s.Lookup(id, emb, "1"); ok && st.Chunk != nil && (st.Embodiment != emb || len(st.Chunk) != st.Rows*st.Cols) {
						t.Errorf("Lookup(%s, %s): a chunk of %s, %d values", id, emb, st.Embodiment, len(st.Chunk))
						return
					}
				case 3:
					if i%50 == 3 {
						s.Reset(id)
					} else {
						s.ObserveLatency(id, time.Millisecond)
					}
				case 4:
					if g == 0 {
						c.Advance(time.Millisecond)
					}
					if st := s.Stats(); st.Sessions > 48 || st.Bytes > s.Config().MaxBytes {
						t.Errorf("bounds exceeded: %+v", st)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	var ev uint64
	for _, n := range st.Evictions {
		ev += n
	}
	if int64(ev) != evictions.Load() {
		t.Errorf("Stats.Evictions sum %d, OnEvict calls %d", ev, evictions.Load())
	}
	// The byte account equals the sum of the held sessions' charges.
	var sum int64
	s.mu.Lock()
	n := 0
	for e := s.head.next; e != &s.head; e = e.next {
		sum += e.cost
		n++
	}
	held := len(s.m)
	s.mu.Unlock()
	if sum != st.Bytes || n != held || n != st.Sessions {
		t.Errorf("account: bytes %d vs sum %d, list %d vs map %d vs stats %d", st.Bytes, sum, n, held, st.Sessions)
	}
}

// TestRawState: the request's raw state is kept (copied) with the chunk
// for rtc.mode reencode, charged to the byte account, and withheld with
// the chunk by the drop rule.
func TestRawState(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t, Config{})
	raw := []RawGroup{{Key: "eef_9d", Values: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}}, {Key: "joint_position", Steps: 1, Values: []float64{1, 2, 3, 4, 5, 6, 7}}}
	u := upd("droid", "1", 0)
	u.RawState, u.StateDType = raw, "float64"
	mustUpdate(t, s, "r", u)
	raw[0].Values[0] = 99 // the store copied it
	st, _ := s.Lookup("r", "droid", "1")
	want := []RawGroup{{Key: "eef_9d", Values: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}}, {Key: "joint_position", Steps: 1, Values: []float64{1, 2, 3, 4, 5, 6, 7}}}
	if !reflect.DeepEqual(st.RawState, want) || st.StateDType != "float64" {
		t.Errorf("RawState = %v %q, want %v float64", st.RawState, st.StateDType, want)
	}
	wantBytes := int64(EntryOverhead + 1 + 5 + 1 + 7 + 40*132*4 + 2*RawGroupOverhead + 6 + 14 + 8*16)
	if b := s.Stats().Bytes; b != wantBytes {
		t.Errorf("Bytes = %d, want %d", b, wantBytes)
	}
	if st, _ := s.Lookup("r", "droid", "2"); st.RawState != nil || st.StateDType != "" || st.Dropped != DropPluginVersion {
		t.Errorf("dropped chunk kept its raw state: %+v", st.RawState)
	}
	// An Update without a raw state keeps none.
	mustUpdate(t, s, "r", upd("droid", "1", 0))
	if st, _ := s.Get("r"); st.RawState != nil {
		t.Errorf("RawState = %v after an Update without one", st.RawState)
	}
}

func TestEvictReasonString(t *testing.T) {
	for r, want := range map[EvictReason]string{EvictTTL: "ttl", EvictCapacity: "capacity", EvictBytes: "bytes", numEvictReasons: "EvictReason(3)"} {
		if got := r.String(); got != want {
			t.Errorf("EvictReason(%d).String() = %q, want %q", uint8(r), got, want)
		}
	}
}
