// Package stopcheck rewrites a WebAssembly module so that the host can stop
// it cheaply. It adds two mutable i32 globals, exported as Stop and Budget,
// and at every function entry (unless the body starts with a loop) and
// every loop header the check
//
//	global.get $budget
//	i32.eqz
//	if                      ;; every Interval checks:
//	  i32.const Interval
//	  global.set $budget
//	  i32.const 0
//	  memory.grow 0         ;; exit to the host runtime (a Go preemption point)
//	  drop
//	  global.get $stop
//	  if unreachable end    ;; the host asked to stop: trap
//	else
//	  $budget -= 1
//	end
//
// To stop a running call the host sets Stop to 1 and Budget to 0 from
// another goroutine; the call traps at its next check (or, if its own
// decrement raced with the host's store, within Interval checks).
//
// Why the periodic exit: native code compiled by wazero cannot be preempted
// by the Go runtime, so a guest that never leaves it blocks any
// stop-the-world (GC) in the whole process, including the timer goroutine
// that would raise Stop. memory.grow with delta 0 leaves native code for a
// non-inlined Go function (a synchronous preemption point) and has no
// effect on the guest.
//
// Compared with wazero's RuntimeConfig.WithCloseOnContextDone (which, in
// wazero v1.12's compiler, calls a Go trampoline at every loop header) the
// fast path is a load, a decrement, a store and a predicted branch, and the
// checks also bound code that recurses without looping.
//
// Only the instruction set that toolchains emit for plain wasm32 guests is
// understood: the MVP, sign extension, saturating conversions, bulk memory,
// reference types, tail calls and typed select. A module using anything
// else (SIMD, threads, exception handling, GC, multi-memory, memory64)
// makes Instrument fail with ErrUnsupported; the caller then falls back to
// another termination mechanism. Instrument does not validate the module
// beyond what rewriting needs: compile the result with wazero, which does.
package stopcheck

import (
	"errors"
	"fmt"
)

// Names of the exported control globals and the number of checks between
// two exits to the host.
const (
	Stop     = "gr00tgw.stop"
	Budget   = "gr00tgw.budget"
	Interval = 1024
)

// ErrUnsupported is returned (wrapped) for modules Instrument cannot
// rewrite safely.
var ErrUnsupported = errors.New("stopcheck: unsupported module")

// Section ids and their required order (the tag section sits between
// memory and global, the data-count section between element and code).
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

var order = map[byte]int{secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secTag: 6,
	secGlobal: 7, secExport: 8, secStart: 9, secElement: 10, secDataCount: 11, secCode: 12, secData: 13}

