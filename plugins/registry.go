package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
)

// Registry is the plugin host's view of one plugin directory: one
// sub-directory per plugin (plugin.yaml and its .wasm). Scan lists what the
// directory holds now, with a revision per plugin that changes whenever its
// .wasm or manifest does; Open loads one plugin with the registry's
// options and a compilation cache shared by every load (a reloaded plugin
// whose .wasm did not change compiles from the cache). The registry does
// not keep the plugins it opens: the caller owns and closes them, so it
// decides which version serves and when an old one retires. Safe for
// concurrent use.
type Registry struct {
	dir   string
	opts  []Option
	cache wazero.CompilationCache // owned; closed by Close
	mu    sync.Mutex
}

// Entry is one plugin directory found by Scan.
type Entry struct {
	// Dir is the plugin's directory.
	Dir string
	// Tag is the embodiment its manifest lists ("" when unreadable).
	Tag string
	// Name and Version are the manifest's.
	Name, Version string
	// Revision is the hex sha256 of the manifest and the .wasm together.
	Revision string
	// Err is why the entry cannot be opened (unreadable or invalid
	// manifest, missing .wasm, another plugin claiming the same tag).
	Err error
}

// NewRegistry prepares a registry over dir. opts apply to every plugin
// Open loads; unless they name a compilation cache, the registry makes one
// (on disk under WithCacheDir's directory, default the user cache, else in
// memory) and shares it between loads.
func NewRegistry(dir string, opts ...Option) (*Registry, error) {
	if dir == "" {
		return nil, errors.New("plugins: registry: no plugin directory")
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	r := &Registry{dir: dir, opts: append([]Option(nil), opts...)}
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
		r.opts = append(r.opts, WithCompilationCache(r.cache))
	}
	return r, nil
}

// Dir returns the plugin directory.
func (r *Registry) Dir() string { return r.dir }

// Scan lists the plugin directories under Dir, sorted by tag. A
// sub-directory without plugin.yaml is not a plugin and is skipped; one
// whose manifest cannot be read or validated is listed with Err. When two
// plugins claim one tag, both are listed with Err naming the other.
func (r *Registry) Scan() ([]Entry, error) {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	var out []Entry
	byTag := map[string][]int{}
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		sub := filepath.Join(r.dir, de.Name())
		mb, err := os.ReadFile(filepath.Join(sub, ManifestFile))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		e := Entry{Dir: sub}
		if err != nil {
			e.Err = fmt.Errorf("plugins: %s: %w", sub, err)
			out = append(out, e)
			continue
		}
		m, err := ParseManifest(mb)
		if err == nil {
			err = m.Validate()
		}
		if err != nil {
			e.Err = fmt.Errorf("plugins: %s: %w", sub, err)
			out = append(out, e)
			continue
		}
		e.Tag, e.Name, e.Version = m.Embodiments[0], m.Name, m.Version
		wasm, err := os.ReadFile(filepath.Join(sub, m.WasmFile()))
		if err != nil {
			e.Err = fmt.Errorf("wasm: plugin[%s]: %w", m.Name, err)
		}
		e.Revision = revision(mb, wasm)
		byTag[e.Tag] = append(byTag[e.Tag], len(out))
		out = append(out, e)
	}
	for tag, idx := range byTag {
		if len(idx) < 2 {
			continue
		}
		dirs := make([]string, len(idx))
		for i, k := range idx {
			dirs[i] = out[k].Dir
		}
		for _, k := range idx {
			out[k].Err = fmt.Errorf("plugins: %s all serve embodiment %s", strings.Join(dirs, ", "), tag)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	return out, nil
}

// revision is an Entry's Revision: the digest of its manifest and wasm.
func revision(manifest, wasm []byte) string {
	h := sha256.New()
	h.Write(manifest)
	h.Write([]byte{0})
	h.Write(wasm)
	return hex.EncodeToString(h.Sum(nil))
}

// Open loads the plugin in e.Dir with the registry's options (see the
// package-level Open) and checks that it describes the tag its manifest
// lists, and, when e has a Revision, that the files it loaded are the
// ones Scan saw: a plugin edited in between is refused (the caller would
// record a revision that is not the one it serves, and a later reload
// would call the edit unchanged). The caller closes the plugin.
func (r *Registry) Open(ctx context.Context, e Entry) (*Plugin, error) {
	if e.Err != nil {
		return nil, e.Err
	}
	r.mu.Lock()
	closed := r.opts == nil
	r.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: registry closed", ErrClosed)
	}
	mb, err := os.ReadFile(filepath.Join(e.Dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("wasm: plugin dir %s: %w", e.Dir, err)
	}
	m, err := ParseManifest(mb)
	if err != nil {
		return nil, err
	}
	wasm, err := os.ReadFile(filepath.Join(e.Dir, m.WasmFile()))
	if err != nil {
		return nil, fmt.Errorf("wasm: plugin[%s]: %w", m.Name, err)
	}
	if e.Revision != "" {
		if rev := revision(mb, wasm); rev != e.Revision {
			return nil, fmt.Errorf("wasm: plugin[%s] in %s changed since it was scanned (revision %.12s…, now %.12s…): reload again", m.Name, e.Dir, e.Revision, rev)
		}
	}
	p, err := New(ctx, m, wasm, r.opts...)
	if err != nil {
		return nil, err
	}
	if e.Tag != "" && p.Embodiment() != e.Tag {
		_ = p.Close(ctx)
		return nil, fmt.Errorf("wasm: plugin[%s] describes embodiment %s, its manifest lists %s", p.Name(), p.Embodiment(), e.Tag)
	}
	return p, nil
}

// Close releases the shared compilation cache. Call it after every plugin
// the registry opened is closed (the cache holds their compiled code).
// Open fails afterwards.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts = nil
	if r.cache != nil {
		err := r.cache.Close(ctx)
		r.cache = nil
		return err
	}
	return nil
}
