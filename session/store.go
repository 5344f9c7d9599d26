// Package session keeps per-robot running context for real-time chunking
// (issue 27 point 2): for each session id, the embodiment and plugin
// version of its last prediction, that prediction's normalised action_pred
// (the chunk RTC seeds the next one with, ../shared/spec/rtc.md §4), the
// time it was produced, the raw state it was computed from (for
// rtc.mode reencode) and an estimate of the session's end-to-end
// latency. It also holds the pure functions that turn those measurements
// into RTC's server-side defaults (AutoFrozen, AutoOverlap).
//
// The package knows nothing of protocols, plugins or devices: a front end
// validates the id (ValidateID), the service looks the session up before a
// predict (Store.Lookup) and records the outcome after it (Store.Update).
package session

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultMaxSessions = 1024
	DefaultTTL         = 5 * time.Minute
	// DefaultMaxBytes holds DefaultMaxSessions sessions of a full N1.7
	// chunk (40 × 132 float32 = 21 120 B plus EntryOverhead and the ids)
	// about three times over.
	DefaultMaxBytes = 64 << 20
	// DefaultLatencyAlpha is the weight of a new latency sample in the
	// estimate (see State.Latency).
	DefaultLatencyAlpha = 0.25
)

// EntryOverhead is the bytes a session is charged beyond its strings and
// chunk: the entry struct, its map slot and list links, rounded up. The
// accounting (Stats.Bytes) is an estimate of what the store holds, not a
// measurement of the Go heap.
const EntryOverhead = 256

// RawGroupOverhead is the bytes a raw state group is charged beyond its
// key and values (the RawGroup header and its slice header).
const RawGroupOverhead = 64

// EvictReason says why a session left the store other than by Reset.
type EvictReason uint8

// Eviction reasons, in Stats.Evictions order.
const (
	// EvictTTL: unused for longer than Config.TTL.
	EvictTTL EvictReason = iota
	// EvictCapacity: the least recently used session, to admit a new one
	// beyond Config.MaxSessions.
	EvictCapacity
	// EvictBytes: the least recently used session, to keep Stats.Bytes
	// within Config.MaxBytes.
	EvictBytes
	numEvictReasons
)

// String returns the reason as a metric label: "ttl", "capacity", "bytes".
func (r EvictReason) String() string {
	if r < numEvictReasons {
		return evictReasonNames[r]
	}
	return fmt.Sprintf("EvictReason(%d)", uint8(r))
}

var evictReasonNames = [numEvictReasons]string{EvictTTL: "ttl", EvictCapacity: "capacity", EvictBytes: "bytes"}

// DropReason says why Lookup withheld a session's chunk; "" means it did not.
type DropReason string

// Drop reasons (reported to the client, so stable strings).
const (
	DropNone          DropReason = ""
	DropEmbodiment    DropReason = "embodiment_changed"
	DropPluginVersion DropReason = "plugin_version_changed"
)

// Config bounds a Store. The zero value of a field means its default; a
// negative value is refused by New.
type Config struct {
	// MaxSessions caps the sessions held (default 1024); admitting one
	// more evicts the least recently used (EvictCapacity).
	MaxSessions int
	// TTL is how long a session may stay unused (neither looked up nor
	// updated) before it expires (default 5 min). Expiry is lazy: every
	// Lookup, Get, Update, Len and Stats first drops the expired sessions
	// at the cold end of the LRU list, which costs O(expired); Sweep does
	// the same for a caller that wants a timer.
	TTL time.Duration
	// MaxBytes caps Stats.Bytes (default 64 MiB); an Update that would
	// exceed it evicts least recently used sessions (EvictBytes) and is
	// refused only if the session alone does not fit.
	MaxBytes int64
	// LatencyAlpha is the EWMA weight of a new latency sample, in (0, 1]
	// (default 0.25).
	LatencyAlpha float64
	// Now is the clock (default time.Now); tests inject a fake one.
	Now func() time.Time
	// OnEvict, if set, is called once per evicted session with its id and
	// the reason, after the store's lock is released (it may call the
	// store), on the goroutine whose call caused the eviction. Reset does
	// not call it.
	OnEvict func(id string, reason EvictReason)
}