// Instrument returns a copy of wasm with the control globals and the checks
// described in the package comment. It does not modify wasm. The module
// must have a memory (the checks use memory.grow).
func Instrument(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || wasm[4] != 1 || wasm[5] != 0 || wasm[6] != 0 || wasm[7] != 0 {
		return nil, fmt.Errorf("%w: not a version-1 binary module", ErrUnsupported)
	}
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	r := &reader{b: wasm, pos: 8}
	for r.pos < len(r.b) {
		id := r.byte()
		n := r.u32()
		body := r.bytes(int(n))
		if r.err != nil {
			return nil, fmt.Errorf("%w: section %d: %w", ErrUnsupported, id, r.err)
		}
		if id != secCustom {
			if _, ok := order[id]; !ok {
				return nil, fmt.Errorf("%w: unknown section id %d", ErrUnsupported, id)
			}
		}
		secs = append(secs, section{id, body})
	}

	// The new global's index: imported globals first, then defined ones.
	var importedGlobals, definedGlobals uint32
	hasMemory := false
	for _, s := range secs {
		switch s.id {
		case secImport:
			n, mems, err := countImports(s.body)
			if err != nil {
				return nil, err
			}
			importedGlobals = n
			hasMemory = hasMemory || mems > 0
		case secMemory:
			mr := &reader{b: s.body}
			hasMemory = hasMemory || mr.u32() > 0
		case secGlobal:
			gr := &reader{b: s.body}
			definedGlobals = gr.u32()
			if gr.err != nil {
				return nil, fmt.Errorf("%w: global section: %w", ErrUnsupported, gr.err)
			}
		case secExport:
			if err := checkExportNames(s.body); err != nil {
				return nil, err
			}
		}
	}
	if !hasMemory {
		return nil, fmt.Errorf("%w: module has no memory", ErrUnsupported)
	}
	stop := importedGlobals + definedGlobals
	budget := stop + 1
	st, bu := uleb(uint64(stop)), uleb(uint64(budget))
	check := cat([]byte{0x23}, bu, []byte{0x45, 0x04, 0x40, 0x41}, sleb(Interval), []byte{0x24}, bu,
		[]byte{0x41, 0x00, 0x40, 0x00, 0x1A, 0x23}, st, []byte{0x04, 0x40, 0x00, 0x0B,
			0x05, 0x23}, bu, []byte{0x41, 0x01, 0x6B, 0x24}, bu, []byte{0x0B})

	// Rewrite: append to (or create) the global and export sections,
	// instrument the code section, keep everything else verbatim.
	newGlobal := cat([]byte{0x7F, 0x01, 0x41, 0x00, 0x0B}, // $stop: mut i32 = 0
		[]byte{0x7F, 0x01, 0x41}, sleb(Interval), []byte{0x0B}) // $budget: mut i32 = Interval
	newExport := cat(uleb(uint64(len(Stop))), []byte(Stop), []byte{0x03}, st,
		uleb(uint64(len(Budget))), []byte(Budget), []byte{0x03}, bu)
	haveGlobal, haveExport, haveCode := false, false, false
	out := make([]byte, 0, len(wasm)+len(wasm)/8+64)
	out = append(out, wasm[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = append(out, uleb(uint64(len(body)))...)
		out = append(out, body...)
	}
	for _, s := range secs {
		if s.id != secCustom {
			if !haveGlobal && order[s.id] > order[secGlobal] {
				emit(secGlobal, append([]byte{2}, newGlobal...))
				haveGlobal = true
			}
			if !haveExport && order[s.id] > order[secExport] {
				emit(secExport, append([]byte{2}, newExport...))
				haveExport = true
			}
		}
		switch s.id {
		case secGlobal:
			body, err := appendToVec(s.body, 2, newGlobal)
			if err != nil {
				return nil, fmt.Errorf("%w: global section: %w", ErrUnsupported, err)
			}
			emit(secGlobal, body)
			haveGlobal = true
		case secExport:
			body, err := appendToVec(s.body, 2, newExport)
			if err != nil {
				return nil, fmt.Errorf("%w: export section: %w", ErrUnsupported, err)
			}
			emit(secExport, body)
			haveExport = true
		case secCode:
			body, err := instrumentCode(s.body, check, stop)
			if err != nil {
				return nil, err
			}
			emit(secCode, body)
			haveCode = true
		default:
			emit(s.id, s.body)
		}
	}
	if !haveGlobal {
		emit(secGlobal, append([]byte{2}, newGlobal...))
	}
	if !haveExport {
		emit(secExport, append([]byte{2}, newExport...))
	}
	if !haveCode {
		return nil, fmt.Errorf("%w: no code section", ErrUnsupported)
	}
	return out, nil
}

// countImports returns the number of imported globals and memories.
func countImports(b []byte) (globals, mems uint32, err error) {
	r := &reader{b: b}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // func
			r.u32()
		case 0x01: // table
			if rt := r.byte(); rt != 0x70 && rt != 0x6F {
				return 0, 0, fmt.Errorf("%w: import %d: table element type %#x", ErrUnsupported, i, rt)
			}
			r.limits()
		case 0x02: // memory
			r.limits()
			mems++
		case 0x03: // global
			r.byte()
			r.byte()
			globals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			return 0, 0, fmt.Errorf("%w: import %d: kind %#x", ErrUnsupported, i, kind)
		}
	}
	if r.err != nil {
		return 0, 0, fmt.Errorf("%w: import section: %w", ErrUnsupported, r.err)
	}
	return globals, mems, nil
}

func checkExportNames(b []byte) error {
	r := &reader{b: b}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if name := r.name(); name == Stop || name == Budget {
			return fmt.Errorf("%w: module already exports %q", ErrUnsupported, name)
		}
		r.byte()
		r.u32()
	}
	if r.err != nil {
		return fmt.Errorf("%w: export section: %w", ErrUnsupported, r.err)
	}
	return nil
}

// appendToVec returns a vector section body with k more (pre-encoded)
// elements.
func appendToVec(b []byte, k uint64, elem []byte) ([]byte, error) {
	r := &reader{b: b}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	out := append(uleb(uint64(n)+k), b[r.pos:]...)
	return append(out, elem...), nil
}

func instrumentCode(b, check []byte, stop uint32) ([]byte, error) {
	r := &reader{b: b}
	n := r.u32()
	out := append(make([]byte, 0, len(b)+len(b)/8), uleb(uint64(n))...)
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("%w: code[%d]: %w", ErrUnsupported, i, r.err)
		}
		var err error
		if fn, err = instrumentBody(fn[:0], body, check, stop); err != nil {
			return nil, fmt.Errorf("%w: code[%d]: %w", ErrUnsupported, i, err)
		}
		out = append(out, uleb(uint64(len(fn)))...)
		out = append(out, fn...)
	}
	if r.pos != len(b) {
		return nil, fmt.Errorf("%w: code section: %d trailing bytes", ErrUnsupported, len(b)-r.pos)
	}
	return out, nil
}

