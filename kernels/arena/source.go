package arena

import (
	"fmt"

	"github.com/gr00tgw/gr00tgw/core/safetensors"
)

// SourceFunc adapts a function to WeightSource.
type SourceFunc func(name string) (shape []int, data []float32, err error)

// Tensor implements WeightSource.
func (f SourceFunc) Tensor(name string) ([]int, []float32, error) { return f(name) }

// FromSafetensors reads DiT tensors from an open checkpoint (BF16, F16 or
// F32; bf16 widens exactly). The Set must stay open while the arena is
// packed.
func FromSafetensors(s *safetensors.Set) WeightSource {
	return SourceFunc(func(name string) ([]int, []float32, error) {
		info, ok := s.Info(name)
		if !ok {
			return nil, nil, fmt.Errorf("tensor[%s]: %w", name, safetensors.ErrNotFound)
		}
		data, err := s.Float32(name)
		if err != nil {
			return nil, nil, err
		}
		return info.Shape, data, nil
	})
}
