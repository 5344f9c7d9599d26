package rewrite

// planFolds rewrites Go's address pattern for float loads and stores,
//
//	local.get L; i64.const C; i64.add; i32.wrap_i64; … f32/f64.load|store offset=O
//
// (Go folds constant offsets into integer accesses but not into float
// ones) into "local.get L; i32.wrap_i64; … load|store offset=O+C", which
// planWraps and planProbes then treat like every other access through L.
// The access that consumes the address is found by following the operand
// stack through straight-line code (a store's value is computed between
// the address and the store). The folded instructions are removed from
// sc.ins. The two forms address the same byte unless the low 32 bits of
// L are within C of 4 GiB, where the first wraps around to low memory and
// the second traps. Only 0 ≤ C < maxFold (1 MiB) is folded, so that takes
// a pointer above 4095 MiB: no pointer into a wasm32 memory of the host's
// page limit, and Go's constants are field offsets, far smaller.
func planFolds(sc *scratch) {
	ins := sc.ins
	folded := false
	for i := 0; i+4 < len(ins); i++ {
		if ins[i].op != 0x20 || ins[i+1].op != 0x42 || ins[i+2].op != 0x7C || ins[i+3].op != 0xA7 ||
			ins[i+1].c64 < 0 || ins[i+1].c64 >= maxFold {
			continue
		}
		j := addrConsumer(ins, i+4)
		if j < 0 || uint64(ins[j].imm)+uint64(ins[i+1].c64) >= 1<<32 {
			continue
		}
		ins[i+1].check |= dropped
		ins[i+2].check |= dropped
		ins[j].imm += uint32(ins[i+1].c64)
		ins[j].refold = true
		folded = true
		i += 3
	}
	if !folded {
		return
	}
	w := 0
	for i := range ins {
		if ins[i].check&dropped == 0 {
			ins[w] = ins[i]
			w++
		}
	}
	sc.ins = ins[:w]
}

// maxFold bounds the constants planFolds moves into an access's offset.
const maxFold = 1 << 20

// addrConsumer returns the index of the float load or store that takes
// the address on top of the stack before ins[k] as its address operand,
// or -1 if something else takes it or control flow comes first.
func addrConsumer(ins []instr, k int) int {
	h := 1 // the address's position from the top of the stack
	for j := k; j < len(ins) && j < k+64; j++ {
		np, nq, ok := stackEffect(&ins[j])
		if !ok {
			return -1
		}
		if np >= h {
			switch op := ins[j].op; {
			case (op == 0x2A || op == 0x2B) && h == 1, (op == 0x38 || op == 0x39) && h == 2:
				return j
			}
			return -1
		}
		h += nq - np
	}
	return -1
}

const (
	wrapNone byte = iota
	wrapFirst
	wrapReuse
	wrapDrop
)

// planWraps marks "local.get X; i32.wrap_i64" pairs (Go's wasm backend
// emits one in front of every memory access through a pointer held in an
// i64 local) so that within a straight-line region the wrapped value is
// computed once into a new i32 local W_X and reused: wazero's compiler then
// sees one address value and checks its bounds once per offset range
// instead of once per access. Regions end at loop, else and end (join
// points) and at any write to X. It returns the number of new locals.
func planWraps(sc *scratch, nlocals uint64) int {
	ins := sc.ins
	// Which X to cache: every local read as "local.get X; i32.wrap_i64".
	m := sc.wmap[:0]
	find := func(x uint32) int {
		for j := range m {
			if m[j].x == x {
				return j
			}
		}
		return -1
	}
	for i := 0; i+1 < len(ins); i++ {
		if ins[i].op == 0x20 && ins[i+1].op == 0xA7 && find(ins[i].imm) < 0 {
			if len(m) >= 256 {
				break
			}
			m = append(m, wrapLocal{x: ins[i].imm})
		}
	}
	sc.wmap = m
	if len(m) == 0 {
		return 0
	}
	for j := range m {
		m[j].w = uint32(nlocals) + uint32(j)
		m[j].valid = false
	}
	invalidateAll := func() {
		for j := range m {
			m[j].valid = false
		}
	}
	used := 0
	for i := 0; i < len(ins); i++ {
		in := &ins[i]
		in.wrap = wrapNone
		switch in.op {
		case 0x03, 0x05, 0x0B: // loop, else, end: join points
			invalidateAll()
		case 0x21, 0x22:
			if j := find(in.imm); j >= 0 {
				m[j].valid = false
			}
		case 0x20:
			if i+1 < len(ins) && ins[i+1].op == 0xA7 {
				if j := find(in.imm); j >= 0 {
					in.wloc = m[j].w
					if m[j].valid {
						in.wrap = wrapReuse
						ins[i+1].wrap = wrapDrop
					} else {
						in.wrap = wrapFirst
						ins[i+1].wrap = wrapDrop
						m[j].valid = true
					}
					used++
					i++
				}
			}
		}
	}
	if used == 0 {
		return 0
	}
	return len(m)
}

