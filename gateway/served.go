package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	warm     warmupReport
	since    time.Time

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

// refusal is why a tag, or a new revision of a served tag, is not served.
type refusal struct {
	Revision string    `json:"revision,omitempty"`
	Source   string    `json:"source,omitempty"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// servedSet is one immutable snapshot of the served embodiments.
type servedSet struct {
	entries  map[string]*entry
	refused  map[string]refusal // the latest refusal per tag
	starting map[string]bool    // scanned at start-up, warm-up not finished
	tags     []string           // sorted keys of entries
}

func (s *servedSet) clone() *servedSet {
	n := &servedSet{entries: map[string]*entry{}, refused: map[string]refusal{}, starting: map[string]bool{}}
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
func (s *Server) update(fn func(next *servedSet)) {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	next := s.set.Load().clone()
	fn(next)
	next.tags = sortedKeys(next.entries)
	s.set.Store(next)
}

// change is one outcome of start-up or a reload for one embodiment,
// logged, counted (gateway.embodiment.changes) and returned by
// POST /admin/reload.
type change struct {
	Embodiment    string `json:"embodiment"`
	Change        string `json:"change"` // added, replaced, retired, refused, unchanged
	Revision      string `json:"revision,omitempty"`
	Plugin        string `json:"plugin,omitempty"`
	PluginVersion string `json:"plugin_version,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// wanted returns the tags to serve from a scan: config key embodiments
// when set (the default always included), else every scanned tag; the
// default first, then the rest in order.
func (s *Server) wanted(cands map[string]*Candidate) []string {
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
func (s *Server) bind(ctx context.Context, deps *Deps, tag string, c *Candidate) change {
	return s.bindWith(ctx, deps, tag, c, s.warmup)
}

// bindWith is bind with warm as the warm-up of the new binding (Start
// binds the default embodiment with the device gate: gateDevices).
func (s *Server) bindWith(ctx context.Context, deps *Deps, tag string, c *Candidate, warm func(context.Context, *Deps, *entry) error) change {
	cur := s.set.Load().entries[tag]
	if c == nil {
		return s.refuse(tag, Candidate{Tag: tag}, cur, errNoCandidate)
	}
	if cur != nil && cur.revision == c.Revision {
		s.update(func(n *servedSet) { delete(n.refused, tag) })
		return change{Embodiment: tag, Change: "unchanged", Revision: c.Revision, Plugin: cur.info.Plugin, PluginVersion: cur.info.PluginVersion}
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
	ch := change{Embodiment: tag, Change: "added", Revision: c.Revision, Plugin: e.info.Plugin, PluginVersion: e.info.PluginVersion}
	if cur != nil {
		ch.Change = "replaced"
		s.retire(cur)
	}
	s.log.Info("embodiment "+ch.Change, "embodiment", tag, "plugin", e.info.Plugin, "plugin_version", e.info.PluginVersion,
		"slot", e.info.ID, "revision", c.Revision, "source", c.Source, "ms", ms(time.Since(t0)))
	s.countChange(ch)
	return ch
}

// refuse records why c was not served. What was serving keeps serving.
func (s *Server) refuse(tag string, c Candidate, cur *entry, err error) change {
	reason := err.Error()
	s.update(func(n *servedSet) {
		n.refused[tag] = refusal{Revision: c.Revision, Source: c.Source, Reason: reason, At: time.Now()}
		delete(n.starting, tag)
	})
	args := []any{"embodiment", tag, "revision", c.Revision, "source", c.Source, "reason", reason}
	if cur != nil {
		args = append(args, "still_serving", cur.info.Plugin+" "+cur.info.PluginVersion)
	}
	s.log.Error("embodiment refused", args...)
	ch := change{Embodiment: tag, Change: "refused", Revision: c.Revision, Reason: reason}
	s.countChange(ch)
	return ch
}

// remove retires a served tag that is no longer wanted. (The default
// embodiment is always wanted: a reload that finds no plugin for it
// refuses that, and the loaded version keeps serving.)
func (s *Server) remove(tag string) change {
	cur := s.set.Load().entries[tag]
	s.update(func(n *servedSet) {
		delete(n.entries, tag)
		delete(n.refused, tag)
	})
	s.retire(cur)
	s.log.Info("embodiment retired", "embodiment", tag, "plugin", cur.info.Plugin, "plugin_version", cur.info.PluginVersion)
	ch := change{Embodiment: tag, Change: "retired", Revision: cur.revision, Plugin: cur.info.Plugin, PluginVersion: cur.info.PluginVersion}
	s.countChange(ch)
	return ch
}

// retire closes e's binding once its in-flight requests are done.
func (s *Server) retire(e *entry) {
	e.retire(func() { s.closeBinding(e.b) })
}

// closeBinding closes b in the background (tracked: Shutdown waits).
func (s *Server) closeBinding(b *Binding) {
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

func (s *Server) countChange(ch change) {
	s.inst.changes.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("embodiment", ch.Embodiment), attribute.String("change", ch.Change)))
}

// checkBinding is the gateway's part of the checks every binding passes,
// at start-up and on reload alike (the catalog has run the checkpoint and
// plugin checks in Open).
func (s *Server) checkBinding(deps *Deps, e *entry) error {
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
	return nil
}

// lookup takes a reference on the entry serving tag ("" is the default),
// or explains why there is none: 400 naming embodiment and listing the
// served tags, or 503 while the tag is still warming up at start-up.
func (s *Server) lookup(tag string) (*entry, error) {
	if tag == "" {
		tag = s.cfg.Embodiment
	}
	for {
		set := s.set.Load()
		if set == nil {
			return nil, notReady(s.state.Load())
		}
		e, ok := set.entries[tag]
		if !ok {
			return nil, s.unserved(set, tag)
		}
		if e.acquire() {
			return e, nil
		}
		// Retired between the load and the acquire: the next snapshot
		// holds its successor (or no longer holds the tag), unless the
		// server closed (closeAll retires every entry of the last one).
		if s.set.Load() == set {
			return nil, notReady(stateDraining)
		}
	}
}

func (s *Server) unserved(set *servedSet, tag string) error {
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
func (s *Server) defaultEntry() *entry {
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
func (s *Server) Reload(ctx context.Context) ([]change, error) {
	deps := s.deps.Load()
	if deps == nil || s.state.Load() != stateReady {
		return nil, fmt.Errorf("reload: server is %s", stateName(s.state.Load()))
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
	var out []change
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
		if ch.Change == "refused" {
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

// warmupReport is the outcome of one embodiment's warm-up.
type warmupReport struct {
	LatencyMS []float64 `json:"latency_ms"`
	// Check is "golden" (actions vs the demo's golden, PCC gate) or
	// "determinism" (no golden: finite and bit-identical across runs).
	Check    string      `json:"check,omitempty"`
	Fidelity *comparison `json:"fidelity_vs_golden,omitempty"`
	MinPCC   float64     `json:"min_pcc"`
	Runs     int         `json:"runs"`
}

// warmup runs warmup_runs predictions of e's demo observation through the
// full request path and gates them: against the golden when the demo has
// one (PCC ≥ warmup_pcc_min), otherwise finiteness and repeat determinism
// (at least two runs, bit-identical).
func (s *Server) warmup(ctx context.Context, deps *Deps, e *entry) error {
	rep, err := s.warmupRuns(ctx, deps, e)
	if err != nil {
		return err
	}
	if rep != nil {
		e.warm = *rep
	}
	return nil
}

// warmupRuns is warmup without recording the report in e (nil when
// warm-up is disabled); the device gate (runners.go) runs it on one
// restarted device.
func (s *Server) warmupRuns(ctx context.Context, deps *Deps, e *entry) (*warmupReport, error) {
	n := s.cfg.WarmupRuns
	if n == 0 {
		s.log.Warn("warm-up disabled (warmup_runs 0): serving without a fidelity check", "embodiment", e.tag)
		return nil, nil
	}
	demo := e.b.Demo
	if demo == nil {
		return nil, fmt.Errorf("warm-up: warmup_runs %d needs a demo observation for embodiment %s (demo_dir/%s, <weights_dir>/demo/%s, or the plugin's demo/)", n, e.tag, e.tag, e.tag)
	}
	req, err := decodeJSON(demo.Request)
	if err != nil {
		return nil, fmt.Errorf("warm-up: demo request %s: %w", demo.Source, err)
	}
	if req.Embodiment != "" && req.Embodiment != e.tag {
		return nil, fmt.Errorf("warm-up: demo request %s names embodiment %s, not %s", demo.Source, req.Embodiment, e.tag)
	}
	rep := warmupReport{Runs: n, MinPCC: math.Inf(1), Check: "golden"}
	if demo.Golden == nil {
		rep.Check = "determinism"
		rep.Runs = max(n, 2)
	}
	s.log.Info(fmt.Sprintf("Warming up: %d prediction(s) on the demo observation", rep.Runs), "embodiment", e.tag, "demo", demo.Source, "check", rep.Check)
	var first map[string][][]float64
	for i := 1; i <= rep.Runs; i++ {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout*10)
		resp, err := s.runPredict(rctx, deps, e, req, fmt.Sprintf("warmup-%s-%d", e.tag, i), start, protocolWarmup)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("warm-up %d/%d: %w", i, rep.Runs, err)
		}
		d := time.Since(start)
		rep.LatencyMS = append(rep.LatencyMS, ms(d))
		if demo.Golden == nil {
			if err := finiteActions(resp.Actions); err != nil {
				return nil, fmt.Errorf("warm-up %d/%d: %w", i, rep.Runs, err)
			}
			if first == nil {
				first = resp.Actions
			} else if err := sameActions(e.info.ActionGroups, first, resp.Actions); err != nil {
				return nil, fmt.Errorf("warm-up %d/%d: not deterministic: %w", i, rep.Runs, err)
			}
			s.log.Info(fmt.Sprintf("Warmup %d/%d: %.1f ms", i, rep.Runs, float64(d.Microseconds())/1e3), "embodiment", e.tag)
			continue
		}
		cmp, err := compareActions(e.info.ActionGroups, resp.Actions, demo.Golden)
		if err != nil {
			return nil, fmt.Errorf("warm-up %d/%d: actions vs golden: %w", i, rep.Runs, err)
		}
		s.log.Info(fmt.Sprintf("Warmup %d/%d: %.1f ms", i, rep.Runs, float64(d.Microseconds())/1e3), "embodiment", e.tag, "pcc", cmp.PCC, "max_abs_diff", cmp.MaxAbs)
		if math.IsNaN(cmp.PCC) || cmp.PCC < s.cfg.WarmupPCCMin {
			return nil, fmt.Errorf("warm-up %d/%d: fidelity vs golden: actions PCC %.6f < warmup_pcc_min %.6f (max|d| %.4g)", i, rep.Runs, cmp.PCC, s.cfg.WarmupPCCMin, cmp.MaxAbs)
		}
		if cmp.PCC < rep.MinPCC {
			rep.MinPCC = cmp.PCC
			c := cmp
			rep.Fidelity = &c
		}
	}
	if rep.Fidelity != nil {
		s.inst.warmupPCC.Record(ctx, rep.MinPCC, metric.WithAttributes(attribute.String("embodiment", e.tag)))
		s.log.Info(fmt.Sprintf("Warm-up fidelity vs golden: actions PCC %.6f", rep.MinPCC), "embodiment", e.tag, "max_abs_diff", rep.Fidelity.MaxAbs)
	} else {
		rep.MinPCC = 0
	}
	s.log.Info("Warmup complete", "embodiment", e.tag, "runs", rep.Runs, "latency_ms", rep.LatencyMS)
	return &rep, nil
}

func finiteActions(a map[string][][]float64) error {
	for k, rows := range a {
		for i, r := range rows {
			for j, v := range r {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("action %s[%d][%d] is %v", k, i, j, v)
				}
			}
		}
	}
	return nil
}

func sameActions(order []Group, a, b map[string][][]float64) error {
	for _, g := range order {
		x, y := a[g.Key], b[g.Key]
		if len(x) != len(y) {
			return fmt.Errorf("action %s: %d steps, then %d", g.Key, len(x), len(y))
		}
		for i := range x {
			if !slices.Equal(x[i], y[i]) {
				return fmt.Errorf("action %s step %d differs between runs", g.Key, i)
			}
		}
	}
	return nil
}

// tracker counts background goroutines (warm-ups after start, reloads,
// binding closes) so that Shutdown can wait for them; it refuses new work
// once closed.
type tracker struct {
	mu     sync.Mutex
	n      int
	idle   chan struct{} // closed while n == 0
	closed bool
}

func newTracker() *tracker {
	t := &tracker{idle: make(chan struct{})}
	close(t.idle)
	return t
}

// Add registers one unit of work; done must be called once. ok is false
// after Close.
func (t *tracker) Add() (done func(), ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false
	}
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.n--
			if t.n == 0 {
				close(t.idle)
			}
		})
	}, true
}

// Go runs fn tracked. Work for closing resources runs even after Close.
func (t *tracker) Go(fn func()) {
	t.mu.Lock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
	go func() {
		defer func() {
			t.mu.Lock()
			t.n--
			if t.n == 0 {
				close(t.idle)
			}
			t.mu.Unlock()
		}()
		fn()
	}()
}

// Close refuses further Add calls.
func (t *tracker) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// Wait waits until no work is registered or ctx ends; it reports whether
// the tracker went idle.
func (t *tracker) Wait(ctx context.Context) bool {
	for {
		t.mu.Lock()
		if t.n == 0 {
			t.mu.Unlock()
			return true
		}
		idle := t.idle
		t.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return false
		}
	}
}
