// Package plugins is the gr00tgw host for gwabi v1 WebAssembly plugins
// (see ABI.md): it loads embodiment plugins (pre-processing validation and
// state normalisation, action decoding) with wazero, keeps a bounded pool
// of initialised instances per plugin and exposes them as plain Go calls.
//
// Sandbox: plugins get no filesystem, network, arguments or environment;
// clocks are wazero's fake clocks and the random source is deterministic.
// Each call runs under a deadline (the call traps at its next loop header or
// function entry once it passes it, see DeadlineMode), each instance under a
// memory-page limit. An instance that traps, times
// out or returns an invalid result is discarded and replaced; one bad
// request never poisons the next.
//
// The host does not import the gateway's core packages; the gateway
// translates HTTP requests into PreInput/PostInput and maps errors
// (GuestError → 400, ErrPoolExhausted → 503, ErrTimeout → 504).
package plugins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
	"github.com/gr00tgw/gr00tgw/plugins/envelope"
	"github.com/gr00tgw/gr00tgw/plugins/internal/rewrite"
)

// instrument is the load-time rewrite (a variable so that a test can make
// it produce a module that does not compile).
var instrument = rewrite.Instrument

// Description is the plugin's gw_describe document.
type Description = abi.Description

// Plugin is one loaded plugin: a compiled module and a bounded pool of
// initialised instances. Its methods are safe for concurrent use; each
// call runs on its own instance.
type Plugin struct {
	name     string
	manifest Manifest
	desc     Description
	names    nameCache // envelope names of the described groups, read-only after load
	sha      string
	initJSON []byte

	o         options
	timeout   time.Duration
	maxPages  uint32
	highWater uint32
	poolSize  int

	mode      DeadlineMode // how deadlines are enforced (setup may fall back)
	rt        wazero.Runtime
	compiled  wazero.CompiledModule
	ownsCache wazero.CompilationCache

	idle  idleStack
	live  atomic.Int32
	inUse atomic.Int32
	// stdio maps each live instance's api.Module to its output budget,
	// so that gw_host.log is charged to the call that made it.
	stdio sync.Map

	mu       sync.RWMutex
	closed   bool
	inflight sync.WaitGroup
	done     chan struct{} // closed by Close
}

// compileModule is rt.CompileModule that turns a panic of the compiler or
// validator into an error: wazero's validator has been seen to panic on a
// malformed module (a call through an out-of-range type index) instead of
// refusing it, and one bad plugin must not take the gateway down.
func compileModule(ctx context.Context, rt wazero.Runtime, wasm []byte) (m wazero.CompiledModule, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("malformed module (the compiler panicked: %v)", r)
		}
	}()
	return rt.CompileModule(ctx, wasm)
}

// DeadlineMode reports how this plugin's call deadlines are enforced
// (WithDeadlineMode, or the fallback chosen at load).
func (p *Plugin) DeadlineMode() DeadlineMode { return p.mode }

// Name returns the plugin's name.
func (p *Plugin) Name() string { return p.name }

// Version returns the plugin's semver.
func (p *Plugin) Version() string { return p.manifest.Version }

// SHA256 returns the hex sha256 of the plugin's .wasm.
func (p *Plugin) SHA256() string { return p.sha }

// Manifest returns a copy of the plugin's manifest.
func (p *Plugin) Manifest() Manifest { return p.manifest }

// ControlHz returns the manifest's control_hz (the embodiment's control
// rate, for real-time chunking's server-side defaults) and whether the
// manifest sets it.
func (p *Plugin) ControlHz() (float64, bool) { return p.manifest.ControlRate() }

// ActionLimits returns the manifest's action_limits (the safety gate's
// limits per action group key, checked against Describe at load; nil when
// the manifest declares none). The map is shared: callers must not modify it.
func (p *Plugin) ActionLimits() map[string]abi.ActionLimit { return p.manifest.ActionLimits }

// Describe returns the plugin's description (read once at load).
func (p *Plugin) Describe() Description { return p.desc }

// Embodiment returns the embodiment tag the plugin serves.
func (p *Plugin) Embodiment() string { return p.desc.Embodiment }

// PoolSize returns the number of instances the pool holds when full.
func (p *Plugin) PoolSize() int { return p.poolSize }

// Open loads the plugin in dir (plugin.yaml plus its .wasm): it checks the
// sha256 and ABI, compiles, validates exports, fills the pool and checks
// describe() against the manifest. The caller must Close the plugin.
func Open(ctx context.Context, dir string, opts ...Option) (*Plugin, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	wasm, err := os.ReadFile(filepath.Join(dir, m.WasmFile()))
	if err != nil {
		return nil, fmt.Errorf("wasm: plugin[%s]: %w", m.Name, err)
	}
	return New(ctx, m, wasm, opts...)
}

