package text

// heapThreshold is the pre-token length (bytes) above which bpe switches
// from the quadratic rank-array loop to the O(n log n) heap.
const heapThreshold = 64

type bpeEntry struct {
	rank, pos, id int32
}

// less orders by rank, then by position (leftmost first).
func (a bpeEntry) less(b bpeEntry) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

type bpeHeap []bpeEntry

func (h *bpeHeap) push(e bpeEntry) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *bpeHeap) pop() bpeEntry {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && s[l].less(s[m]) {
			m = l
		}
		if r < n && s[r].less(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// bpeLong is bpe for long pre-tokens: a doubly linked list of symbols and a
// min-heap of candidate merges keyed (rank, position), with stale entries
// skipped when popped (the pair at pos no longer has that merge). Each pop
// merges the lowest-rank pair, leftmost on ties — the same result as the
// quadratic loop (tested differentially), as in Hugging Face's Rust
// Word::merge_all.
func (t *Tokenizer) bpeLong(dst []int32, piece string) []int32 {
	n := len(piece)
	ids := make([]int32, n)
	prev := make([]int32, n)
	next := make([]int32, n)
	for i := range n {
		ids[i] = t.byteID[piece[i]]
		prev[i] = int32(i - 1)
		next[i] = int32(i + 1)
	}
	next[n-1] = -1
	h := make(bpeHeap, 0, n)
	for i := 0; i+1 < n; i++ {
		if m := t.lookup(ids[i], ids[i+1]); m.rank >= 0 {
			h.push(bpeEntry{rank: m.rank, pos: int32(i), id: m.id})
		}
	}
	for len(h) > 0 {
		e := h.pop()
		p := e.pos
		if ids[p] < 0 || next[p] < 0 {
			continue // removed, or no right neighbour any more
		}
		q := next[p]
		if m := t.lookup(ids[p], ids[q]); m.rank != e.rank || m.id != e.id {
			continue // stale: the pair at p changed
		}
		ids[p] = e.id
		ids[q] = -1
		next[p] = next[q]
		if next[p] >= 0 {
			prev[next[p]] = p
		}
		if l := prev[p]; l >= 0 {
			if m := t.lookup(ids[l], ids[p]); m.rank >= 0 {
				h.push(bpeEntry{rank: m.rank, pos: l, id: m.id})
			}
		}
		if r := next[p]; r >= 0 {
			if m := t.lookup(ids[p], ids[r]); m.rank >= 0 {
				h.push(bpeEntry{rank: m.rank, pos: p, id: m.id})
			}
		}
	}
	for i := int32(0); i >= 0; i = next[i] {
		dst = append(dst, ids[i])
	}
	return dst
}
