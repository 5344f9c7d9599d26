// Package rewrite adds stop checks to a guest WebAssembly module once at
// load, before wazero compiles it. A guest that is not stopped computes
// exactly what it computed before.
//
// The module gets two mutable i32 globals, exported as Stop and Budget,
// and at every function entry (unless the body starts with a checked loop)
// and every loop header the check
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
// Go's wasm backend turns every jump between basic blocks (if/else
// included) into a branch back to one dispatch loop per function, so a
// check at that loop's header runs on nearly every branch. Such loops are
// recognised (see loopInfo in stop.go) and checked only in front of the
// jumps to the same or an earlier block, which are the only ones that can
// close a cycle; forward jumps are free. Between two checks a call
// therefore runs at most one pass over each function's blocks, and any
// infinite execution still passes a check: a cycle within a function needs
// a back-edge (a checked header or a checked backward jump), and recursion
// passes function entries. InstrumentEveryLoop keeps the older placement.
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
// reference types, tail calls, typed select and fixed-width SIMD (which
// Rust and C toolchains emit with simd128, and wazero enables by default).
// A module using anything else (relaxed SIMD, threads, exception handling,
// GC, multi-memory, memory64) makes Instrument fail with ErrUnsupported;
// the caller then falls back to another termination mechanism, which does
// not bound code that recurses without looping (wazero checks at loop
// headers only). Instrument does not validate the module
// beyond what rewriting needs: compile the result with wazero, which does.
package rewrite

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
var ErrUnsupported = errors.New("rewrite: unsupported module")

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

// Instrument returns a copy of wasm rewritten as the package comment
// describes. It does not modify wasm. The module must have a memory (the
// checks use memory.grow).
func Instrument(wasm []byte) ([]byte, error) { return instrument(wasm, false) }

// InstrumentEveryLoop is the reference placement kept for benchmarks and
// tests: a stop check at every loop header, without the dispatch-loop
// analysis.
func InstrumentEveryLoop(wasm []byte) ([]byte, error) { return instrument(wasm, true) }

func instrument(wasm []byte, everyLoop bool) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || wasm[4] != 1 || wasm[5] != 0 || wasm[6] != 0 || wasm[7] != 0 {
		return nil, fmt.Errorf("%w: not a version-1 binary module", ErrUnsupported)
	}
	var secs []secRef
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
		secs = append(secs, secRef{id, body})
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
			body, err := instrumentCode(s.body, check, stop, everyLoop)
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
			if !valType(r.byte()) && r.err == nil {
				return 0, 0, fmt.Errorf("%w: import %d: global of a value type outside numbers and references", ErrUnsupported, i)
			}
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

func instrumentCode(b, check []byte, stop uint32, everyLoop bool) ([]byte, error) {
	r := &reader{b: b}
	n := r.u32()
	out := append(make([]byte, 0, len(b)+len(b)/8), uleb(uint64(n))...)
	var fn []byte
	var sc scratch
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("%w: code[%d]: %w", ErrUnsupported, i, r.err)
		}
		var err error
		if fn, err = instrumentBody(fn[:0], body, check, stop, everyLoop, &sc); err != nil {
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

// instr is one decoded instruction of a function body: its byte range and
// the immediates the analysis needs.
type instr struct {
	start, end int32
	imm        uint32 // br/br_if depth, local.get/set index, i32.const value (as u32)
	tab, ntab  int32  // br_table: targets (default last) are scratch.tables[tab : tab+ntab]
	op         byte
	emptyBT    bool // block/loop/if with the empty block type
	check      byte // checkHeader / checkBefore, set by plan
}

// scratch holds the per-function buffers of the analysis, reused across
// the functions of a module (a Go module has tens of thousands).
type scratch struct {
	ins    []instr
	tables []uint32
	loops  []loopInfo
	stack  []ctl
}

// decodeBody splits a body (after its locals) into sc.ins.
func decodeBody(r *reader, stop uint32, sc *scratch) error {
	ins := sc.ins[:0]
	sc.tables = sc.tables[:0]
	defer func() { sc.ins = ins }()
	for r.pos < len(r.b) {
		start := r.pos
		op := r.byte()
		in := instr{start: int32(start), op: op}
		switch {
		case op == 0x00, op == 0x01, op == 0x05, op == 0x0B, op == 0x0F, op == 0x1A, op == 0x1B,
			op >= 0x45 && op <= 0xC4, op == 0xD1:
			// no immediate
		case op == 0x02, op == 0x03, op == 0x04: // block, loop, if
			in.emptyBT = r.pos < len(r.b) && r.b[r.pos] == 0x40
			r.sleb()
		case op == 0x0C, op == 0x0D, op == 0x20, op == 0x21, op == 0x22: // br, br_if, local.get/set/tee
			in.imm = r.u32()
		case op == 0x10, op == 0x12, op == 0x25, op == 0x26, op == 0xD2:
			r.u32()
		case op == 0x23, op == 0x24:
			if idx := r.u32(); r.err == nil && idx >= stop {
				return fmt.Errorf("global index %d out of range", idx)
			}
		case op == 0x0E: // br_table
			n := r.u32()
			if r.err == nil && uint64(n) > uint64(len(r.b)) {
				return fmt.Errorf("br_table with %d targets", n)
			}
			in.tab = int32(len(sc.tables))
			for j := uint32(0); j <= n && r.err == nil; j++ {
				sc.tables = append(sc.tables, r.u32())
			}
			in.ntab = int32(len(sc.tables)) - in.tab
		case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1C: // select t*
			n := r.u32()
			for j := uint32(0); j < n && r.err == nil; j++ {
				if !valType(r.byte()) && r.err == nil {
					return errors.New("typed select of a value type outside numbers and references")
				}
			}
		case op >= 0x28 && op <= 0x3E: // memarg
			if err := memarg(r, start); err != nil {
				return err
			}
		case op == 0x3F, op == 0x40: // memory.size/grow 0
			r.u32()
		case op == 0x41:
			in.imm = uint32(r.s32())
		case op == 0x42:
			r.sleb()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xD0: // ref.null: funcref or externref only (no typed references)
			if ht := r.byte(); ht != 0x70 && ht != 0x6F && r.err == nil {
				return fmt.Errorf("ref.null heap type %#x", ht)
			}
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
				return fmt.Errorf("opcode 0xfc %d", sub)
			}
		case op == 0xFD: // SIMD (fixed-width, 1.0): wazero enables it by default
			switch sub := r.u32(); {
			case sub <= 11, sub == 92, sub == 93: // loads, store, load*_zero
				if err := memarg(r, start); err != nil {
					return err
				}
			case sub == 12, sub == 13: // v128.const, i8x16.shuffle
				r.bytes(16)
			case sub >= 21 && sub <= 34: // extract/replace_lane
				r.byte()
			case sub >= 84 && sub <= 91: // load/store*_lane
				if err := memarg(r, start); err != nil {
					return err
				}
				r.byte()
			case sub <= 255: // the rest of SIMD 1.0 has no immediate
			default: // relaxed SIMD and beyond: not in wazero's feature set
				return fmt.Errorf("opcode 0xfd %d", sub)
			}
		default:
			return fmt.Errorf("opcode %#x at offset %d", op, start)
		}
		if r.err != nil {
			return fmt.Errorf("opcode %#x at offset %d: %w", op, start, r.err)
		}
		in.end = int32(r.pos)
		ins = append(ins, in)
	}
	return nil
}

