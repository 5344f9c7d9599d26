package plugins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
)

// Registry maps embodiment tags to loaded plugins. Lookups are lock-free;
// Reload replaces the whole set atomically. Safe for concurrent use.
type Registry struct {
	dir   string
	opts  []Option
	cache wazero.CompilationCache // shared by every load; closed by Close
	cur   atomic.Pointer[pluginSet]
	mu    sync.Mutex // serialises Reload and Close
}

type pluginSet struct {
	byTag   map[string]*Plugin
	plugins []*Plugin // sorted by name
}

// LoadDir loads every plugin in dir (one sub-directory per plugin, each
// with plugin.yaml and its .wasm) and returns a Registry serving them. It
// fails if any plugin fails to load or two plugins claim one embodiment;
// nothing is left open on failure. opts apply to every plugin; a
// compilation cache (WithCacheDir, default on disk) is shared by all.
func LoadDir(ctx context.Context, dir string, opts ...Option) (*Registry, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	r := &Registry{dir: dir, opts: opts}
	if o.cache == nil {
		var err error
		if o.cacheDir != "" {
			if r.cache, err = wazero.NewCompilationCacheWithDir(o.cacheDir); err != nil {
				o.logger.Warn("plugins: compilation cache dir unusable, compiling in memory", "dir", o.cacheDir, "err", err)
			}
		}
		if r.cache == nil {
			r.cache = wazero.NewCompilationCache()
		}
		r.opts = append(append([]Option(nil), opts...), WithCompilationCache(r.cache))
	}
	set, err := r.load(ctx)
	if err != nil {
		if r.cache != nil {
			_ = r.cache.Close(ctx)
		}
		return nil, err
	}
	r.cur.Store(set)
	return r, nil
}

func (r *Registry) load(ctx context.Context) (*pluginSet, error) {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	set := &pluginSet{byTag: map[string]*Plugin{}}
	fail := func(err error) (*pluginSet, error) {
		for _, p := range set.plugins {
			_ = p.Close(ctx)
		}
		return nil, err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(r.dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, ManifestFile)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		p, err := Open(ctx, sub, r.opts...)
		if err != nil {
			return fail(err)
		}
		set.plugins = append(set.plugins, p)
		tag := p.Embodiment()
		if prev, dup := set.byTag[tag]; dup {
			return fail(fmt.Errorf("wasm: plugin[%s] and plugin[%s] both serve embodiment %s", prev.Name(), p.Name(), tag))
		}
		set.byTag[tag] = p
	}
	sort.Slice(set.plugins, func(i, j int) bool { return set.plugins[i].Name() < set.plugins[j].Name() })
	return set, nil
}

// Lookup returns the plugin serving embodiment tag, or an error wrapping
// ErrUnknownEmbodiment that lists the served tags. Look the plugin up per
// request: after a Reload the old plugin rejects new calls (ErrClosed).
func (r *Registry) Lookup(tag string) (*Plugin, error) {
	set := r.cur.Load()
	if set == nil {
		return nil, fmt.Errorf("%w: registry closed", ErrClosed)
	}
	if p, ok := set.byTag[tag]; ok {
		return p, nil
	}
	tags := make([]string, 0, len(set.byTag))
	for t := range set.byTag {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	return nil, fmt.Errorf("%w: %q (served: %v)", ErrUnknownEmbodiment, tag, tags)
}

// Plugins returns the loaded plugins sorted by name.
func (r *Registry) Plugins() []*Plugin {
	set := r.cur.Load()
	if set == nil {
		return nil
	}
	return append([]*Plugin(nil), set.plugins...)
}

// Pre looks up the plugin for tag and runs Pre, retrying once on a plugin
// that a concurrent Reload closed.
func (r *Registry) Pre(ctx context.Context, tag string, in *PreInput) (*PreOutput, error) {
	for try := 0; ; try++ {
		p, err := r.Lookup(tag)
		if err != nil {
			return nil, err
		}
		out, err := p.Pre(ctx, in)
		if try == 0 && errors.Is(err, ErrClosed) {
			continue
		}
		return out, err
	}
}

// Post is Pre's counterpart for Plugin.Post.
func (r *Registry) Post(ctx context.Context, tag string, in *PostInput) (*PostOutput, error) {
	for try := 0; ; try++ {
		p, err := r.Lookup(tag)
		if err != nil {
			return nil, err
		}
		out, err := p.Post(ctx, in)
		if try == 0 && errors.Is(err, ErrClosed) {
			continue
		}
		return out, err
	}
}

// Reload re-reads the directory: it loads, validates and fills the pools
// of the new set first (on any error the current set stays in service and
// the error is returned), swaps it in atomically, then closes the old
// plugins — each waits for its in-flight calls to finish on the old
// instances (bounded by ctx). Reload returns after the old set is closed.
func (r *Registry) Reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur.Load() == nil {
		return fmt.Errorf("%w: registry closed", ErrClosed)
	}
	set, err := r.load(ctx)
	if err != nil {
		return fmt.Errorf("plugins: reload kept the current plugins: %w", err)
	}
	old := r.cur.Swap(set)
	return closeSet(ctx, old)
}

func closeSet(ctx context.Context, set *pluginSet) error {
	if set == nil {
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(set.plugins))
	for i, p := range set.plugins {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.Close(ctx) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close closes every plugin (waiting for in-flight calls, bounded by ctx)
// and the shared compilation cache.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := closeSet(ctx, r.cur.Swap(nil))
	if r.cache != nil {
		_ = r.cache.Close(ctx)
		r.cache = nil
	}
	return err
}
