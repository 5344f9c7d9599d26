package rewrite

// Check placements decided by plan.
const (
	checkHeader byte = 1 << iota // after a loop's block type
	checkBefore                  // in front of the instruction (a back-edge br)
)

// A dispatch loop is the shape Go's wasm backend gives every function with
// jumps between basic blocks:
//
//	loop
//	  block … block            ;; k blocks, empty block type
//	    local.get $pc
//	    br_table …             ;; every target one of the k blocks
//	  end  segment 0  end  segment 1 … end  segment k-1
//	end
//
// and every jump is "i32.const K; local.set $pc; br <loop>", which lands
// in segment table[K]. A jump to a later segment than the one it is in is
// a forward jump (an if/else, a break) and needs no check; only jumps to
// the same or an earlier segment (Go's loop back-edges) can form a cycle,
// and they get the check in front of the br. Any other branch to the loop
// gives it an ordinary header check.
type loopInfo struct {
	dispatch bool     // still a candidate for per-jump checks
	pc       uint32   // the selector local
	table    []uint32 // the br_table targets (segment per K; default last), in scratch.tables
	seg      int      // the segment being scanned (-1 before the first end)
	at       int      // index of the loop instruction
}

type ctl struct {
	op   byte // 0x02 block, 0x03 loop, 0x04 if, 0 the function body
	loop int  // index into loops for a loop, -1 otherwise
	// for the blocks of a dispatch loop: the loop and the segment that
	// follows the block's end
	owner, seg int
}

// plan sets the check flags of sc.ins: checkHeader on loops that are not
// recognised dispatch loops, checkBefore on dispatch back-edges.
func plan(sc *scratch) {
	ins := sc.ins
	loops := sc.loops[:0]
	stack := append(sc.stack[:0], ctl{op: 0, loop: -1, owner: -1})
	defer func() { sc.loops, sc.stack = loops, stack }()
	for i := 0; i < len(ins); i++ {
		in := &ins[i]
		switch in.op {
		case 0x02, 0x04:
			stack = append(stack, ctl{op: in.op, loop: -1, owner: -1})
		case 0x03:
			li := loopInfo{seg: -1, at: i}
			// Recognise the dispatch prologue.
			k := 0
			for i+1+k < len(ins) && ins[i+1+k].op == 0x02 && ins[i+1+k].emptyBT {
				k++
			}
			if in.emptyBT && k > 0 && i+k+2 < len(ins) && ins[i+k+1].op == 0x20 && ins[i+k+2].op == 0x0E {
				bt := &ins[i+k+2]
				li.dispatch, li.pc, li.table = true, ins[i+k+1].imm, sc.tables[bt.tab:bt.tab+bt.ntab]
				for _, t := range li.table {
					li.dispatch = li.dispatch && int(t) < k
				}
			}
			loops = append(loops, li)
			l := len(loops) - 1
			stack = append(stack, ctl{op: 0x03, loop: l, owner: -1})
			if li.dispatch {
				for j := 0; j < k; j++ {
					// Block j from the outside is at depth k-1-j at the
					// br_table: the code after its end is segment k-1-j.
					stack = append(stack, ctl{op: 0x02, loop: -1, owner: l, seg: k - 1 - j})
				}
				i += k
			}
		case 0x0B:
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if c.owner >= 0 {
				loops[c.owner].seg = c.seg
			}
			if len(stack) == 0 {
				i = len(ins) // the function's end
			}
		case 0x0C, 0x0D:
			if int(in.imm) >= len(stack) {
				continue // invalid; wazero rejects it
			}
			c := stack[len(stack)-1-int(in.imm)]
			if c.loop < 0 {
				continue
			}
			l := &loops[c.loop]
			if in.op == 0x0C && l.dispatch && i >= 2 && ins[i-1].op == 0x21 && ins[i-2].op == 0x41 && ins[i-1].imm == l.pc {
				k := ins[i-2].imm
				t := l.table[len(l.table)-1]
				if uint64(k) < uint64(len(l.table)-1) {
					t = l.table[k]
				}
				if int(t) <= l.seg {
					in.check |= checkBefore // a back-edge
				}
				continue
			}
			l.dispatch = false
		case 0x0E:
			for _, d := range sc.tables[in.tab : in.tab+in.ntab] {
				if int(d) < len(stack) {
					if c := stack[len(stack)-1-int(d)]; c.loop >= 0 {
						loops[c.loop].dispatch = false
					}
				}
			}
		}
	}
	for _, l := range loops {
		if !l.dispatch {
			ins[l.at].check |= checkHeader
		}
	}
}
