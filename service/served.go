package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The served set: every embodiment the gateway answers for, each a
// warmed-up Binding, plus the tags it refused and why. It is an immutable
// snapshot behind an atomic pointer: requests read it without locks;
// start-up and reloads build the next snapshot under setMu, one embodiment
// at a time, so a change to one embodiment never blocks requests to
// another.

// entry is one served embodiment.
type entry struct {
	tag      string
	b        *Binding
	info     EmbodimentInfo // b.Embodiment.Describe() when it was bound
	revision string
	source   string
	warm     WarmupReport
	since    time.Time
	gate     *entryGate // nil: policy off (service/safety.go)

	mu      sync.Mutex
	refs    int
	retired bool
	onIdle  func() // set by retire; run once when refs reaches zero
}

// acquire takes a reference for one request; false once retired.
func (e *entry) acquire() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.retired {
		return false
	}
	e.refs++
	return true
}

// release drops a request's reference; the last one out of a retired
// entry runs its close.
func (e *entry) release() {
	e.mu.Lock()
	e.refs--
	var fn func()
	if e.refs == 0 && e.retired {
		fn, e.onIdle = e.onIdle, nil
	}
	e.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// retire stops new requests and runs closeFn once the in-flight ones have
// released the entry (at once when there are none).
func (e *entry) retire(closeFn func()) {
	e.mu.Lock()
	if e.retired {
		e.mu.Unlock()
		return
	}
	e.retired = true
	if e.refs > 0 {
		e.onIdle = closeFn
		closeFn = nil
	}
	e.mu.Unlock()
	if closeFn != nil {
		closeFn()
	}
}

// Refusal is why a tag, or a new revision of a served tag, is not served.
type Refusal struct {
	Revision string    `json:"revision,omitempty"`
	Source   string    `json:"source,omitempty"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// servedSet is one immutable snapshot of the served embodiments.
type servedSet struct {
	entries  map[string]*entry
	refused  map[string]Refusal // the latest refusal per tag
	starting map[string]bool    // scanned at start-up, warm-up not finished
	tags     []string           // sorted keys of entries
}

func (s *servedSet) clone() *servedSet {
	n := &servedSet{entries: map[string]*entry{}, refused: map[string]Refusal{}, starting: map[string]bool{}}
	if s != nil {
		for k, v := range s.entries {
			n.entries[k] = v
		}
		for k, v := range s.refused {
			n.refused[k] = v
		}
		for k, v := range s.starting {
			n.starting[k] = v
		}
	}
	return n
}

// update applies fn to a copy of the current set and publishes it.
func (s *Core) update(fn func(next *servedSet)) {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	next := s.set.Load().clone()
	fn(next)
	next.tags = sortedKeys(next.entries)
	s.set.Store(next)
}

// The kinds of Change.
const (
	ChangeAdded     = "added"     // a new embodiment serves
	ChangeReplaced  = "replaced"  // a new revision serves; the previous one is retired
	ChangeRetired   = "retired"   // no longer in the catalog: not served
	ChangeRefused   = "refused"   // the candidate failed; what served keeps serving
	ChangeUnchanged = "unchanged" // the served revision is the catalog's
)

// Change is one outcome of start-up or a reload for one embodiment,
// logged, counted (gateway.embodiment.changes) and returned by
// POST /admin/reload.
type Change struct {
	Embodiment    string `json:"embodiment"`
	Change        string `json:"change"` // one of the Change* kinds
	Revision      string `json:"revision,omitempty"`
	Plugin        string `json:"plugin,omitempty"`
	PluginVersion string `json:"plugin_version,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// wanted returns the tags to serve from a scan: config key embodiments
// when set (the default always included), else every scanned tag; the
// default first, then the rest in order.
func (s *Core) wanted(cands map[string]*Candidate) []string {
	def := s.cfg.Embodiment
	var tags []string
	if len(s.cfg.Embodiments) > 0 {
		tags = append(tags, s.cfg.Embodiments...)
	} else {
		tags = sortedKeys(cands)
	}
	slices.Sort(tags)
	tags = slices.Compact(tags)
	out := []string{def}
	for _, t := range tags {
		if t != def {
			out = append(out, t)
		}
	}
	return out
}

func indexCandidates(cs []Candidate) map[string]*Candidate {
	m := make(map[string]*Candidate, len(cs))
	for i := range cs {
		m[cs[i].Tag] = &cs[i]
	}
	return m
}

// bind brings tag to the scanned candidate c: nothing when the served
// revision equals it; otherwise open, check and warm up the candidate and,
// only when all of that passes, swap it in and retire the previous
// binding. A failure refuses the candidate and leaves what was serving
// untouched.
func (s *Core) bind(ctx context.Context, deps *Deps, tag string, c *Candidate) Change {
	return s.bindWith(ctx, deps, tag, c, s.warmup)
}

// bindWith is bind with warm as the warm-up of the new binding (Start
// binds the default embodiment with the device gate: gateDevices).
func (s *Core) bindWith(ctx context.Context, deps *Deps, tag string, c *Candidate, warm func(context.Context, *Deps, *entry) error) Change {
	cur := s.set.Load().entries[tag]
	if c == nil {
		return s.refuse(tag, Candidate{Tag: tag}, cur, errNoCandidate)
	}
	if cur != nil && cur.revision == c.Revision {
		s.update(func(n *servedSet) { delete(n.refused, tag) })
		return Change{Embodiment: tag, Change: ChangeUnchanged, Revision: c.Revision, Plugin: cur.info.Plugin, PluginVersion: cur.info.PluginVersion}
	}
	if c.Err != nil {
		return s.refuse(tag, *c, cur, c.Err)
	}
	t0 := time.Now()
	b, err := deps.Catalog.Open(ctx, *c)
	if err != nil {
		return s.refuse(tag, *c, cur, err)
	}
	e := &entry{tag: tag, b: b, info: b.Embodiment.Describe(), revision: c.Revision, source: c.Source}
	if err := s.checkBinding(deps, e); err != nil {
		s.closeBinding(b)
		return s.refuse(tag, *c, cur, err)
	}
	if err := warm(ctx, deps, e); err != nil {
		s.closeBinding(b)
		return s.refuse(tag, *c, cur, err)
	}
	e.since = time.Now()
	s.update(func(n *servedSet) {
		n.entries[tag] = e
		delete(n.refused, tag)
		delete(n.starting, tag)
	})
	ch := Change{Embodiment: tag, Change: ChangeAdded, Revision: c.Revision, Plugin: e.info.Plugin, PluginVersion: e.info.PluginVersion}
	if cur != nil {
		ch.Change = ChangeReplaced
		s.retire(cur)
	}
	s.log.Info("embodiment "+ch.Change, "embodiment", tag, "plugin", e.info.Plugin, "plugin_version", e.info.PluginVersion,
		"slot", e.info.ID, "revision", c.Revision, "source", c.Source, "ms", ms(time.Since(t0)))
	s.countChange(ch)
	return ch
}

// refuse records why c was not served. What was serving keeps serving.
func (s *Core) refuse(tag string, c Candidate, cur *entry, err error) Change {
	reason := err.Error()
	s.update(func(n *servedSet) {
		n.refused[tag] = Refusal{Revision: c.Revision, Source: c.Source, Reason: reason, At: time.Now()}
		delete(n.starting, tag)
	})
	args := []any{"embodiment", tag, "revision", c.Revision, "source", c.Source, "reason", reason}
	if cur != nil {
		args = append(args, "still_serving", cur.info.Plugin+" "+cur.info.PluginVersion)
	}
	s.log.Error("embodiment refused", args...)
	ch := Change{Embodiment: tag, Change: ChangeRefused, Revision: c.Revision, Reason: reason}
	s.countChange(ch)
	return ch
}

// remove retires a served tag that is no longer wanted. (The default
// embodiment is always wanted: a reload that finds no plugin for it
// refuses that, and the loaded version keeps serving.)
func (s *Core) remove(tag string) Change {
	cur := s.set.Load().entries[tag]
	s.update(func(n *servedSet) {
		delete(n.entries, tag)
		delete(n.refused, tag)
	})
	s.retire(cur)
	s.log.Info("embodiment retired", "embodiment", tag, "plugin", cur.info.Plugin, "plugin_version", cur.info.PluginVersion)
	ch := Change{Embodiment: tag, Change: ChangeRetired, Revision: cur.revision, Plugin: cur.info.Plugin, PluginVersion: cur.info.PluginVersion}
	s.countChange(ch)
	return ch
}

// retire closes e's binding once its in-flight requests are done.
func (s *Core) retire(e *entry) {
	e.retire(func() { s.closeBinding(e.b) })
}

// closeBinding closes b in the background (tracked: Shutdown waits).
func (s *Core) closeBinding(b *Binding) {
	if b.Close == nil {
		return
	}
	s.bg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			s.log.Warn("closing embodiment binding", "embodiment", b.Embodiment.Describe().Name, "err", err)
		}
	})
}

