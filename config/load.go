package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// EnvPrefix prefixes the canonical environment name of every key:
// key "log.format" is GR00TGW_LOG_FORMAT.
const EnvPrefix = "GR00TGW_"

// ConfigFileEnv names the YAML file when --config is not given.
const ConfigFileEnv = "GR00TGW_CONFIG"

// Layer names, lowest precedence first.
const (
	LayerDefault = "default"
	LayerFile    = "file"
	LayerEnv     = "env"
	LayerFlag    = "flag"
)

// Key describes one configuration key.
type Key struct {
	// Name is the dotted YAML path, e.g. "log.format".
	Name string
	// Flag is the flag name without dashes, e.g. "log-format".
	Flag string
	// Env lists the environment names in ascending precedence: aliases from
	// the reference server first (GR00T_*), the canonical GR00TGW_* last.
	Env []string
	// Usage is the flag's help text.
	Usage string
	// Secret keys are redacted by Loaded.Print.
	Secret bool

	typ   reflect.Type
	index []int
	// portEnv names the aliases of Env that hold a port number only
	// (tag suffix ":port"): their value N means 0.0.0.0:N.
	portEnv map[string]bool
}

var (
	keysOnce sync.Once
	keyTable []Key
	keyByNm  map[string]*Key
)

// Keys returns every configuration key in declaration order. The slice is
// shared: do not modify it.
func Keys() []Key {
	keysOnce.Do(func() {
		keyTable = walk(reflect.TypeFor[Config](), "", nil)
		keyByNm = make(map[string]*Key, len(keyTable))
		for i := range keyTable {
			keyByNm[keyTable[i].Name] = &keyTable[i]
		}
	})
	return keyTable
}

func walk(t reflect.Type, prefix string, index []int) []Key {
	var out []Key
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		seg := f.Tag.Get("koanf")
		if seg == "" {
			continue
		}
		idx := append(append([]int(nil), index...), i)
		name := prefix + seg
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
			out = append(out, walk(f.Type, name+".", idx)...)
			continue
		}
		k := Key{
			Name:   name,
			Flag:   f.Tag.Get("flag"),
			Usage:  f.Tag.Get("usage"),
			Secret: f.Tag.Get("secret") == "true",
			typ:    f.Type,
			index:  idx,
		}
		if k.Flag == "" {
			panic("config: key[" + name + "] has no flag tag")
		}
		if aliases := f.Tag.Get("env"); aliases != "" {
			for _, a := range strings.Split(aliases, ",") {
				if n, ok := strings.CutSuffix(a, ":port"); ok {
					if k.portEnv == nil {
						k.portEnv = map[string]bool{}
					}
					k.portEnv[n] = true
					a = n
				}
				k.Env = append(k.Env, a)
			}
		}
		k.Env = append(k.Env, EnvPrefix+strings.ToUpper(strings.ReplaceAll(name, ".", "_")))
		out = append(out, k)
	}
	return out
}

// RegisterFlags defines one flag per key on fs, with the built-in defaults
// as the flag defaults (shown by --help). Load only takes flags the user set.
func RegisterFlags(fs *pflag.FlagSet) {
	def := reflect.ValueOf(Default())
	for _, k := range Keys() {
		v := def.FieldByIndex(k.index)
		usage := k.Usage + " (env " + strings.Join(k.Env, ", ") + ")"
		switch {
		case k.typ == reflect.TypeFor[time.Duration]():
			fs.Duration(k.Flag, time.Duration(v.Int()), usage)
		case k.typ.Kind() == reflect.String:
			if k.Secret {
				fs.String(k.Flag, "", usage)
			} else {
				fs.String(k.Flag, v.String(), usage)
			}
		case k.typ.Kind() == reflect.Int:
			fs.Int(k.Flag, int(v.Int()), usage)
		case k.typ.Kind() == reflect.Float64:
			fs.Float64(k.Flag, v.Float(), usage)
		case k.typ.Kind() == reflect.Bool:
			fs.Bool(k.Flag, v.Bool(), usage)
		case k.typ == reflect.TypeFor[[]string]():
			fs.StringSlice(k.Flag, v.Interface().([]string), usage)
		default:
			panic("config: key[" + k.Name + "] has unsupported type " + k.typ.String())
		}
	}
}