// New loads a plugin from its manifest and .wasm bytes (see Open).
func New(ctx context.Context, m *Manifest, wasm []byte, opts ...Option) (_ *Plugin, err error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	sum := sha256.Sum256(wasm)
	sha := hex.EncodeToString(sum[:])
	if sha != m.SHA256 {
		return nil, fmt.Errorf("wasm: plugin[%s] sha256 mismatch: manifest %s…, file %s…", m.Name, m.SHA256[:12], sha[:12])
	}
	if m.ABI != abi.Version {
		return nil, fmt.Errorf("wasm: plugin[%s] ABI version mismatch: manifest abi %d, host supports %d", m.Name, m.ABI, abi.Version)
	}
	p := &Plugin{name: m.Name, manifest: *m, sha: sha, o: o, done: make(chan struct{})}
	if err := p.limits(); err != nil {
		return nil, err
	}
	if p.initJSON, err = InitConfigJSON(m.Embodiments[0], o.checkpoint, m.Config); err != nil {
		return nil, fmt.Errorf("wasm: plugin[%s] init config: %w", m.Name, err)
	}

	defer func() {
		if err != nil {
			p.closeRuntime(context.Background())
		}
	}()
	if err = p.setup(ctx, wasm); err != nil {
		return nil, err
	}

	// Fail fast: describe on the first instance, then fill the pool.
	first, err := p.newInstance(ctx, true)
	if err != nil {
		return nil, err
	}
	p.idle.init(p.poolSize)
	p.idle.put(first)
	p.live.Store(1)
	for i := 1; i < p.poolSize; i++ {
		inst, err := p.newInstance(ctx, false)
		if err != nil {
			p.drainIdle(ctx)
			return nil, err
		}
		p.idle.put(inst)
		p.live.Add(1)
	}
	o.logger.Info("plugins: loaded", "plugin", p.name, "version", m.Version, "embodiment", p.desc.Embodiment,
		"sha256", sha[:12], "pool", p.poolSize, "max_pages", p.maxPages, "timeout", p.timeout)
	return p, nil
}

// setup creates the runtime (limits, compilation cache), compiles and
// validates the module and instantiates the WASI and gw_host modules. On
// error the caller closes the runtime.
func (p *Plugin) setup(ctx context.Context, wasm []byte) error {
	o := &p.o
	cache := o.cache
	if cache == nil {
		var err error
		if o.cacheDir != "" {
			if cache, err = wazero.NewCompilationCacheWithDir(o.cacheDir); err != nil {
				o.logger.Warn("plugins: compilation cache dir unusable, compiling in memory", "dir", o.cacheDir, "err", err)
				cache = nil
			}
		}
		if cache == nil {
			cache = wazero.NewCompilationCache()
		}
		p.ownsCache = cache
	}
	rc := wazero.NewRuntimeConfig()
	p.mode = o.deadline
	if o.interpreter {
		rc = wazero.NewRuntimeConfigInterpreter()
		p.mode = DeadlineCloseOnContextDone
	}
	orig, rewritten := wasm, false
	if p.mode == DeadlineStopFlag {
		if inst, err := instrument(wasm); err != nil {
			o.logger.Warn("plugins: cannot add stop checks, deadlines use close-on-context-done (slower)", "plugin", p.name, "err", err)
			p.mode = DeadlineCloseOnContextDone
		} else {
			wasm, rewritten = inst, true
		}
	}
	rc = rc.WithMemoryLimitPages(p.maxPages).WithCompilationCache(cache)
	p.rt = wazero.NewRuntimeWithConfig(ctx, rc.WithCloseOnContextDone(p.mode == DeadlineCloseOnContextDone))

	var err error
	if p.compiled, err = compileModule(ctx, p.rt, wasm); err != nil && rewritten {
		// The rewrite must keep a valid module valid; if it did not (a
		// rewriter bug), serve the module as shipped rather than not at all.
		_ = p.rt.Close(ctx)
		p.mode = DeadlineCloseOnContextDone
		p.rt = wazero.NewRuntimeWithConfig(ctx, rc.WithCloseOnContextDone(true))
		rerr := err
		if p.compiled, err = compileModule(ctx, p.rt, orig); err == nil {
			o.logger.Warn("plugins: the module with stop checks does not compile, deadlines use close-on-context-done (slower)", "plugin", p.name, "err", rerr)
		}
	}
	if err != nil {
		return fmt.Errorf("wasm: plugin[%s] compile: %w", p.name, err)
	}
	if err = validateModule(p.name, p.compiled); err != nil {
		return err
	}
	if _, err = wasi_snapshot_preview1.Instantiate(ctx, p.rt); err != nil {
		return fmt.Errorf("wasm: plugin[%s] wasi: %w", p.name, err)
	}
	if _, err = p.rt.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostLog), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).
		WithParameterNames("level", "ptr", "len").
		Export(abi.HostFuncLog).
		Instantiate(ctx); err != nil {
		return fmt.Errorf("wasm: plugin[%s] host module: %w", p.name, err)
	}

	return nil
}

// Inspect compiles and validates a .wasm exactly as New does (exports,
// signatures, imports, memory limit) and returns its describe() document
// without a manifest and without calling gw_init. Tools use it to build a
// manifest for a bare .wasm; name only labels errors.
func Inspect(ctx context.Context, name string, wasm []byte, opts ...Option) (_ *Description, err error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	p := &Plugin{name: name, o: o, maxPages: o.maxPages, done: make(chan struct{})}
	defer p.closeRuntime(context.Background())
	if err := p.setup(ctx, wasm); err != nil {
		return nil, err
	}
	inst, err := p.newInstanceInit(ctx, true, false)
	if err != nil {
		return nil, err
	}
	inst.close(ctx)
	d := p.desc
	return &d, nil
}

