package emu

import (
	"context"
	"fmt"
	"runtime"

	"github.com/gr00tgw/gr00tgw/kernels/arena"
	"github.com/gr00tgw/gr00tgw/kernels/schedule"
)

// Load plans the schedule and arena of dims under policy p, packs the arena
// in memory from src and returns the emulated DiT and the arena's digest.
// With the real N1.7 shapes and mixed_dit the arena takes 1.16 GB.
func Load(ctx context.Context, src arena.WeightSource, dims schedule.Dims, p arena.Policy, workers int) (*DiT, arena.Digest, error) {
	s, err := schedule.Plan(dims)
	if err != nil {
		return nil, "", err
	}
	pl, err := arena.Build(s, p)
	if err != nil {
		return nil, "", err
	}
	data, d, err := pl.PackBytes(ctx, src)
	if err != nil {
		return nil, "", err
	}
	dit, err := New(pl, data, workers)
	return dit, d, err
}

// Plan returns the arena plan the DiT runs on.
func (d *DiT) Plan() *arena.Plan { return d.plan }

// Session binds a DiT to one caller's execution state and one request's
// cross-attention K/V, matching the call pattern of the fp32 denoise loop:
// PrepareCross once per request, then Forward once per Euler step. It
// keeps its activations, K/V buffers and worker goroutines between calls,
// so once it has seen a request shape its calls allocate nothing. A
// Session is not safe for concurrent use (the DiT it comes from is); Close
// stops its goroutines (an unreachable Session is also cleaned up by the
// garbage collector).
type Session struct {
	dit   *DiT
	e     *exec
	kv    CrossKV
	ready bool
}

// NewSession returns a session with no K/V yet. It starts the DiT's
// workers−1 helper goroutines.
func (d *DiT) NewSession() *Session {
	s := &Session{dit: d, e: d.newExec()}
	runtime.AddCleanup(s, func(p *pool) { p.close() }, s.e.pool)
	return s
}

// Close stops the session's worker goroutines; later calls run on the
// calling goroutine only. Idempotent.
func (s *Session) Close() error {
	s.e.pool.close()
	s.e.pool = newPool(1)
	return nil
}

// PrepareCross computes the request's cross K/V from vl [S, CrossDim];
// imageMask[j] is true at image tokens, attnMask (nil = all valid) false at
// padding. On error the session has no K/V until the next success.
func (s *Session) PrepareCross(vl []float32, S int, imageMask, attnMask []bool) error {
	s.ready = false
	if S < 0 || len(imageMask) < S || (attnMask != nil && len(attnMask) < S) {
		return fmt.Errorf("%w: masks shorter than %d tokens", ErrShape, S)
	}
	var valid []bool
	if attnMask != nil {
		valid = attnMask[:S]
	}
	if len(vl) < S*s.dit.dims.CrossDim {
		return fmt.Errorf("%w: vl has %d values, want %d", ErrShape, len(vl), S*s.dit.dims.CrossDim)
	}
	if err := s.e.prepareCross(&s.kv, vl[:S*s.dit.dims.CrossDim], S, imageMask[:S], valid); err != nil {
		return err
	}
	s.ready = true
	return nil
}

// Forward runs one DiT step (see DiT.Forward) with the prepared K/V.
func (s *Session) Forward(dst, x, temb []float32) error {
	if !s.ready {
		return fmt.Errorf("%w: Forward before PrepareCross", ErrShape)
	}
	return s.e.forward(dst, x, temb, &s.kv)
}