// Sources names the layers Load reads. Every field is optional.
type Sources struct {
	// File is the YAML file; "" reads none (callers usually pass --config or
	// $GR00TGW_CONFIG).
	File string
	// Environ is the environment as "NAME=value" lines; nil means os.Environ().
	Environ []string
	// Flags is a parsed flag set on which RegisterFlags defined the keys;
	// only flags the user changed count.
	Flags *pflag.FlagSet
}

// Origin says where one effective value came from.
type Origin struct {
	// Layer is LayerDefault, LayerFile, LayerEnv or LayerFlag.
	Layer string
	// Name is the file path, environment name or "--flag" that supplied it.
	Name string
}

// String is "<layer> <name>", e.g. "env GR00T_WARMUP_RUNS", or "default".
func (o Origin) String() string {
	if o.Name == "" {
		return o.Layer
	}
	return o.Layer + " " + o.Name
}

// Loaded is the result of Load: the effective configuration and where each
// value came from.
type Loaded struct {
	Config     Config
	Provenance map[string]Origin
}

// Load merges defaults → file → environment → flags, converts every value to
// its key's type and validates the result. Errors name the key and the
// source of the offending value; an unknown key in the file is an error.
func Load(src Sources) (*Loaded, error) {
	keys := Keys()
	k := koanf.New(".")
	prov := make(map[string]Origin, len(keys))

	// 1. defaults.
	def := reflect.ValueOf(Default())
	dm := make(map[string]any, len(keys))
	for _, key := range keys {
		dm[key.Name] = def.FieldByIndex(key.index).Interface()
		prov[key.Name] = Origin{Layer: LayerDefault}
	}
	if err := k.Load(confmap.Provider(dm, "."), nil); err != nil {
		return nil, fmt.Errorf("config: defaults: %w", err)
	}

	// 2. file.
	if src.File != "" {
		layer := koanf.New(".")
		if err := layer.Load(file.Provider(src.File), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config: file[%s]: %w", src.File, err)
		}
		for _, name := range layer.Keys() {
			key, ok := keyByNm[name]
			if !ok {
				return nil, &KeyError{Key: name, Source: "file " + src.File, Err: fmt.Errorf("unknown key (known: %s)", strings.Join(KeyNames(), ", "))}
			}
			v, err := convert(key.typ, layer.Get(name))
			if err != nil {
				return nil, &KeyError{Key: name, Source: "file " + src.File, Err: err}
			}
			if err := k.Set(name, v); err != nil {
				return nil, fmt.Errorf("config: key[%s]: %w", name, err)
			}
			prov[name] = Origin{Layer: LayerFile, Name: src.File}
		}
	}

	// 3. environment: aliases first, canonical GR00TGW_* last (it wins).
	environ := src.Environ
	if environ == nil {
		environ = os.Environ()
	}
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if n, v, ok := strings.Cut(kv, "="); ok {
			env[n] = v
		}
	}
	em := map[string]any{}
	for _, key := range keys {
		for _, name := range key.Env {
			raw, ok := env[name]
			if !ok {
				continue
			}
			if key.portEnv[name] {
				addr, err := portAddr(raw)
				if err != nil {
					return nil, &KeyError{Key: key.Name, Source: "env " + name, Err: err}
				}
				raw = addr
			}
			v, err := convert(key.typ, raw)
			if err != nil {
				return nil, &KeyError{Key: key.Name, Source: "env " + name, Err: err}
			}
			em[key.Name] = v
			prov[key.Name] = Origin{Layer: LayerEnv, Name: name}
		}
	}
	if len(em) > 0 {
		if err := k.Load(confmap.Provider(em, "."), nil); err != nil {
			return nil, fmt.Errorf("config: environment: %w", err)
		}
	}

	// 4. flags (only those the user set: every key already exists in k, so
	// posflag skips unchanged flags).
	if src.Flags != nil {
		byFlag := make(map[string]*Key, len(keys))
		for i := range keys {
			byFlag[keys[i].Flag] = &keys[i]
		}
		layer := koanf.New(".")
		p := posflag.ProviderWithFlag(src.Flags, ".", k, func(f *pflag.Flag) (string, any) {
			key, ok := byFlag[f.Name]
			if !ok {
				return "", nil // a flag of the subcommand, not a config key
			}
			return key.Name, posflag.FlagVal(src.Flags, f)
		})
		if err := layer.Load(p, nil); err != nil {
			return nil, fmt.Errorf("config: flags: %w", err)
		}
		for _, name := range layer.Keys() {
			key := keyByNm[name]
			v, err := convert(key.typ, layer.Get(name))
			if err != nil {
				return nil, &KeyError{Key: name, Source: "flag --" + key.Flag, Err: err}
			}
			if err := k.Set(name, v); err != nil {
				return nil, fmt.Errorf("config: key[%s]: %w", name, err)
			}
			prov[name] = Origin{Layer: LayerFlag, Name: "--" + key.Flag}
		}
	}

	// Assemble the typed struct.
	var cfg Config
	cv := reflect.ValueOf(&cfg).Elem()
	for _, key := range keys {
		v, err := convert(key.typ, k.Get(key.Name))
		if err != nil {
			return nil, &KeyError{Key: key.Name, Source: prov[key.Name].String(), Err: err}
		}
		cv.FieldByIndex(key.index).Set(reflect.ValueOf(v))
	}
	if err := cfg.Validate(); err != nil {
		var ke *KeyError
		if errors.As(err, &ke) {
			ke.Source = prov[ke.Key].String()
		}
		return nil, err
	}
	// Listen addresses as they will be used (validated above), so that
	// `config print` and the logs show what is listened on.
	for _, a := range []*string{&cfg.Addr, &cfg.ZMQ.Addr, &cfg.OpenPI.Addr} {
		if *a != "" {
			*a, _ = ListenAddr(*a)
		}
	}
	return &Loaded{Config: cfg, Provenance: prov}, nil
}