type wrapLocal struct {
	x, w  uint32
	valid bool
}

// appendProbe appends "local.get loc; i32.load8_u offset=ceil-1; drop".
func appendProbe(out []byte, loc, ceil uint32) []byte {
	out = append(out, 0x20)
	out = appendULEB(out, uint64(loc))
	out = append(out, 0x2D, 0x00)
	out = appendULEB(out, uint64(ceil-1))
	return append(out, 0x1A)
}

// localVer counts the writes to a local within a run.
type localVer struct{ loc, ver uint32 }

// probeGroup is one value of one local within a run (ver counts the
// local's writes in the run) and the accesses made through it.
type probeGroup struct {
	loc, ver uint32
	site     int    // the instruction that first pushes the value in the run
	max      uint32 // the largest offset+size accessed
	checks   int    // the checks wazero would emit: accesses raising max
}

// memAccessSize returns the access size of a load/store opcode, and
// whether it is a store.
func memAccessSize(op byte) (uint32, bool) {
	switch op {
	case 0x28, 0x2A, 0x34, 0x35:
		return 4, false
	case 0x29, 0x2B:
		return 8, false
	case 0x2C, 0x2D, 0x30, 0x31:
		return 1, false
	case 0x2E, 0x2F, 0x32, 0x33:
		return 2, false
	case 0x36, 0x38, 0x3E:
		return 4, true
	case 0x37, 0x39:
		return 8, true
	case 0x3A, 0x3C:
		return 1, true
	case 0x3B, 0x3D:
		return 2, true
	}
	return 0, false
}

// stackEffect returns how many operands op pops and pushes, for the
// opcodes that can occur inside a run (no control flow). ok is false for
// anything else (the run ends there).
func stackEffect(in *instr) (pop, push int, ok bool) {
	op := in.op
	switch {
	case op == 0x01:
		return 0, 0, true
	case op == 0x1A:
		return 1, 0, true
	case op == 0x1B, op == 0x1C:
		return 3, 1, true
	case op == 0x20, op == 0x23, op == 0x3F, op >= 0x41 && op <= 0x44, op == 0xD0, op == 0xD2:
		return 0, 1, true
	case op == 0x21, op == 0x24:
		return 1, 0, true
	case op == 0x22:
		return 1, 1, true
	case op == 0x25:
		return 1, 1, true
	case op == 0x26:
		return 2, 0, true
	case op >= 0x28 && op <= 0x35:
		return 1, 1, true
	case op >= 0x36 && op <= 0x3E:
		return 2, 0, true
	case op == 0x45, op == 0x50, op == 0x67, op == 0x68, op == 0x69, op == 0x79, op == 0x7A, op == 0x7B,
		op >= 0x8B && op <= 0x91, op >= 0x99 && op <= 0x9F, op >= 0xA7 && op <= 0xC4, op == 0xD1:
		return 1, 1, true
	case op >= 0x46 && op <= 0x4F, op >= 0x51 && op <= 0x66, op >= 0x6A && op <= 0x78, op >= 0x7C && op <= 0x8A,
		op >= 0x92 && op <= 0x98, op >= 0xA0 && op <= 0xA6:
		return 2, 1, true
	}
	return 0, 0, false // control flow, calls, memory.grow, 0xFC: end of run
}

