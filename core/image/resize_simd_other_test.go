//go:build !amd64 || purego

package image

func kernelLevels() []kernelLevel {
	return []kernelLevel{{"scalar", func() func() {
		forceScalar = true
		return func() { forceScalar = false }
	}}}
}
