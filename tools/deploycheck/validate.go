package deploycheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator checks objects against the strict schemas of a schema
// directory (deploy/schemas), one compiled schema per kind. Safe for
// concurrent use.
type Validator struct {
	dir string

	mu      sync.Mutex
	schemas map[GVK]*jsonschema.Schema
}

// NewValidator reads schemas from dir.
func NewValidator(dir string) *Validator {
	return &Validator{dir: dir, schemas: map[GVK]*jsonschema.Schema{}}
}

// ParseGVK reads apiVersion and kind of an object.
func ParseGVK(obj map[string]any) (GVK, error) {
	av, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if av == "" || kind == "" {
		return GVK{}, errors.New("object without apiVersion or kind")
	}
	group, version, ok := strings.Cut(av, "/")
	if !ok {
		group, version = "", av
	}
	return GVK{group, version, kind}, nil
}

func (v *Validator) schema(k GVK) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.schemas[k]; ok {
		return s, nil
	}
	path := filepath.Join(v.dir, k.SchemaPath())
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no schema for %s (%s): vendor one with cmd/gwschemas", k, path)
		}
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	url := "file:///" + filepath.ToSlash(k.SchemaPath())
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v.schemas[k] = s
	return s, nil
}

// Validate checks one object: it must have a vendored schema and satisfy
// it. The error names the object and every violation with its location.
func (v *Validator) Validate(obj map[string]any) error {
	k, err := ParseGVK(obj)
	if err != nil {
		return err
	}
	s, err := v.schema(k)
	if err != nil {
		return err
	}
	// The schema library wants json.Unmarshal's value types (numbers as
	// json.Number or float64): round-trip the object.
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	return nil
}

// ValidateAll checks every object of every rendering.
func (v *Validator) ValidateAll(rs []*Rendered) error {
	var errs []error
	for _, r := range rs {
		for _, o := range r.Objects {
			if err := v.Validate(o.Object); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s (%s): %w", r.Set.Name, o.Name(), o.Source, err))
			}
		}
	}
	return errors.Join(errs...)
}
