package inflate

// adlerKernelGo is the scalar definition of adlerKernel (used by tests
// and on platforms without the vector kernel).
func adlerKernelGo(p []byte) (sum, pre, wsum uint64) {
	for c := 0; c+32 <= len(p); c += 32 {
		pre += sum
		for j := 0; j < 32; j++ {
			sum += uint64(p[c+j])
			wsum += uint64(32-j) * uint64(p[c+j])
		}
	}
	return sum, pre, wsum
}