// instrumentBody copies one function body, inserting check after the
// locals (unless the body starts with a loop) and after every loop's block
// type.
func instrumentBody(out, body, check []byte, stop uint32) ([]byte, error) {
	r := &reader{b: body}
	groups := r.u32()
	for g := uint32(0); g < groups && r.err == nil; g++ {
		r.u32()
		r.byte()
	}
	if r.err != nil {
		return nil, fmt.Errorf("locals: %w", r.err)
	}
	out = append(out, body[:r.pos]...)
	if r.pos >= len(body) || body[r.pos] != 0x03 {
		// A body that starts with a loop gets its entry check from the
		// loop header (Go's wasm backend emits such a dispatch loop in
		// nearly every function): one check per call, not two.
		out = append(out, check...)
	}
	for r.pos < len(body) {
		start := r.pos
		op := r.byte()
		loop := false
		switch {
		case op == 0x00, op == 0x01, op == 0x05, op == 0x0B, op == 0x0F, op == 0x1A, op == 0x1B,
			op >= 0x45 && op <= 0xC4, op == 0xD1:
			// no immediate
		case op == 0x02, op == 0x04:
			r.sleb() // block type
		case op == 0x03:
			r.sleb()
			loop = true
		case op == 0x0C, op == 0x0D, op == 0x10, op == 0x12, op == 0x20, op == 0x21, op == 0x22,
			op == 0x25, op == 0x26, op == 0xD2:
			r.u32()
		case op == 0x23, op == 0x24:
			if idx := r.u32(); r.err == nil && idx >= stop {
				return nil, fmt.Errorf("global index %d out of range", idx)
			}
		case op == 0x0E: // br_table
			n := r.u32()
			for j := uint32(0); j <= n && r.err == nil; j++ {
				r.u32()
			}
		case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1C: // select t*
			n := r.u32()
			for j := uint32(0); j < n && r.err == nil; j++ {
				r.byte()
			}
		case op >= 0x28 && op <= 0x3E: // memarg
			if align := r.u32(); align&0x40 != 0 {
				return nil, errors.New("multi-memory memarg")
			}
			r.u64()
		case op == 0x3F, op == 0x40: // memory.size/grow 0
			r.u32()
		case op == 0x41:
			r.sleb()
		case op == 0x42:
			r.sleb()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xD0:
			r.byte()
		case op == 0xFC:
			switch sub := r.u32(); {
			case sub <= 7: // saturating truncations
			case sub == 8: // memory.init data mem
				r.u32()
				r.u32()
			case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
				r.u32()
			case sub == 10, sub == 12, sub == 14:
				r.u32()
				r.u32()
			default:
				return nil, fmt.Errorf("opcode 0xfc %d", sub)
			}
		default:
			return nil, fmt.Errorf("opcode %#x at offset %d", op, start)
		}
		if r.err != nil {
			return nil, fmt.Errorf("opcode %#x at offset %d: %w", op, start, r.err)
		}
		out = append(out, body[start:r.pos]...)
		if loop {
			out = append(out, check...)
		}
	}
	if len(body) == 0 || body[len(body)-1] != 0x0B {
		return nil, errors.New("body does not end with end")
	}
	return out, nil
}

type reader struct {
	b   []byte
	pos int
	err error
}

var errEOF = errors.New("unexpected end")

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.err = errEOF
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.err = errEOF
		return nil
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

func (r *reader) u64() uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= 64 {
			r.err = errors.New("LEB128 too long")
			return 0
		}
		v |= uint64(c&0x7F) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) u32() uint32 {
	v := r.u64()
	if v > 1<<32-1 {
		r.err = errors.New("u32 out of range")
	}
	return uint32(v)
}

// sleb skips a signed LEB128 (block types and constants are copied
// verbatim, so only the length matters).
func (r *reader) sleb() { r.u64() }

func (r *reader) name() string {
	n := r.u32()
	return string(r.bytes(int(n)))
}

func (r *reader) limits() {
	flags := r.byte()
	if flags&^0x03 != 0 {
		r.err = fmt.Errorf("limits flags %#x", flags)
		return
	}
	r.u64()
	if flags&1 != 0 {
		r.u64()
	}
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// sleb encodes a non-negative i32 constant as signed LEB128.
func sleb(v uint32) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 && c&0x40 == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