// portAddr reads a port-only environment alias (PORT=8080, as Knative and
// KServe set it) as the listen address 0.0.0.0:8080: every interface,
// IPv4 and IPv6 (Go listens dual-stack on the unspecified address). A
// container's port is reached from outside the container, so a port-only
// variable never means loopback. The value must be a number in
// [1, 65535].
func portAddr(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s != strconv.Itoa(n) {
		return "", fmt.Errorf("%q is not a port number in [1, 65535] (this variable holds a port only; set GR00TGW_ADDR for host:port)", raw)
	}
	return "0.0.0.0:" + s, nil
}

// KeyNames lists every key name, sorted.
func KeyNames() []string {
	keys := Keys()
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Name
	}
	sort.Strings(out)
	return out
}

// convert turns a raw value from any layer (YAML scalar, environment string,
// typed flag value) into t, strictly: no silent truncation of floats to ints,
// durations need a unit, booleans are true/false/1/0.
func convert(t reflect.Type, raw any) (any, error) {
	if t == reflect.TypeFor[time.Duration]() {
		switch v := raw.(type) {
		case time.Duration:
			return v, nil
		case string:
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("%q is not a duration (e.g. 30s, 1m30s)", v)
			}
			return d, nil
		case int, int64, float64:
			if fmt.Sprint(v) == "0" {
				return time.Duration(0), nil
			}
			return nil, fmt.Errorf("%v needs a unit (e.g. \"%vs\")", v, v)
		}
		return nil, fmt.Errorf("%v (%T) is not a duration", raw, raw)
	}
	if t == reflect.TypeFor[[]string]() {
		return convertList(raw)
	}
	switch t.Kind() {
	case reflect.String:
		switch v := raw.(type) {
		case string:
			return v, nil
		case nil:
			return "", nil
		}
		return nil, fmt.Errorf("%v (%T) is not a string", raw, raw)
	case reflect.Int:
		switch v := raw.(type) {
		case int:
			return v, nil
		case int64:
			if v < math.MinInt || v > math.MaxInt {
				return nil, fmt.Errorf("%d overflows int", v)
			}
			return int(v), nil
		case uint64:
			if v > math.MaxInt {
				return nil, fmt.Errorf("%d overflows int", v)
			}
			return int(v), nil
		case float64:
			if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
				return nil, fmt.Errorf("%v is not an integer", v)
			}
			return int(v), nil
		case string:
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("%q is not an integer", v)
			}
			return n, nil
		}
		return nil, fmt.Errorf("%v (%T) is not an integer", raw, raw)
	case reflect.Float64:
		switch v := raw.(type) {
		case float64:
			return v, nil
		case float32:
			return float64(v), nil
		case int:
			return float64(v), nil
		case int64:
			return float64(v), nil
		case uint64:
			return float64(v), nil
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("%q is not a finite number", v)
			}
			return f, nil
		}
		return nil, fmt.Errorf("%v (%T) is not a number", raw, raw)
	case reflect.Bool:
		switch v := raw.(type) {
		case bool:
			return v, nil
		case string:
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "true", "1", "yes", "on":
				return true, nil
			case "false", "0", "no", "off", "":
				return false, nil
			}
			return nil, fmt.Errorf("%q is not a boolean", v)
		}
		return nil, fmt.Errorf("%v (%T) is not a boolean", raw, raw)
	}
	return nil, fmt.Errorf("unsupported type %s", t)
}

