package tensor_test

import (
	"fmt"

	"github.com/gr00tgw/gr00tgw/core/tensor"
)

// A linear layer: pack the nn.Linear weight once at load, then run
// y = x·Wᵀ + b (here fused with SiLU) per request on every core.
func ExampleMatMulAct() {
	k := tensor.Default()
	w := k.PackLinear([]float32{
		1, 0, 0, // out 0 = x0
		0, 1, 1, // out 1 = x1 + x2
	}, 2, 3)
	x := []float32{1, 2, 3, -4, 0, 0} // two rows
	y := make([]float32, 2*2)
	k.MatMul(y, x, 2, w, []float32{0, 0.5})
	fmt.Println(y)
	tensor.MatMulAct(k, y, x, 2, w, nil, tensor.ActSiLU)
	fmt.Printf("%.4f\n", y)
	// Output:
	// [1 5.5 -4 0.5]
	// [0.7311 4.9665 -0.0719 0.0000]
}