// State is a snapshot of one session.
type State struct {
	ID string
	// Embodiment and PluginVersion are those of the last Update.
	Embodiment, PluginVersion string
	// Chunk is the last prediction's normalised action_pred, Rows × Cols
	// row-major, as the model produced it (padded columns included); nil
	// when the session has none, or Lookup withheld it (Dropped). The
	// store never writes a chunk after storing it and shares it with
	// every State: callers must not modify it (copy it to change it).
	Chunk      []float32
	Rows, Cols int
	// ProducedAt is when Chunk was produced (Update.ProducedAt).
	ProducedAt time.Time
	// RawState is the raw state of the request that produced Chunk and
	// StateDType its dtype ("float32"/"float64"), for rtc.mode reencode
	// (the plugin re-expresses Chunk against the current state from this
	// one: plugins' ReencodeInput.PrevState). Shared like Chunk: callers
	// must not modify it. Withheld with Chunk by the drop rule.
	RawState   []RawGroup
	StateDType string
	// Latency is the session's end-to-end latency estimate: an
	// exponentially weighted moving average of the samples given to
	// Update and ObserveLatency, est ← est + α·(sample − est) with α =
	// Config.LatencyAlpha, the first sample taken as is. With α = 0.25 a
	// step change is 90 % absorbed after 8 samples. 0 with LatencySamples
	// 0 means nothing was observed yet. An Update for another embodiment
	// starts the estimate afresh (another robot context).
	Latency        time.Duration
	LatencySamples int
	// LastUsed is the last Lookup or Update (the TTL counts from it).
	LastUsed time.Time
	// Dropped, set by Lookup only, says the session had a chunk that was
	// withheld because it came from another embodiment or plugin version.
	Dropped DropReason
}

// RawGroup is one raw state group of a request as the client sent it:
// Steps is 0 for a flat [D] list, else the number of timesteps of Values
// (row-major).
type RawGroup struct {
	Key    string
	Steps  int
	Values []float64
}

// Update is what a predict leaves in its session.
type Update struct {
	Embodiment, PluginVersion string
	// ActionPred is the prediction's normalised action_pred, Rows × Cols
	// row-major; Update copies it (the caller keeps ownership). Every
	// value must be finite. A nil ActionPred with Rows = Cols = 0 keeps no
	// chunk (e.g. a predict that failed after the session was named).
	ActionPred []float32
	Rows, Cols int
	// ProducedAt is when the chunk was produced; zero means the store's
	// clock now.
	ProducedAt time.Time
	// RawState and StateDType are the request's raw state and its dtype
	// (State.RawState); Update copies them. Optional: nil keeps none.
	RawState   []RawGroup
	StateDType string
	// Latency, when > 0, is an observed end-to-end latency sample for the
	// estimate (as ObserveLatency).
	Latency time.Duration
}

// Stats are the store's counters, for metrics.
type Stats struct {
	// Sessions and Bytes are what the store holds now (Bytes as charged:
	// strings + 4·len(chunk) + 8·len(raw state values) + RawGroupOverhead
	// per raw state group + EntryOverhead per session).
	Sessions int
	Bytes    int64
	// Evictions counts evicted sessions, indexed by EvictReason.
	Evictions [numEvictReasons]uint64
	// Resets counts sessions removed by Reset; Drops counts Lookups that
	// withheld a chunk (DropEmbodiment or DropPluginVersion).
	Resets, Drops uint64
}

// Errors of Update (wrapped, with the session id).
var (
	ErrChunkShape     = errors.New("action_pred shape does not match its length")
	ErrChunkNonFinite = errors.New("action_pred holds a non-finite value")
	ErrTooLarge       = errors.New("session larger than the store's max bytes")
)

// Store is a bounded, concurrency-safe map from session id to State, with
// least-recently-used eviction. All methods are safe for concurrent use;
// one mutex guards the store (a lookup holds it for well under a
// microsecond, see BenchmarkLookup).
type Store struct {
	cfg Config

	mu    sync.Mutex
	m     map[string]*entry
	head  entry // sentinel: head.next is the most recently used
	bytes int64
	stats Stats
}

type entry struct {
	prev, next *entry
	st         State
	cost       int64
}

