// Package schedule plans how the DiT megakernel uses a Blackhole p150's
// 11×10 compute grid: which cores read DRAM, which relay weights, which
// compute (the core map), and which output tiles every compute core produces
// for every DiT op (the schedule), with the invariants that make the plan
// correct and an L1 budget model.
//
// Everything here is pure data computed from Dims; values are immutable
// after construction and safe for concurrent use.
package schedule

import (
	"fmt"
	"sort"
)

// Grid geometry of a p150 (firmware ≥ 19.5: 12×10 enabled Tensix, one
// column reserved for fast dispatch), logical coordinates.
const (
	GridX = 11
	GridY = 10
	Banks = 8  // GDDR6 DRAM banks
	Hubs  = 4  // weight relay cores, one per pair of banks
	Group = 12 // compute cores fed by one bank
	Cores = Banks * Group
)

// Coord is a logical worker-core coordinate (x = column 0..10, y = row 0..9).
type Coord struct{ X, Y int }

// String formats c as "(x,y)".
func (c Coord) String() string { return fmt.Sprintf("(%d,%d)", c.X, c.Y) }

// Rect is an inclusive rectangle of cores, the unit of a NoC multicast.
type Rect struct{ X0, Y0, X1, Y1 int }

// Contains reports whether c lies in r.
func (r Rect) Contains(c Coord) bool { return c.X >= r.X0 && c.X <= r.X1 && c.Y >= r.Y0 && c.Y <= r.Y1 }

// Size is the number of cores in r.
func (r Rect) Size() int { return (r.X1 - r.X0 + 1) * (r.Y1 - r.Y0 + 1) }

// String formats r as "[x0..x1]x[y0..y1]".
func (r Rect) String() string { return fmt.Sprintf("[%d..%d]x[%d..%d]", r.X0, r.X1, r.Y0, r.Y1) }

// Role is what a core does in the megakernel.
type Role uint8

// Core roles.
const (
	Idle    Role = iota // not used
	Reader              // reads its DRAM bank's arena slice, hands pages to its hub
	Hub                 // receives pages from two readers, multicasts them to the groups' rectangles
	Sync                // global barrier and cross-core reductions (LayerNorm statistics)
	Compute             // computes output tiles
)

// String names the role.
func (r Role) String() string {
	return [...]string{"idle", "reader", "hub", "sync", "compute"}[r]
}

// CoreMap assigns a role to every core of the 11×10 grid.
//
// The default map (Default) places, in logical coordinates:
//
//   - column 0 (next to the west DRAM column, banks 0-3) rows 2..8:
//     reader 0 (0,2), hub 0 (0,3), reader 1 (0,4), sync (0,5),
//     reader 2 (0,6), hub 1 (0,7), reader 3 (0,8);
//   - column 7 (next to the middle DRAM column, banks 4-7) rows 2..8:
//     reader 4 (7,2), hub 2 (7,3), reader 5 (7,4), sync (7,5),
//     reader 6 (7,6), hub 3 (7,7), reader 7 (7,8);
//   - the other 96 cores compute, in 8 groups of 12 (one per bank), each a
//     union of disjoint rectangles: group 0 = [1..6]×[2..3], 1 = [1..6]×[4..5],
//     2 = [1..6]×[6..7], 3 = [1..6]×[8..9], 4 = [8..10]×[2..5],
//     5 = [8..10]×[6..9], 6 = [0..5]×[0..1], 7 = [6..10]×[0..1] ∪ (0,9) ∪ (7,9).
//
// Each reader is one NoC hop from its hub; hub h serves banks 2h and 2h+1.
// Which logical column sits next to which DRAM column depends on the card's
// harvesting; the runtime must take the reader coordinates from tt-metal's
// optimal DRAM-bank-to-worker assignment and check them with Validate.
type CoreMap struct {
	Readers  [Banks]Coord  // reader of bank b
	HubAt    [Hubs]Coord   // hub h
	HubOf    [Banks]int    // hub serving bank b
	Groups   [Banks][]Rect // compute rectangles fed by bank b's stream
	SyncAt   []Coord       // barrier/reduction cores
	Compute  [Cores]Coord  // compute core c (group c/12, rank c%12) position
	roleAt   [GridX][GridY]Role
	computeI map[Coord]int
}

// Default returns the core map described on CoreMap.
func Default() *CoreMap {
	m := &CoreMap{}
	ys := [4]int{2, 4, 6, 8}
	for b := 0; b < 4; b++ {
		m.Readers[b] = Coord{0, ys[b]}
		m.Readers[4+b] = Coord{7, ys[b]}
	}
	m.HubAt = [Hubs]Coord{{0, 3}, {0, 7}, {7, 3}, {7, 7}}
	for b := range m.HubOf {
		m.HubOf[b] = b / 2
	}
	m.SyncAt = []Coord{{0, 5}, {7, 5}}
	m.Groups = [Banks][]Rect{
		{{1, 2, 6, 3}},
		{{1, 4, 6, 5}},
		{{1, 6, 6, 7}},
		{{1, 8, 6, 9}},
		{{8, 2, 10, 5}},
		{{8, 6, 10, 9}},
		{{0, 0, 5, 1}},
		{{6, 0, 10, 1}, {0, 9, 0, 9}, {7, 9, 7, 9}},
	}
	if err := m.build(); err != nil {
		panic(err) // the default map is a constant
	}
	return m
}

