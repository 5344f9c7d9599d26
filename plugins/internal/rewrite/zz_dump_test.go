package rewrite

import (
	"os"
	"testing"
)

func TestZZDump(t *testing.T) {
	p := os.Getenv("ANWASM")
	if p == "" {
		t.Skip()
	}
	b, _ := os.ReadFile(p)
	out, err := Instrument(b)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(os.Getenv("ANOUT"), out, 0o644)
}