// planProbes finds, in each run of straight-line code (no control flow,
// calls or memory.grow), the memory accesses whose address is the value
// of an i32 local (read by local.get, or a wrapped pointer cached by
// planWraps) and for which wazero would check the bounds more than once
// (an access is checked again whenever its offset+size exceeds those
// before it), and marks a probe there: one 1-byte load at the largest
// offset+size, in front of the run's first read of that value. Every
// instruction of a run executes once the run starts (nothing in it
// branches, calls or grows memory), so the probe traps only if the run
// would have trapped anyway; after it, the run's accesses through that
// value need no check of their own.
//
// The address operand of each access is found by simulating the operand
// stack over the run (stackEffect); values from before the run, or from
// anything but a local read, have no known origin and are not probed.
func planProbes(sc *scratch) {
	ins := sc.ins
	for i := 0; i < len(ins); {
		j := probeRun(sc, i)
		if j == i {
			j++ // a control instruction
		}
		i = j
	}
}

// probeRun plans the probes of the run starting at ins[i] and returns the
// index of the instruction that ends it.
func probeRun(sc *scratch, i int) int {
	ins := sc.ins
	vers, groups, prov := sc.vers[:0], sc.groups[:0], sc.prov[:0]
	defer func() { sc.vers, sc.groups, sc.prov = vers, groups, prov }()
	version := func(loc uint32) *uint32 {
		for k := range vers {
			if vers[k].loc == loc {
				return &vers[k].ver
			}
		}
		vers = append(vers, localVer{loc: loc})
		return &vers[len(vers)-1].ver
	}
	// group returns the group of loc's current value, opening it at site.
	group := func(loc uint32, site int) int32 {
		v := *version(loc)
		for k := range groups {
			if groups[k].loc == loc && groups[k].ver == v {
				return int32(k)
			}
		}
		groups = append(groups, probeGroup{loc: loc, ver: v, site: site})
		return int32(len(groups) - 1)
	}
	pop := func() int32 {
		if len(prov) == 0 {
			return -1 // a value from before the run
		}
		v := prov[len(prov)-1]
		prov = prov[:len(prov)-1]
		return v
	}
	j := i
	for ; j < len(ins); j++ {
		in := &ins[j]
		if in.wrap == wrapDrop {
			continue // folded into the local.get before it
		}
		np, nq, ok := stackEffect(in)
		if !ok {
			break
		}
		switch {
		case in.op == 0x20 && in.wrap == wrapFirst:
			*version(in.wloc)++ // the cached local gets a new value here
			prov = append(prov, group(in.wloc, j))
		case in.op == 0x20 && in.wrap == wrapReuse:
			prov = append(prov, group(in.wloc, j))
		case in.op == 0x20:
			prov = append(prov, group(in.imm, j))
		case in.op == 0x21 || in.op == 0x22:
			pop()
			*version(in.imm)++
			if in.op == 0x22 {
				prov = append(prov, -1)
			}
		case in.op >= 0x28 && in.op <= 0x3E:
			size, store := memAccessSize(in.op)
			if store {
				pop() // the value
			}
			a := pop()
			if !store {
				prov = append(prov, -1)
			}
			if a >= 0 {
				g := &groups[a]
				if ceil := uint64(in.imm) + uint64(size); ceil > uint64(g.max) && ceil < 1<<32 {
					g.max = uint32(ceil)
					g.checks++
				}
			}
		default:
			for range np {
				pop()
			}
			for range nq {
				prov = append(prov, -1)
			}
		}
	}
	for _, g := range groups {
		if g.checks >= 2 {
			ins[g.site].probe = g.max
			ins[g.site].probeLoc = g.loc
		}
	}
	return j
}
