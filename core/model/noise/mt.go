package noise

// mt19937 is the 32-bit Mersenne Twister exactly as PyTorch's
// at::mt19937 (CPUGeneratorImpl) runs it: standard MT19937 seeded with the
// low 32 bits of the seed.
type mt19937 struct {
	state [624]uint32
	idx   int
}

func (m *mt19937) seed(s uint64) {
	m.state[0] = uint32(s)
	for i := 1; i < 624; i++ {
		p := m.state[i-1]
		m.state[i] = 1812433253*(p^(p>>30)) + uint32(i)
	}
	m.idx = 624
}

func (m *mt19937) twist() {
	const upper, lower, matrixA = 0x80000000, 0x7fffffff, 0x9908b0df
	for i := 0; i < 624; i++ {
		y := (m.state[i] & upper) | (m.state[(i+1)%624] & lower)
		v := m.state[(i+397)%624] ^ (y >> 1)
		if y&1 != 0 {
			v ^= matrixA
		}
		m.state[i] = v
	}
	m.idx = 0
}

// next returns the next 32-bit output.
func (m *mt19937) next() uint32 {
	if m.idx >= 624 {
		m.twist()
	}
	y := m.state[m.idx]
	m.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}