// build fills the derived tables and checks the map.
func (m *CoreMap) build() error {
	m.roleAt = [GridX][GridY]Role{}
	m.computeI = make(map[Coord]int, Cores)
	set := func(c Coord, r Role) error {
		if c.X < 0 || c.X >= GridX || c.Y < 0 || c.Y >= GridY {
			return fmt.Errorf("schedule: core %v outside the %dx%d grid", c, GridX, GridY)
		}
		if m.roleAt[c.X][c.Y] != Idle {
			return fmt.Errorf("schedule: core %v is both %s and %s", c, m.roleAt[c.X][c.Y], r)
		}
		m.roleAt[c.X][c.Y] = r
		return nil
	}
	for _, c := range m.Readers {
		if err := set(c, Reader); err != nil {
			return err
		}
	}
	for _, c := range m.HubAt {
		if err := set(c, Hub); err != nil {
			return err
		}
	}
	for _, c := range m.SyncAt {
		if err := set(c, Sync); err != nil {
			return err
		}
	}
	for b, rs := range m.Groups {
		var cs []Coord
		for _, r := range rs {
			for y := r.Y0; y <= r.Y1; y++ {
				for x := r.X0; x <= r.X1; x++ {
					cs = append(cs, Coord{x, y})
				}
			}
		}
		if len(cs) != Group {
			return fmt.Errorf("schedule: group %d has %d compute cores, want %d", b, len(cs), Group)
		}
		// rank order: row-major (y, then x), so ranks 2k and 2k+1 of a 6×2
		// rectangle share a column pair
		sort.Slice(cs, func(i, j int) bool {
			if cs[i].Y != cs[j].Y {
				return cs[i].Y < cs[j].Y
			}
			return cs[i].X < cs[j].X
		})
		for k, c := range cs {
			if err := set(c, Compute); err != nil {
				return err
			}
			m.Compute[b*Group+k] = c
			m.computeI[c] = b*Group + k
		}
	}
	for b, h := range m.HubOf {
		if h < 0 || h >= Hubs {
			return fmt.Errorf("schedule: bank %d served by hub %d", b, h)
		}
	}
	return nil
}

// Validate checks the map's invariants: every core has at most one role,
// 8 readers, 4 hubs, 96 compute cores in 8 groups of 12, rectangles inside
// the grid and pairwise disjoint (so every compute core is reached by
// exactly one hub's multicast), and each reader one NoC hop (Manhattan
// distance 1) from its hub.
func (m *CoreMap) Validate() error {
	if err := m.build(); err != nil {
		return err
	}
	var all []Rect
	for _, rs := range m.Groups {
		all = append(all, rs...)
	}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			a, b := all[i], all[j]
			if a.X0 <= b.X1 && b.X0 <= a.X1 && a.Y0 <= b.Y1 && b.Y0 <= a.Y1 {
				return fmt.Errorf("schedule: multicast rectangles %v and %v overlap", a, b)
			}
		}
	}
	for b, r := range m.Readers {
		h := m.HubAt[m.HubOf[b]]
		if d := abs(r.X-h.X) + abs(r.Y-h.Y); d != 1 {
			return fmt.Errorf("schedule: reader %d at %v is %d hops from hub %d at %v", b, r, d, m.HubOf[b], h)
		}
	}
	return nil
}

// RoleAt returns the role of the core at c.
func (m *CoreMap) RoleAt(c Coord) Role { return m.roleAt[c.X][c.Y] }

// ComputeIndex returns the compute-core index (0..95) of c, or -1.
func (m *CoreMap) ComputeIndex(c Coord) int {
	if i, ok := m.computeI[c]; ok {
		return i
	}
	return -1
}

// HubsReaching returns the hubs whose multicast rectangles contain c.
func (m *CoreMap) HubsReaching(c Coord) []int {
	var hs []int
	for b, rs := range m.Groups {
		for _, r := range rs {
			if r.Contains(c) {
				hs = append(hs, m.HubOf[b])
			}
		}
	}
	return hs
}

// Summary describes the map for /info: role counts and coordinates.
func (m *CoreMap) Summary() map[string]any {
	groups := make([]string, Banks)
	for b, rs := range m.Groups {
		s := ""
		for i, r := range rs {
			if i > 0 {
				s += "+"
			}
			s += r.String()
		}
		groups[b] = s
	}
	return map[string]any{
		"grid":          fmt.Sprintf("%dx%d", GridX, GridY),
		"dram_readers":  coordStrings(m.Readers[:]),
		"hubs":          coordStrings(m.HubAt[:]),
		"sync":          coordStrings(m.SyncAt),
		"compute_cores": Cores,
		"groups":        groups,
	}
}

func coordStrings(cs []Coord) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