// New returns an empty store bounded by cfg (defaults for zero fields).
// A negative bound, a TTL < 0 or a LatencyAlpha outside [0, 1] (0 is the
// default) is refused.
func New(cfg Config) (*Store, error) {
	switch {
	case cfg.MaxSessions < 0:
		return nil, fmt.Errorf("session: config max_sessions %d is negative", cfg.MaxSessions)
	case cfg.TTL < 0:
		return nil, fmt.Errorf("session: config ttl %v is negative", cfg.TTL)
	case cfg.MaxBytes < 0:
		return nil, fmt.Errorf("session: config max_bytes %d is negative", cfg.MaxBytes)
	case math.IsNaN(cfg.LatencyAlpha) || cfg.LatencyAlpha < 0 || cfg.LatencyAlpha > 1:
		return nil, fmt.Errorf("session: config latency_alpha %v is outside (0, 1]", cfg.LatencyAlpha)
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.LatencyAlpha == 0 {
		cfg.LatencyAlpha = DefaultLatencyAlpha
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Store{cfg: cfg, m: make(map[string]*entry)}
	s.head.next, s.head.prev = &s.head, &s.head
	return s, nil
}

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// evicted is a session removed under the lock, reported after it.
type evicted struct {
	id     string
	reason EvictReason
}

func (s *Store) notify(ev []evicted) {
	if s.cfg.OnEvict == nil {
		return
	}
	for _, e := range ev {
		s.cfg.OnEvict(e.id, e.reason)
	}
}

// Lookup returns the state a predict by embodiment at pluginVersion should
// use, and marks the session used (it moves to the hot end of the LRU list
// and its TTL restarts). ok is false for an unknown or expired id.
//
// The drop rule: when the session's chunk was produced by another
// embodiment or another plugin version, the returned State has no chunk
// (Chunk nil, Rows = Cols = 0) and Dropped names the change, so versions
// never mix. The stored chunk is left in place — the next Update replaces
// it — so a request refused after its Lookup leaves the session's data as
// it was; every Lookup until then reports the drop again.
func (s *Store) Lookup(id, embodiment, pluginVersion string) (st State, ok bool) {
	now := s.cfg.Now()
	s.mu.Lock()
	ev := s.expireLocked(now, nil)
	e := s.m[id]
	if e != nil {
		e.st.LastUsed = now
		s.moveFrontLocked(e)
		st = e.st
		ok = true
		if st.Chunk != nil {
			switch {
			case st.Embodiment != embodiment:
				st.Dropped = DropEmbodiment
			case st.PluginVersion != pluginVersion:
				st.Dropped = DropPluginVersion
			}
			if st.Dropped != DropNone {
				st.Chunk, st.Rows, st.Cols = nil, 0, 0
				st.RawState, st.StateDType = nil, ""
				s.stats.Drops++
			}
		}
	}
	s.mu.Unlock()
	s.notify(ev)
	return st, ok
}

// Get returns the session's stored state without applying the drop rule
// and without marking it used (for inspection, e.g. an admin endpoint).
func (s *Store) Get(id string) (State, bool) {
	now := s.cfg.Now()
	s.mu.Lock()
	ev := s.expireLocked(now, nil)
	e := s.m[id]
	var st State
	if e != nil {
		st = e.st
	}
	s.mu.Unlock()
	s.notify(ev)
	return st, e != nil
}

// Update records a predict's outcome in session id, creating the session
// if needed (evicting least recently used ones to stay within MaxSessions
// and MaxBytes), and returns the new state. It replaces the chunk,
// embodiment and plugin version, sets ProducedAt, adds u.Latency to the
// estimate and marks the session used. An invalid id (ValidateID), a
// chunk whose shape does not match its length or that holds a non-finite
// value, or a session larger than MaxBytes on its own is refused with the
// store unchanged.
func (s *Store) Update(id string, u Update) (State, error) {
	if err := ValidateID(id); err != nil {
		return State{}, err
	}
	if u.Rows < 0 || u.Cols < 0 || len(u.ActionPred) != u.Rows*u.Cols || (u.Rows*u.Cols == 0 && u.Rows+u.Cols != 0) {
		return State{}, fmt.Errorf("session[%s]: action_pred: %d values for [%d, %d]: %w", id, len(u.ActionPred), u.Rows, u.Cols, ErrChunkShape)
	}
	for i, v := range u.ActionPred {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return State{}, fmt.Errorf("session[%s]: action_pred[%d][%d] = %v: %w", id, i/u.Cols, i%u.Cols, v, ErrChunkNonFinite)
		}
	}
	cost := int64(EntryOverhead + len(id) + len(u.Embodiment) + len(u.PluginVersion) + len(u.StateDType) + 4*len(u.ActionPred))
	for _, g := range u.RawState {
		cost += int64(RawGroupOverhead + len(g.Key) + 8*len(g.Values))
	}
	if cost > s.cfg.MaxBytes {
		return State{}, fmt.Errorf("session[%s]: %d bytes, max_bytes %d: %w", id, cost, s.cfg.MaxBytes, ErrTooLarge)
	}
	var chunk []float32
	if len(u.ActionPred) > 0 {
		chunk = make([]float32, len(u.ActionPred))
		copy(chunk, u.ActionPred)
	}
	var raw []RawGroup
	if len(u.RawState) > 0 {
		raw = make([]RawGroup, len(u.RawState))
		for i, g := range u.RawState {
			raw[i] = RawGroup{Key: g.Key, Steps: g.Steps, Values: append([]float64(nil), g.Values...)}
		}
	}
	now := s.cfg.Now()
	produced := u.ProducedAt
	if produced.IsZero() {
		produced = now
	}

	s.mu.Lock()
	ev := s.expireLocked(now, nil)
	e := s.m[id]
	if e == nil {
		for len(s.m) >= s.cfg.MaxSessions {
			ev = s.evictLocked(s.head.prev, EvictCapacity, ev)
		}
		e = &entry{st: State{ID: id}}
		s.m[id] = e
		s.insertFrontLocked(e)
	} else {
		s.moveFrontLocked(e)
		s.bytes -= e.cost
		if e.st.Embodiment != u.Embodiment {
			e.st.Latency, e.st.LatencySamples = 0, 0
		}
	}
	e.cost = cost
	s.bytes += cost
	for s.bytes > s.cfg.MaxBytes && s.head.prev != e {
		ev = s.evictLocked(s.head.prev, EvictBytes, ev)
	}
	st := &e.st
	st.Embodiment, st.PluginVersion = u.Embodiment, u.PluginVersion
	st.Chunk, st.Rows, st.Cols = chunk, u.Rows, u.Cols
	st.RawState, st.StateDType = raw, u.StateDType
	st.ProducedAt = produced
	st.LastUsed = now
	if u.Latency > 0 {
		s.observeLocked(st, u.Latency)
	}
	out := *st
	s.mu.Unlock()
	s.notify(ev)
	return out, nil
}

// ObserveLatency adds an end-to-end latency sample (> 0) to session id's
// estimate, e.g. measured once the response was written; it reports
// whether the session exists. It does not mark the session used.
func (s *Store) ObserveLatency(id string, d time.Duration) bool {
	if d <= 0 {
		return false
	}
	s.mu.Lock()
	e := s.m[id]
	if e != nil {
		s.observeLocked(&e.st, d)
	}
	s.mu.Unlock()
	return e != nil
}

func (s *Store) observeLocked(st *State, d time.Duration) {
	if st.LatencySamples == 0 {
		st.Latency = d
	} else {
		est := float64(st.Latency) + s.cfg.LatencyAlpha*(float64(d)-float64(st.Latency))
		st.Latency = time.Duration(math.Round(est))
	}
	st.LatencySamples++
}

// Reset removes session id (issue 27: ZeroMQ `reset`, HTTP DELETE
// /v1/sessions/{id}, an openpi reconnect) and reports whether it existed.
// The next predict naming the id starts a new session. OnEvict is not
// called; Stats.Resets counts it.
func (s *Store) Reset(id string) bool {
	s.mu.Lock()
	e := s.m[id]
	if e != nil {
		s.removeLocked(e)
		s.stats.Resets++
	}
	s.mu.Unlock()
	return e != nil
}

// Sweep removes every expired session now and returns how many it removed.
func (s *Store) Sweep() int {
	now := s.cfg.Now()
	s.mu.Lock()
	ev := s.expireLocked(now, nil)
	s.mu.Unlock()
	s.notify(ev)
	return len(ev)
}

// Len returns the number of unexpired sessions.
func (s *Store) Len() int {
	return s.Stats().Sessions
}

// Stats returns the counters after expiring what is due.
func (s *Store) Stats() Stats {
	now := s.cfg.Now()
	s.mu.Lock()
	ev := s.expireLocked(now, nil)
	st := s.stats
	st.Sessions = len(s.m)
	st.Bytes = s.bytes
	s.mu.Unlock()
	s.notify(ev)
	return st
}

// expireLocked evicts the sessions unused for longer than TTL. The list is
// ordered by LastUsed (every use moves to the front), so they are exactly
// the run at its cold end.
func (s *Store) expireLocked(now time.Time, ev []evicted) []evicted {
	for e := s.head.prev; e != &s.head; e = s.head.prev {
		if now.Sub(e.st.LastUsed) <= s.cfg.TTL {
			break
		}
		ev = s.evictLocked(e, EvictTTL, ev)
	}
	return ev
}

func (s *Store) evictLocked(e *entry, why EvictReason, ev []evicted) []evicted {
	s.removeLocked(e)
	s.stats.Evictions[why]++
	return append(ev, evicted{e.st.ID, why})
}

func (s *Store) removeLocked(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	delete(s.m, e.st.ID)
	s.bytes -= e.cost
}

func (s *Store) insertFrontLocked(e *entry) {
	e.prev, e.next = &s.head, s.head.next
	s.head.next.prev = e
	s.head.next = e
}

func (s *Store) moveFrontLocked(e *entry) {
	if s.head.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	s.insertFrontLocked(e)
}
