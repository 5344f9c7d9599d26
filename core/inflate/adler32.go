package inflate

// Adler-32 (RFC 1950 §9): s1 = 1 + Σ bytes, s2 = Σ s1 after each byte,
// both mod 65521, checksum = s2<<16 | s1.
const (
	adlerMod = 65521
	// adlerNMax is the most bytes the scalar loop may add before reducing:
	// the largest n with 255·n·(n+1)/2 + (n+1)·(adlerMod−1) < 2^32.
	adlerNMax = 5552
)

// Adler32 returns the Adler-32 checksum of p, as hash/adler32.Checksum.
// It uses an AVX2 kernel where the CPU has one.
func Adler32(p []byte) uint32 { return UpdateAdler32(1, p) }

// UpdateAdler32 returns the Adler-32 checksum of the data whose checksum is
// adler followed by p (Adler32(a‖b) = UpdateAdler32(Adler32(a), b)).
func UpdateAdler32(adler uint32, p []byte) uint32 {
	s1, s2 := adler&0xffff, adler>>16
	if useAdlerSIMD && len(p) >= 64 {
		s1, s2, p = adlerSIMD(s1, s2, p)
	}
	return adlerGeneric(s1, s2, p)
}

// adlerGeneric is the portable loop (8 bytes per step).
func adlerGeneric(s1, s2 uint32, p []byte) uint32 {
	for len(p) > 0 {
		q := p
		if len(q) > adlerNMax {
			q = q[:adlerNMax]
		}
		p = p[len(q):]
		for len(q) >= 8 {
			s1 += uint32(q[0])
			s2 += s1
			s1 += uint32(q[1])
			s2 += s1
			s1 += uint32(q[2])
			s2 += s1
			s1 += uint32(q[3])
			s2 += s1
			s1 += uint32(q[4])
			s2 += s1
			s1 += uint32(q[5])
			s2 += s1
			s1 += uint32(q[6])
			s2 += s1
			s1 += uint32(q[7])
			s2 += s1
			q = q[8:]
		}
		for _, b := range q {
			s1 += uint32(b)
			s2 += s1
		}
		s1 %= adlerMod
		s2 %= adlerMod
	}
	return s2<<16 | s1
}

// adlerBlock is the most bytes one SIMD kernel call handles: its 32-bit
// lanes cannot overflow below 16 KiB.
const adlerBlock = 16 << 10

// adlerSIMD folds the largest multiple of 32 bytes of p into (s1, s2) with
// the vector kernel and returns the rest of p.
func adlerSIMD(s1, s2 uint32, p []byte) (uint32, uint32, []byte) {
	a, b := uint64(s1), uint64(s2)
	for len(p) >= 32 {
		n := min(len(p)&^31, adlerBlock)
		sum, pre, wsum := adlerKernel(p[:n])
		// For bytes x_0..x_{n-1}: s2 += n·s1 + Σ (n−i)·x_i, where the kernel
		// splits Σ (n−i)·x_i into 32·Σ_chunks (chunks after it)·chunk sum
		// (pre) + Σ (32−j)·x_{32c+j} (wsum).
		b = (b + uint64(n)*a + 32*pre + wsum) % adlerMod
		a = (a + sum) % adlerMod
		p = p[n:]
	}
	return uint32(a), uint32(b), p
}