func (s *Core) countChange(ch Change) {
	s.inst.changes.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("embodiment", ch.Embodiment), attribute.String("change", ch.Change)))
}

// checkBinding is the gateway's part of the checks every binding passes,
// at start-up and on reload alike (the catalog has run the checkpoint and
// plugin checks in Open).
func (s *Core) checkBinding(deps *Deps, e *entry) error {
	b := e.b
	if b.Embodiment == nil || b.Encoder == nil {
		return errors.New("catalog returned an incomplete binding (need embodiment and encoder)")
	}
	if e.info.Name != e.tag {
		return fmt.Errorf("plugin %s describes embodiment %s, the catalog lists it as %s", e.info.Plugin, e.info.Name, e.tag)
	}
	if h, eh := deps.Model.ActionHorizon, e.info.ActionHorizon; eh <= 0 || h < 0 || (h > 0 && h < eh) {
		return fmt.Errorf("embodiment action horizon %d is outside the model's action_horizon %d (denoised steps)", eh, h)
	}
	if len(e.info.ActionGroups) == 0 {
		return errors.New("plugin declares no action groups")
	}
	g, err := s.newGate(e) // service/safety.go
	if err != nil {
		return err
	}
	e.gate = g
	return nil
}

// route finds the entry serving tag ("" is the default) in the current
// served set, without taking a reference, or explains why there is none:
// 503 while not ready, 400 naming embodiment and listing the served tags,
// or 503 while the tag is still warming up at start-up.
func (s *Core) route(tag string) (*servedSet, *entry, error) {
	if tag == "" {
		tag = s.cfg.Embodiment
	}
	set := s.set.Load()
	if set == nil {
		return nil, nil, notReady(s.state.Load())
	}
	e, ok := set.entries[tag]
	if !ok {
		return nil, nil, s.unserved(set, tag)
	}
	return set, e, nil
}

