package text_test

import (
	"fmt"

	"github.com/gr00tgw/gr00tgw/core/text"
)

func ExampleSplitPieces() {
	text.SplitPieces("Hello, world! I'LL  \n\n  go", func(p string) { fmt.Printf("%q ", p) })
	fmt.Println()
	// Output: "Hello" "," " world" "!" " I" "'LL" "  \n\n" " " " go"
}

func ExampleFormalizeLanguage() {
	fmt.Println(text.FormalizeLanguage("Pick up the RED cube; place it on the plate."))
	fmt.Println(text.FormalizeLanguage("ΟΔΟΣ ½ cafe\u0301!"))
	// Output:
	// pick up the red cube place it on the plate
	// οδος ½ cafe
}

func ExampleTokenizer_BuildPrompt() {
	tok, err := text.LoadFile("../../testdata/tokenizer/qwen3/tokenizer.json")
	if err != nil {
		panic(err)
	}
	ids, _ := tok.Encode("put the blue block in the green bowl")
	fmt.Println(ids)
	p, err := tok.BuildPrompt("Put the blue block in the green bowl", []int{112, 112, 112, 112},
		text.PromptOptions{Formalize: true, MaxTextTokens: 51})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(p.InputIDs), p.InputIDs[:4], p.InputIDs[458:])
	_, err = tok.BuildPrompt("?!", []int{112}, text.PromptOptions{Formalize: true})
	fmt.Println(err)
	// Output:
	// [628 279 6303 2504 304 279 6176 19212]
	// 469 [151644 872 198 151652] [151653 628 279 6303 2504 304 279 6176 19212 151645 198]
	// text: instruction: instruction is empty after formalization
}
