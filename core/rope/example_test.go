package rope_test

import (
	"fmt"

	"github.com/gr00tgw/gr00tgw/core/rope"
)

func ExamplePositionIDs() {
	// <|im_start|> <|vision_start|> 2×2 merged image (grid 1×4×4) <|vision_end|> text
	ids := []int64{151644, 151652, 151655, 151655, 151655, 151655, 151653, 42}
	pos, delta, err := rope.PositionIDs(ids, nil, []rope.Grid{{T: 1, H: 4, W: 4}}, rope.DefaultConfig())
	if err != nil {
		panic(err)
	}
	s := len(ids)
	fmt.Println("t", pos[:s])
	fmt.Println("h", pos[s:2*s])
	fmt.Println("w", pos[2*s:])
	fmt.Println("delta", delta)
	// Output:
	// t [0 1 2 2 2 2 4 5]
	// h [0 1 2 2 3 3 4 5]
	// w [0 1 2 3 2 3 4 5]
	// delta -2
}
