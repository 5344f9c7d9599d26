package model

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gr00tgw/gr00tgw/core/safetensors"
)

// ErrCheckpoint is wrapped by every error that says a checkpoint does not
// match its configuration (missing, extra, misshapen or non-float tensors).
var ErrCheckpoint = errors.New("model: checkpoint mismatch")

// Checkpoint is an opened, verified checkpoint directory: its configuration,
// its weights plan and the memory-mapped safetensors set. Every tensor of the
// plan marked Used is present with the planned shape and a float dtype.
// Float32 may be called concurrently; Close releases the mappings.
type Checkpoint struct {
	Dir    string
	Config Config
	// Plan is the full tensor list (Plan(Config)).
	Plan []TensorSpec
	// Digest is the hex sha256 of the safetensors index (if any) and every
	// file's header bytes, in file order: cheap, and changes with any rename,
	// reshape or re-offset of a tensor.
	Digest string
	// Params is the number of elements of the used tensors.
	Params int64

	set  *safetensors.Set
	spec map[string]TensorSpec
}

// Open loads dir's configuration (LoadConfig), opens its safetensors
// (model.safetensors or a sharded index) and verifies them against the
// plan. All mismatches are reported together in one error wrapping
// ErrCheckpoint; header and truncation errors come from core/safetensors.
func Open(dir string) (*Checkpoint, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	set, err := safetensors.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("model: checkpoint: %w", err)
	}
	ck, err := newCheckpoint(dir, cfg, set)
	if err != nil {
		set.Close()
		return nil, err
	}
	return ck, nil
}

func newCheckpoint(dir string, cfg Config, set *safetensors.Set) (*Checkpoint, error) {
	plan := Plan(cfg)
	if err := Verify(plan, set); err != nil {
		return nil, err
	}
	ck := &Checkpoint{Dir: dir, Config: cfg, Plan: plan, set: set, spec: make(map[string]TensorSpec, len(plan))}
	for _, t := range plan {
		ck.spec[t.Name] = t
		if t.Used {
			ck.Params += t.NumElements()
		}
	}
	d, err := digest(dir, set)
	if err != nil {
		return nil, err
	}
	ck.Digest = d
	return ck, nil
}

// Verify checks set against plan and returns nil or one error wrapping
// ErrCheckpoint that lists every missing tensor, every shape mismatch, every
// non-float dtype and every unexpected name.
func Verify(plan []TensorSpec, set *safetensors.Set) error {
	var missing, shape, dtype, extra []string
	want := make(map[string]bool, len(plan))
	for _, t := range plan {
		want[t.Name] = true
		info, ok := set.Info(t.Name)
		if !ok {
			if t.Used {
				missing = append(missing, t.Name)
			}
			continue
		}
		if !slices.Equal(info.Shape, t.Shape) {
			shape = append(shape, fmt.Sprintf("%s %v want %v", t.Name, info.Shape, t.Shape))
		}
		switch info.DType {
		case safetensors.BF16, safetensors.F16, safetensors.F32:
		default:
			dtype = append(dtype, fmt.Sprintf("%s %s", t.Name, info.DType))
		}
	}
	for _, n := range set.Names() {
		if !want[n] && !optionalExtra[n] {
			extra = append(extra, n)
		}
	}
	if len(missing)+len(shape)+len(dtype)+len(extra) == 0 {
		return nil
	}
	var parts []string
	list := func(what string, xs []string, sep string) {
		if len(xs) == 0 {
			return
		}
		sort.Strings(xs)
		noun := "tensors"
		if len(xs) == 1 {
			noun = "tensor"
		}
		const maxShown = 20
		shown := xs
		more := ""
		if len(xs) > maxShown {
			shown, more = xs[:maxShown], fmt.Sprintf("%s… %d more", sep, len(xs)-maxShown)
		}
		parts = append(parts, fmt.Sprintf("%d %s %s: [%s%s]", len(xs), noun, what, strings.Join(shown, sep), more))
	}
	list("missing", missing, " ")
	list("with wrong shape", shape, ", ")
	list("with a non-float dtype", dtype, ", ")
	list("unexpected", extra, " ")
	return fmt.Errorf("%w: %s", ErrCheckpoint, strings.Join(parts, "; "))
}

// digest hashes the index file (sharded sets) and each file's header prefix.
func digest(dir string, set *safetensors.Set) (string, error) {
	h := sha256.New()
	if set.Index != nil {
		b, err := os.ReadFile(filepath.Join(dir, safetensors.IndexFile))
		if err == nil {
			h.Write(b)
		}
	}
	for _, f := range set.Files() {
		fh, err := os.Open(f.Path)
		if err != nil {
			return "", fmt.Errorf("model: checkpoint digest: %w", err)
		}
		_, err = io.CopyN(h, fh, f.Header.DataStart)
		fh.Close()
		if err != nil {
			return "", fmt.Errorf("model: checkpoint digest: file[%s]: %w", f.Path, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Spec returns the plan entry for name.
func (c *Checkpoint) Spec(name string) (TensorSpec, bool) {
	t, ok := c.spec[name]
	return t, ok
}

// Float32 returns a freshly allocated float32 copy of the planned tensor
// name (BF16/F16 widened exactly). Names outside the plan are an error, so a
// typo in a binding fails loudly.
func (c *Checkpoint) Float32(name string) ([]float32, error) {
	t, ok := c.spec[name]
	if !ok {
		return nil, fmt.Errorf("model: tensor[%s] is not in the plan", name)
	}
	if !t.Used {
		return nil, fmt.Errorf("model: tensor[%s] is not used for inference", name)
	}
	return c.set.Float32(name)
}

// BF16 returns the planned tensor name's bf16 bit patterns without
// widening (safetensors.Set.BF16: a view into the mapping, valid until
// Close); ok is false, with no error, when the checkpoint stores it in
// another dtype (then use Float32). Names outside the plan are an error.
func (c *Checkpoint) BF16(name string) (bits []uint16, ok bool, err error) {
	t, found := c.spec[name]
	if !found {
		return nil, false, fmt.Errorf("model: tensor[%s] is not in the plan", name)
	}
	if !t.Used {
		return nil, false, fmt.Errorf("model: tensor[%s] is not used for inference", name)
	}
	return c.set.BF16(name)
}

// Release drops the mapped pages of tensor name from the resident set once
// the caller holds its own copy (safetensors.Set.Release).
func (c *Checkpoint) Release(name string) error { return c.set.Release(name) }

// Set exposes the underlying safetensors set (for raw-byte access, e.g. a
// bf16 weight policy). It stays valid until Close.
func (c *Checkpoint) Set() *safetensors.Set { return c.set }

// Close releases the memory mappings; weights already copied stay valid.
func (c *Checkpoint) Close() error { return c.set.Close() }