func (p *Plugin) limits() error {
	m, o := &p.manifest, &p.o
	p.maxPages = o.maxPages
	if m.Limits.MaxPages > 0 {
		if m.Limits.MaxPages > o.maxPages {
			return fmt.Errorf("wasm: plugin[%s] limits.max_pages %d exceeds the host maximum %d", m.Name, m.Limits.MaxPages, o.maxPages)
		}
		p.maxPages = m.Limits.MaxPages
	}
	p.timeout = DefaultTimeout
	if m.Limits.TimeoutMS > 0 {
		p.timeout = time.Duration(m.Limits.TimeoutMS) * time.Millisecond
	}
	// The product wraps past 2⁶³ ns (negative: every call would time out).
	if p.timeout > o.maxTimeout || int64(m.Limits.TimeoutMS) > int64(o.maxTimeout/time.Millisecond) {
		return fmt.Errorf("wasm: plugin[%s] limits.timeout_ms %d exceeds the host maximum %v", m.Name, m.Limits.TimeoutMS, o.maxTimeout)
	}
	p.poolSize = DefaultPoolSize
	if m.Limits.PoolSize > 0 {
		p.poolSize = m.Limits.PoolSize
	}
	if p.poolSize > o.maxPool {
		return fmt.Errorf("wasm: plugin[%s] limits.pool_size %d exceeds the host maximum %d", m.Name, p.poolSize, o.maxPool)
	}
	p.highWater = o.highWaterPages
	if p.highWater == 0 || p.highWater > p.maxPages {
		p.highWater = p.maxPages - p.maxPages/4
	}
	return nil
}

type sig struct {
	params, results []api.ValueType
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
	// requiredExports lists every function export of ABI v1 and its exact
	// signature.
	requiredExports = []struct {
		name string
		sig  sig
	}{
		{abi.ExportABIMarker, sig{nil, nil}},
		{abi.ExportInitialize, sig{nil, nil}},
		{abi.ExportAlloc, sig{[]api.ValueType{i32}, []api.ValueType{i32}}},
		{abi.ExportFree, sig{[]api.ValueType{i32}, nil}},
		{abi.ExportDescribe, sig{nil, []api.ValueType{i64}}},
		{abi.ExportInit, sig{[]api.ValueType{i32, i32}, []api.ValueType{i64}}},
		{abi.ExportPre, sig{[]api.ValueType{i32, i32}, []api.ValueType{i64}}},
		{abi.ExportPost, sig{[]api.ValueType{i32, i32}, []api.ValueType{i64}}},
	}
	allowedImports = map[string]bool{wasi_snapshot_preview1.ModuleName: true, abi.HostModule: true}
)