// lookup takes a reference on the entry serving tag ("" is the default),
// or explains why there is none (route's errors).
func (s *Core) lookup(tag string) (*entry, error) {
	for {
		set, e, err := s.route(tag)
		if err != nil {
			return nil, err
		}
		if e.acquire() {
			return e, nil
		}
		// Retired between the load and the acquire: the next snapshot
		// holds its successor (or no longer holds the tag), unless the
		// server closed (closeAll retires every entry of the last one).
		if s.set.Load() == set {
			return nil, notReady(StateDraining)
		}
	}
}

func (s *Core) unserved(set *servedSet, tag string) error {
	served := fmt.Sprintf("served: [%s]", strings.Join(set.tags, ", "))
	if set.starting[tag] {
		return &HandlerError{Status: http.StatusServiceUnavailable, Code: CodeStarting, RetryAfter: 1, Field: fieldEmbodiment,
			Err: fmt.Errorf("embodiment %q is starting (warm-up not complete; %s)", tag, served)}
	}
	if r, ok := set.refused[tag]; ok {
		return invalid(fieldEmbodiment, "embodiment: %q is not served: its plugin was refused: %s (%s)", tag, r.Reason, served)
	}
	return invalid(fieldEmbodiment, "embodiment: %q is not served (%s)", tag, served)
}

// defaultEntry is the default embodiment's entry without a reference
// (for /info and the like); nil before start-up bound it.
func (s *Core) defaultEntry() *entry {
	set := s.set.Load()
	if set == nil {
		return nil
	}
	return set.entries[s.cfg.Embodiment]
}

// Reload re-reads the catalog: embodiments that appeared are added, those
// whose revision changed are replaced, those that disappeared are retired.
// Every new binding passes the checks and the warm-up that start-up runs
// before it takes traffic; one that fails is refused and the version that
// was serving keeps serving. In-flight requests finish on the binding they
// started with. Reloads run one at a time. The returned changes list every
// embodiment; err is non-nil when the reload could not run or refused
// something.
func (s *Core) Reload(ctx context.Context) ([]Change, error) {
	deps := s.deps.Load()
	if deps == nil || s.state.Load() != StateReady {
		return nil, fmt.Errorf("reload: server is %s", s.state.Load().String())
	}
	done, ok := s.bg.Add()
	if !ok {
		return nil, errors.New("reload: server is shutting down")
	}
	defer done()
	ctx, cancel := mergeCancel(ctx, s.baseCtx)
	defer cancel()
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	start := time.Now()
	cands, err := deps.Catalog.Scan(ctx)
	if err != nil {
		s.log.Error("reload: scan failed; the served set is unchanged", "err", err)
		return nil, fmt.Errorf("reload: %w", err)
	}
	byTag := indexCandidates(cands)
	want := s.wanted(byTag)
	var out []Change
	for _, tag := range want {
		if ctx.Err() != nil {
			break
		}
		out = append(out, s.bind(ctx, deps, tag, byTag[tag]))
	}
	for _, tag := range s.set.Load().tags {
		if !slices.Contains(want, tag) {
			out = append(out, s.remove(tag))
		}
	}
	var refused []string
	for _, ch := range out {
		if ch.Change == ChangeRefused {
			refused = append(refused, ch.Embodiment)
		}
	}
	s.log.Info("reload done", "served", s.set.Load().tags, "refused", refused, "ms", ms(time.Since(start)))
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("reload: %w", err)
	}
	if len(refused) > 0 {
		return out, fmt.Errorf("reload: refused %s (the previous versions, if any, keep serving)", strings.Join(refused, ", "))
	}
	return out, nil
}

// mergeCancel returns a context cancelled when either parent is.
func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}