// memarg reads a memory instruction's alignment and offset (memory 0:
// multi-memory is refused).
func memarg(r *reader, start int) error {
	if align := r.u32(); align&0x40 != 0 {
		return errors.New("multi-memory memarg")
	}
	if off := r.u64(); off > 1<<32-1 && r.err == nil {
		return fmt.Errorf("memarg offset %d at offset %d", off, start)
	}
	return nil
}

// instrumentBody copies one function body, inserting check after the
// locals (unless the body starts with a loop that gets a header check),
// after the block type of every loop that is not a recognised dispatch
// loop, and in front of every back-edge jump of a dispatch loop.
func instrumentBody(out, body, check []byte, stop uint32, everyLoop bool, sc *scratch) ([]byte, error) {
	r := &reader{b: body}
	groups := r.u32()
	for g := uint32(0); g < groups && r.err == nil; g++ {
		r.u32()
		if !valType(r.byte()) && r.err == nil {
			return nil, errors.New("locals: value type outside numbers and references")
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("locals: %w", r.err)
	}
	localsEnd := r.pos
	if err := decodeBody(r, stop, sc); err != nil {
		return nil, err
	}
	out = append(out, body[:localsEnd]...)
	if len(body) == 0 || body[len(body)-1] != 0x0B {
		return nil, errors.New("body does not end with end")
	}
	ins := sc.ins
	if everyLoop {
		for i := range ins {
			if ins[i].op == 0x03 {
				ins[i].check = checkHeader
			}
		}
	} else {
		plan(sc)
	}
	if len(ins) == 0 || ins[0].check&checkHeader == 0 {
		// A body that starts with a checked loop gets its entry check
		// from the loop header: one check per call, not two.
		out = append(out, check...)
	}
	for i := range ins {
		in := &ins[i]
		if in.check&checkBefore != 0 {
			out = append(out, check...)
		}
		out = append(out, body[in.start:in.end]...)
		if in.check&checkHeader != 0 {
			out = append(out, check...)
		}
	}
	return out, nil
}

// valType reports whether t is a one-byte value type the rewrite
// understands: i32, i64, f32, f64, funcref, externref. Anything else
// (v128, typed references with a heap-type index) makes the module
// unsupported.
func valType(t byte) bool {
	switch t {
	case 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F: // i32 i64 f32 f64 v128 funcref externref
		return true
	}
	return false
}

// secRef is one section of the input module.
type secRef struct {
	id   byte
	body []byte
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

// s32 reads a signed LEB128 i32.
func (r *reader) s32() int32 { return int32(r.signed(35)) }

// signed reads a signed LEB128 of at most maxShift/7 bytes.
func (r *reader) signed(maxShift uint) int64 {
	var v int64
	var shift uint
	for {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= maxShift {
			r.err = errors.New("LEB128 too long")
			return 0
		}
		v |= int64(c&0x7F) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
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

func uleb(v uint64) []byte { return appendULEB(nil, v) }

func appendULEB(b []byte, v uint64) []byte {
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