// Print writes the effective configuration, one key per line in key-table
// order: `key = value    # layer name`. Secret values print as "<redacted>"
// when set.
func (l *Loaded) Print(w io.Writer) error { return l.PrintResolved(w, nil) }

// PrintResolved is Print with what a value stands for where the key's
// value is a placeholder (an empty directory meaning the embedded default,
// threads 0 meaning every core): resolved[key] is appended to its comment,
// `# default → /path/to/testdata/n17-tiny`.
func (l *Loaded) PrintResolved(w io.Writer, resolved map[string]string) error {
	cv := reflect.ValueOf(l.Config)
	width := 0
	for _, k := range Keys() {
		width = max(width, len(k.Name))
	}
	for _, k := range Keys() {
		v := cv.FieldByIndex(k.index).Interface()
		s := fmt.Sprint(v)
		switch x := v.(type) {
		case string:
			s = strconv.Quote(x)
			if k.Secret && x != "" {
				s = `"<redacted>"`
			}
		case time.Duration:
			s = x.String()
		}
		src := l.Provenance[k.Name].String()
		if r := resolved[k.Name]; r != "" {
			src += " → " + r
		}
		if _, err := fmt.Fprintf(w, "%-*s = %-28s # %s\n", width, k.Name, s, src); err != nil {
			return err
		}
	}
	return nil
}

// Lookup returns the key named name.
func Lookup(name string) (Key, bool) {
	Keys()
	k, ok := keyByNm[name]
	if !ok {
		return Key{}, false
	}
	return *k, true
}

// convertList reads a list of strings: a YAML sequence of strings, a flag's
// []string, or one comma-separated string (environment). Items are
// trimmed; empty items are dropped; an empty list is nil.
func convertList(raw any) (any, error) {
	var items []string
	switch v := raw.(type) {
	case nil:
	case []string:
		items = v
	case string:
		items = strings.Split(v, ",")
	case []any:
		for i, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("item %d: %v (%T) is not a string", i, x, x)
			}
			items = append(items, s)
		}
	default:
		return nil, fmt.Errorf("%v (%T) is not a list of strings", raw, raw)
	}
	var out []string
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}
