//go:build amd64 && !purego

package inflate

import "golang.org/x/sys/cpu"

// useAdlerSIMD selects the AVX2 Adler-32 kernel; tests switch it off to
// cover the portable path.
var useAdlerSIMD = cpu.X86.HasAVX2

// adler32AVX2 is implemented in adler32_amd64.s. n must be a positive
// multiple of 32, at most adlerBlock.
//
//go:noescape
func adler32AVX2(p *byte, n int) (sum, pre, wsum uint64)

// adlerKernel returns, for len(p) a multiple of 32 in (0, adlerBlock]: the
// byte sum, Σ over 32-byte chunks of (number of chunks after it)·(chunk
// sum), and Σ over chunks of Σ_j (32−j)·p[32c+j].
func adlerKernel(p []byte) (sum, pre, wsum uint64) {
	return adler32AVX2(&p[0], len(p))
}