// String is "(i32,i32) -> i64": the params as a tuple, then a single
// result bare or the results as a tuple ("()" for none).
func (s sig) String() string {
	tuple := func(ts []api.ValueType) string {
		names := make([]string, len(ts))
		for i, t := range ts {
			names[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(names, ",") + ")"
	}
	if len(s.results) == 1 {
		return tuple(s.params) + " -> " + api.ValueTypeName(s.results[0])
	}
	return tuple(s.params) + " -> " + tuple(s.results)
}

func sameTypes(a, b []api.ValueType) bool { return bytes.Equal(a, b) }

// validateModule checks the ABI marker, every required export's exact
// signature, the memory export and the imports.
func validateModule(name string, cm wazero.CompiledModule) error {
	exports := cm.ExportedFunctions()
	if _, ok := exports[abi.ExportABIMarker]; !ok {
		for e := range exports {
			if strings.HasPrefix(e, "gw_abi_v") {
				return fmt.Errorf("wasm: plugin[%s] ABI version mismatch: plugin exports %s, host supports gw_abi_v%d", name, e, abi.Version)
			}
		}
		return fmt.Errorf("wasm: plugin[%s] does not export %s: not a gwabi v%d plugin (build it with plugins/pdk)", name, abi.ExportABIMarker, abi.Version)
	}
	for _, r := range requiredExports {
		def, ok := exports[r.name]
		if !ok {
			if r.name == abi.ExportInitialize {
				return fmt.Errorf("wasm: plugin[%s] does not export %s: build a reactor (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared)", name, r.name)
			}
			return fmt.Errorf("wasm: plugin[%s] does not export %s, want %s", name, r.name, r.sig)
		}
		got := sig{def.ParamTypes(), def.ResultTypes()}
		if !sameTypes(got.params, r.sig.params) || !sameTypes(got.results, r.sig.results) {
			return fmt.Errorf("wasm: plugin[%s] export[%s] has signature %s, want %s", name, r.name, got, r.sig)
		}
	}
	if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok {
		return fmt.Errorf("wasm: plugin[%s] does not export its memory as %q", name, abi.ExportMemory)
	}
	for _, imp := range cm.ImportedFunctions() {
		mod, fn, _ := imp.Import()
		if !allowedImports[mod] {
			return fmt.Errorf("wasm: plugin[%s] imports %s.%s: only %s and %s.%s are provided", name, mod, fn, wasi_snapshot_preview1.ModuleName, abi.HostModule, abi.HostFuncLog)
		}
		if mod == abi.HostModule && fn != abi.HostFuncLog {
			return fmt.Errorf("wasm: plugin[%s] imports %s.%s: the host provides only %s.%s", name, mod, fn, abi.HostModule, abi.HostFuncLog)
		}
	}
	return nil
}

// instance is one instantiated, initialised guest. It is used by one
// goroutine at a time (whoever took it from the pool).
type instance struct {
	mod                              api.Module
	mem                              api.Memory
	alloc, describe, init, pre, post api.Function
	reencode                         api.Function // nil unless the module exports gw_reencode
	stack                            callStack
	inPtr, inCap                     uint32
	calls                            int
	stdio                            *stdioWriter
	registry                         *sync.Map // Plugin.stdio, which holds mod while it lives
	wd                               *watchdog // nil with DeadlineCloseOnContextDone
	// Result decoders, one per stage (0 pre, 1 post), reused across
	// calls: a stage's results repeat their layout at the same address
	// (the guest's result cache), so Decode re-reads only the attributes
	// (envelope.Envelope.Reused); one decoder shared by both stages would
	// see the layout alternate and decode in full every call. 2 is
	// reencode's.
	dec [3]envelope.Envelope
}

// close closes the module and stops the instance's deadline timer.
func (inst *instance) close(ctx context.Context) {
	if inst.wd != nil {
		inst.wd.stop()
	}
	_ = inst.mod.Close(ctx)
	inst.registry.Delete(inst.mod)
}

// stdioKey carries the instance's output budget into InstantiateModule
// (start functions run before the instance is registered in Plugin.stdio).
type stdioKey struct{}

func (p *Plugin) newInstance(ctx context.Context, describe bool) (*instance, error) {
	return p.newInstanceInit(ctx, describe, true)
}

func (p *Plugin) newInstanceInit(ctx context.Context, describe, init bool) (*instance, error) {
	w := &stdioWriter{plugin: p.name, logger: p.o.logger, limit: p.o.stdioLimit}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStdout(w).WithStderr(w)
	if p.mode == DeadlineCloseOnContextDone {
		cfg = cfg.WithStartFunctions(abi.ExportInitialize)
	} else {
		cfg = cfg.WithStartFunctions() // _initialize runs below, under the watchdog
	}
	ictx, cancel := context.WithTimeout(context.WithValue(ctx, stdioKey{}, w), p.o.maxTimeout)
	defer cancel()
	mod, err := p.rt.InstantiateModule(ictx, p.compiled, cfg)
	if err != nil {
		return nil, fmt.Errorf("wasm: plugin[%s] instantiate: %w", p.name, err)
	}
	p.stdio.Store(mod, w)
	inst := &instance{
		mod: mod, mem: mod.Memory(), stdio: w, registry: &p.stdio,
		alloc:    mod.ExportedFunction(abi.ExportAlloc),
		describe: mod.ExportedFunction(abi.ExportDescribe),
		init:     mod.ExportedFunction(abi.ExportInit),
		pre:      mod.ExportedFunction(abi.ExportPre),
		post:     mod.ExportedFunction(abi.ExportPost),
		reencode: mod.ExportedFunction(abi.ExportReencode),
	}
	if p.mode == DeadlineStopFlag {
		flag, ok1 := mod.ExportedGlobal(rewrite.Stop).(api.MutableGlobal)
		budget, ok2 := mod.ExportedGlobal(rewrite.Budget).(api.MutableGlobal)
		if !ok1 || !ok2 {
			_ = mod.Close(context.Background())
			p.stdio.Delete(mod)
			return nil, fmt.Errorf("wasm: plugin[%s] instantiate: stop-check globals missing", p.name)
		}
		inst.wd = newWatchdog(flag, budget)
		inst.wd.arm(ictx, time.Now(), p.o.maxTimeout)
		defer inst.wd.disarm()
		if err := mod.ExportedFunction(abi.ExportInitialize).CallWithStack(ictx, inst.stack[:]); err != nil {
			inst.close(context.Background())
			return nil, fmt.Errorf("wasm: plugin[%s] instantiate: %s: %w", p.name, abi.ExportInitialize, err)
		}
	}
	fail := func(err error) (*instance, error) {
		inst.close(context.Background())
		return nil, err
	}
	if describe {
		if err := inst.stack.call(ictx, inst.describe, 0); err != nil {
			return fail(fmt.Errorf("wasm: plugin[%s] describe: %w", p.name, err))
		}
		body, gerr, err := p.result(inst, "describe", inst.stack[0])
		if err == nil && gerr != nil {
			err = gerr
		}
		if err != nil {
			return fail(fmt.Errorf("wasm: plugin[%s] describe: %w", p.name, err))
		}
		if err := p.checkDescription(body, !init); err != nil {
			return fail(err)
		}
	}
	if !init {
		return inst, nil
	}
	if err := p.write(ictx, inst, p.initJSON); err != nil {
		return fail(fmt.Errorf("wasm: plugin[%s] init: %w", p.name, err))
	}
	inst.stack[0], inst.stack[1] = uint64(inst.inPtr), uint64(len(p.initJSON))
	if err := inst.stack.call(ictx, inst.init, 2); err != nil {
		return fail(fmt.Errorf("wasm: plugin[%s] init: %w", p.name, err))
	}
	if _, gerr, err := p.result(inst, "init", inst.stack[0]); err != nil {
		return fail(fmt.Errorf("wasm: plugin[%s] init: %w", p.name, err))
	} else if gerr != nil {
		return fail(fmt.Errorf("wasm: %w", gerr))
	}
	return inst, nil
}

// checkDescription parses describe() output and checks it against the
// manifest.
func (p *Plugin) checkDescription(body []byte, inspect bool) error {
	var d Description
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("wasm: plugin[%s] describe: %w", p.name, err)
	}
	if inspect {
		p.desc = d
		return nil
	}
	m := &p.manifest
	switch {
	case d.ABI != abi.Version:
		return fmt.Errorf("wasm: plugin[%s] ABI version mismatch: describe says %d, host supports %d", p.name, d.ABI, abi.Version)
	case d.Name != m.Name:
		return fmt.Errorf("wasm: plugin[%s] describe name %q differs from the manifest", p.name, d.Name)
	case d.Version != m.Version:
		return fmt.Errorf("wasm: plugin[%s] describe version %q differs from the manifest's %q", p.name, d.Version, m.Version)
	case d.Embodiment != m.Embodiments[0]:
		return fmt.Errorf("wasm: plugin[%s] describe embodiment %q differs from the manifest's %v", p.name, d.Embodiment, m.Embodiments)
	case len(d.State) == 0 || len(d.Actions) == 0 || d.ActionHorizon <= 0 || d.MaxStateDim <= 0 || d.MaxActionDim <= 0:
		return fmt.Errorf("wasm: plugin[%s] describe: incomplete layout (state %d groups, actions %d groups, horizon %d, max dims %d/%d)",
			p.name, len(d.State), len(d.Actions), d.ActionHorizon, d.MaxStateDim, d.MaxActionDim)
	}
	sd, ad := 0, 0
	for _, g := range d.State {
		sd += g.Dim
	}
	for _, g := range d.Actions {
		ad += g.Dim
	}
	if sd > d.MaxStateDim || ad > d.MaxActionDim {
		return fmt.Errorf("wasm: plugin[%s] describe: state dims %d / action dims %d exceed max %d / %d", p.name, sd, ad, d.MaxStateDim, d.MaxActionDim)
	}
	if err := p.checkFeatures(&d); err != nil {
		return err
	}
	if err := m.validateActionLimits(&d); err != nil {
		return err
	}
	p.desc = d
	p.names = newNameCache(&d)
	return nil
}

// call runs fn with n parameters from s[:n]; the result is in s[0].
type callStack [2]uint64

func (s *callStack) call(ctx context.Context, fn api.Function, n int) error {
	return fn.CallWithStack(ctx, s[:])
}

// write copies in into the instance's input buffer, growing it with
// gw_alloc/gw_free when needed.
func (p *Plugin) write(ctx context.Context, inst *instance, in []byte) error {
	if err := p.reserve(ctx, inst, len(in)); err != nil {
		return err
	}
	if !inst.mem.Write(inst.inPtr, in) {
		return fmt.Errorf("%w: gw_alloc buffer [%#x, +%d) outside memory of %d bytes", ErrBadPointer, inst.inPtr, len(in), inst.mem.Size())
	}
	return nil
}

// writeEnvelope encodes b, whose encoded size is n, straight into the
// instance's input buffer (no intermediate copy: a post request carries a
// 21 KB action chunk).
func (p *Plugin) writeEnvelope(ctx context.Context, inst *instance, b *envelope.Builder, n int) error {
	if err := p.reserve(ctx, inst, n); err != nil {
		return err
	}
	view, ok := inst.mem.Read(inst.inPtr, uint32(n))
	if !ok {
		return fmt.Errorf("%w: gw_alloc buffer [%#x, +%d) outside memory of %d bytes", ErrBadPointer, inst.inPtr, n, inst.mem.Size())
	}
	out, err := b.AppendTo(view[:0:n])
	if err != nil {
		return err
	}
	if len(out) != n || &out[0] != &view[0] {
		return fmt.Errorf("envelope of %d bytes, sized %d", len(out), n) // cannot happen: Size is exact
	}
	return nil
}

// reserve makes the instance's input buffer hold at least n bytes,
// growing it with gw_alloc/gw_free when needed.
func (p *Plugin) reserve(ctx context.Context, inst *instance, n int) error {
	if uint32(n) > inst.inCap || inst.inCap == 0 {
		c := uint32(n)
		if c < 4096 {
			c = 4096
		}
		if inst.inCap != 0 {
			inst.stack[0] = uint64(inst.inPtr)
			if err := inst.mod.ExportedFunction(abi.ExportFree).CallWithStack(ctx, inst.stack[:]); err != nil {
				return fmt.Errorf("gw_free: %w", err)
			}
			inst.inCap = 0
		}
		inst.stack[0] = uint64(c)
		if err := inst.alloc.CallWithStack(ctx, inst.stack[:]); err != nil {
			return fmt.Errorf("gw_alloc(%d): %w", c, err)
		}
		ptr := uint32(inst.stack[0])
		if ptr == 0 || ptr%8 != 0 {
			return fmt.Errorf("%w: gw_alloc(%d) returned %#x (want non-zero, 8-byte aligned)", ErrBadPointer, c, ptr)
		}
		inst.inPtr, inst.inCap = ptr, c
	}
	return nil
}

// result reads a packed result: it returns the body on status 0, a
// *GuestError on status 1/2, or an ErrBadPointer error. body aliases guest
// memory: use it before the instance is released.
func (p *Plugin) result(inst *instance, stage string, packed uint64) (body []byte, gerr *GuestError, err error) {
	ptr, n := uint32(packed>>32), uint32(packed)
	if n < abi.ResultHeaderSize || n > DefaultMaxInputSize+abi.ResultHeaderSize {
		return nil, nil, fmt.Errorf("%w: result length %d (ptr %#x)", ErrBadPointer, n, ptr)
	}
	b, ok := inst.mem.Read(ptr, n)
	if !ok {
		return nil, nil, fmt.Errorf("%w: result [%#x, +%d) outside memory of %d bytes", ErrBadPointer, ptr, n, inst.mem.Size())
	}
	status := binary.LittleEndian.Uint32(b)
	body = b[abi.ResultHeaderSize:]
	switch status {
	case abi.StatusOK:
		return body, nil, nil
	case abi.StatusInvalid, abi.StatusPluginError:
		var e envelope.Envelope
		if err := e.Decode(body); err != nil {
			return nil, nil, fmt.Errorf("%w: error body: %w", ErrBadPointer, err)
		}
		g := &GuestError{Plugin: p.name, Stage: stage, Internal: status == abi.StatusPluginError}
		code, _ := e.Attr(abi.AttrCode)
		field, _ := e.Attr(abi.AttrField)
		msg, _ := e.Attr(abi.AttrMessage)
		g.Code, g.Field, g.Message = strings.Clone(code), strings.Clone(field), strings.Clone(msg)
		if g.Code == "" {
			g.Code = abi.CodePluginError
		}
		return nil, g, nil
	default:
		return nil, nil, fmt.Errorf("%w: unknown result status %d", ErrBadPointer, status)
	}
}

// idleStack holds the idle instances, most recently released on top: a
// call takes the instance whose memory and code paths are most likely
// still in the CPU caches (with a FIFO, sequential calls rotate through
// every instance of the pool). A release while goroutines wait in acquire
// hands the instance to one of them through wake instead of pushing it;
// otherwise taking and returning an instance is one mutex section each,
// without a channel operation.
//
// Invariant (under mu): the goroutines blocked in acquire number waiters
// plus the hand-offs sent or about to be sent on wake, so every hand-off
// has a receiver, and wake (capacity: the pool size) never blocks.
type idleStack struct {
	mu      sync.Mutex
	stack   []*instance
	waiters int            // registered by get(true) and not yet served
	wake    chan *instance // hand-offs to waiters
}

func (s *idleStack) init(n int) {
	s.stack = make([]*instance, 0, n)
	s.wake = make(chan *instance, n)
}

// put returns inst: to a waiter if there is one, else onto the stack.
func (s *idleStack) put(inst *instance) {
	s.mu.Lock()
	if s.waiters > 0 {
		s.waiters--
		s.mu.Unlock()
		s.wake <- inst
		return
	}
	s.stack = append(s.stack, inst)
	s.mu.Unlock()
}

// tryGet pops an idle instance if there is one, without waiting.
func (s *idleStack) tryGet() *instance {
	inst, _ := s.get(false)
	return inst
}

// get pops the top instance. When there is none it returns nil, and with
// register also counts the caller as a waiter: the caller must then
// receive from wake or call cancelWait.
func (s *idleStack) get(register bool) (*instance, bool) {
	s.mu.Lock()
	n := len(s.stack)
	if n == 0 {
		if register {
			s.waiters++
		}
		s.mu.Unlock()
		return nil, register
	}
	inst := s.stack[n-1]
	s.stack[n-1] = nil
	s.stack = s.stack[:n-1]
	s.mu.Unlock()
	return inst, false
}

// cancelWait withdraws a waiter that gave up. If a release already counted
// on it (waiters is 0), the hand-off meant for it is taken and put back.
func (s *idleStack) cancelWait() {
	s.mu.Lock()
	if s.waiters > 0 {
		s.waiters--
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.put(<-s.wake)
}

// acquire takes an idle instance, creating one if the pool is below its
// size (after a discard), or waits until one is released.
func (p *Plugin) acquire(ctx context.Context) (*instance, error) {
	if inst := p.idle.tryGet(); inst != nil {
		return inst, nil
	}
	if p.refillSlot() {
		inst, err := p.newInstance(ctx, false)
		if err != nil {
			p.live.Add(-1)
			return nil, err
		}
		return inst, nil
	}
	inst, waiting := p.idle.get(true)
	if !waiting {
		return inst, nil
	}
	var timeout <-chan time.Time
	if p.o.acquireTimeout > 0 {
		t := time.NewTimer(p.o.acquireTimeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case inst := <-p.idle.wake:
		return inst, nil
	case <-ctx.Done():
		p.idle.cancelWait()
		return nil, fmt.Errorf("%w: plugin[%s] all %d instances busy: %w", ErrPoolExhausted, p.name, p.poolSize, ctx.Err())
	case <-timeout:
		p.idle.cancelWait()
		return nil, fmt.Errorf("%w: plugin[%s] all %d instances busy for %v", ErrPoolExhausted, p.name, p.poolSize, p.o.acquireTimeout)
	case <-p.done:
		p.idle.cancelWait()
		return nil, fmt.Errorf("%w: plugin[%s]", ErrClosed, p.name)
	}
}

// refillSlot reserves a slot for a new instance if fewer than poolSize are
// alive.
func (p *Plugin) refillSlot() bool {
	for {
		n := p.live.Load()
		if int(n) >= p.poolSize {
			return false
		}
		if p.live.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release returns a healthy instance to the pool, or recycles it after
// maxCalls calls or above the memory high-water mark.
func (p *Plugin) release(inst *instance) {
	p.o.observer.PoolInUse(p.name, int(p.inUse.Add(-1)))
	inst.calls++
	switch {
	case inst.calls >= p.o.maxCalls:
		p.recycle(inst, ReasonMaxCalls)
	case inst.mem.Size()/65536 > p.highWater:
		p.recycle(inst, ReasonMemory)
	default:
		p.idle.put(inst)
	}
}

// discard takes a checked-out instance out of service (see recycle).
func (p *Plugin) discard(inst *instance, reason string) {
	p.o.observer.PoolInUse(p.name, int(p.inUse.Add(-1)))
	p.recycle(inst, reason)
}

// recycle closes a failed or worn-out instance and refills the pool in
// the background (acquire also refills lazily if that fails).
func (p *Plugin) recycle(inst *instance, reason string) {
	inst.close(context.Background())
	p.live.Add(-1)
	p.o.observer.Recycled(p.name, reason)
	p.o.logger.Debug("plugins: instance recycled", "plugin", p.name, "reason", reason, "calls", inst.calls)
	if !p.refillSlot() {
		return
	}
	p.inflight.Add(1) // Close waits for the refill
	go func() {
		defer p.inflight.Done()
		inst, err := p.newInstance(context.Background(), false)
		if err != nil {
			p.live.Add(-1)
			p.o.logger.Error("plugins: refill failed", "plugin", p.name, "err", err)
			return
		}
		p.idle.put(inst)
	}()
}

// invoke runs one pre/post call: acquire, write, call under the deadline,
// read and decode the result and hand it to use while the instance is
// still held (the envelope aliases guest memory and is the instance's
// reusable decoder: use must not keep it).
func (p *Plugin) invoke(ctx context.Context, stage string, in *envelope.Builder, use func(e *envelope.Envelope) error) (err error) {
	start := time.Now()
	outcome := OutcomeOK
	defer func() { p.o.observer.CallDone(p.name, stage, outcome, time.Since(start)) }()

	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		outcome = OutcomeClosed
		return fmt.Errorf("%w: plugin[%s]", ErrClosed, p.name)
	}
	p.inflight.Add(1)
	p.mu.RUnlock()
	defer p.inflight.Done()

	size := in.Size()
	if size > DefaultMaxInputSize {
		outcome = OutcomeGuestError
		return &GuestError{Plugin: p.name, Stage: stage, Code: "request_too_large", Message: fmt.Sprintf("envelope of %d bytes exceeds %d", size, DefaultMaxInputSize)}
	}
	inst, err := p.acquire(ctx)
	if err != nil {
		outcome = OutcomePoolExhausted
		if errors.Is(err, ErrClosed) {
			outcome = OutcomeClosed
		}
		return err
	}
	p.o.observer.PoolInUse(p.name, int(p.inUse.Add(1)))

	inst.stdio.reset()
	fn, dec := inst.pre, &inst.dec[0]
	switch stage {
	case "post":
		fn, dec = inst.post, &inst.dec[1]
	case stageReencode:
		fn, dec = inst.reencode, &inst.dec[2]
	}
	var fired bool
	if inst.wd != nil {
		inst.wd.arm(ctx, start, p.timeout)
		err = p.writeEnvelope(ctx, inst, in, size)
		if err == nil {
			inst.stack[0], inst.stack[1] = uint64(inst.inPtr), uint64(size)
			err = fn.CallWithStack(ctx, inst.stack[:])
		}
		fired = inst.wd.disarm()
	} else {
		cctx, cancel := context.WithTimeout(ctx, p.timeout)
		err = p.writeEnvelope(cctx, inst, in, size)
		if err == nil {
			inst.stack[0], inst.stack[1] = uint64(inst.inPtr), uint64(size)
			err = fn.CallWithStack(cctx, inst.stack[:])
		}
		fired = cctx.Err() != nil
		cancel()
	}
	if err != nil {
		kind, reason := ErrTrap, ReasonTrap
		outcome = OutcomeTrap
		switch {
		case errors.Is(err, ErrBadPointer):
			kind, reason, outcome = ErrBadPointer, ReasonBadPointer, OutcomeBadPointer
		case ctx.Err() != nil:
			kind, reason, outcome = ctx.Err(), ReasonCanceled, OutcomeCanceled
		case fired:
			kind, reason, outcome = ErrTimeout, ReasonTimeout, OutcomeTimeout
			err = fmt.Errorf("deadline %v exceeded: %w", p.timeout, err)
		}
		p.discard(inst, reason)
		p.o.logger.Warn("plugins: guest call failed, instance discarded", "plugin", p.name, "stage", stage, "reason", reason, "err", err.Error())
		return &CallError{Plugin: p.name, Stage: stage, Kind: kind, Err: err}
	}
	body, gerr, err := p.result(inst, stage, inst.stack[0])
	if err != nil {
		outcome = OutcomeBadPointer
		p.discard(inst, ReasonBadPointer)
		return &CallError{Plugin: p.name, Stage: stage, Kind: ErrBadPointer, Err: err}
	}
	if gerr != nil {
		outcome = OutcomeGuestError
		if gerr.Internal {
			p.discard(inst, ReasonPluginError)
		} else {
			p.release(inst)
		}
		return gerr
	}
	err = dec.Decode(body)
	if err == nil {
		err = use(dec)
	}
	if err != nil {
		outcome = OutcomeBadPointer
		p.discard(inst, ReasonBadPointer)
		return &CallError{Plugin: p.name, Stage: stage, Kind: ErrBadPointer, Err: err}
	}
	p.release(inst)
	return nil
}

// Close stops new calls, waits until in-flight calls (and pool refills)
// finish or ctx is done, then closes every instance and the runtime.
// Calls that start after Close fail with ErrClosed. Close is idempotent.
func (p *Plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()
	waited := make(chan struct{})
	go func() { p.inflight.Wait(); close(waited) }()
	var err error
	select {
	case <-waited:
	case <-ctx.Done():
		err = fmt.Errorf("plugins: plugin[%s] close: in-flight calls still running: %w", p.name, ctx.Err())
	}
	p.drainIdle(context.Background())
	p.closeRuntime(context.Background())
	return err
}

func (p *Plugin) drainIdle(ctx context.Context) {
	for {
		inst := p.idle.tryGet()
		if inst == nil {
			return
		}
		inst.close(ctx)
	}
}

func (p *Plugin) closeRuntime(ctx context.Context) {
	if p.rt != nil {
		_ = p.rt.Close(ctx)
	}
	if p.ownsCache != nil {
		_ = p.ownsCache.Close(ctx)
	}
}

// hostLog implements gw_host.log(level, ptr, len).
// Its lines share the call's stdout/stderr budget (stdioLimit bytes per
// call; the rest is dropped and counted), so a guest that logs in a loop
// costs its call a few KiB of log, not megabytes.
func (p *Plugin) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	if n > uint32(p.o.stdioLimit) {
		n = uint32(p.o.stdioLimit)
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		p.o.logger.Warn("plugins: gw_host.log with an out-of-range buffer", "plugin", p.name, "ptr", ptr, "len", n)
		return
	}
	w, _ := ctx.Value(stdioKey{}).(*stdioWriter)
	if v, ok := p.stdio.Load(mod); ok {
		w = v.(*stdioWriter)
	}
	if w == nil { // not one of ours: cannot happen, log it bounded as before
		p.o.logger.Log(ctx, slog.Level(level), string(b), "plugin", p.name)
		return
	}
	w.log(ctx, slog.Level(level), b)
}

// stdioWriter forwards guest stdout/stderr and gw_host.log lines to slog,
// at most limit bytes of each per call (reset by the host before each
// call).
type stdioWriter struct {
	plugin  string
	logger  *slog.Logger
	limit   int
	mu      sync.Mutex
	used    int // stdout and stderr bytes this call
	logged  int // gw_host.log bytes this call
	dropped int
}

func (w *stdioWriter) reset() {
	w.mu.Lock()
	if w.dropped > 0 {
		w.logger.Warn("plugins: guest output truncated", "plugin", w.plugin, "dropped_bytes", w.dropped)
	}
	w.used, w.logged, w.dropped = 0, 0, 0
	w.mu.Unlock()
}

func (w *stdioWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.take(&w.used, b); len(s) > 0 {
		if msg := strings.TrimRight(string(s), "\n"); msg != "" {
			w.logger.Info(msg, "plugin", w.plugin, "stream", "stdio")
		}
	}
	return len(b), nil
}

// log writes one gw_host.log line at level, within the call's budget
// for gw_host.log (limit bytes, as stdout/stderr's).
func (w *stdioWriter) log(ctx context.Context, level slog.Level, b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.take(&w.logged, b); len(s) > 0 {
		w.logger.Log(ctx, level, string(s), "plugin", w.plugin)
	}
}

// take charges b to the budget *used counts and returns the part that
// fits (w.mu held).
func (w *stdioWriter) take(used *int, b []byte) []byte {
	room := w.limit - *used
	if room <= 0 {
		w.dropped += len(b)
		return nil
	}
	if len(b) > room {
		w.dropped += len(b) - room
		b = b[:room]
	}
	*used += len(b)
	return b
}
