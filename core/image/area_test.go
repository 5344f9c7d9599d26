package image

import "testing"

func TestAreaPathString(t *testing.T) {
	for p, want := range map[AreaPath]string{AreaCopy: "copy", AreaFast: "fast", AreaGeneric: "generic", AreaLinear: "linear", 4: "AreaPath(4)", -1: "AreaPath(-1)"} {
		if got := p.String(); got != want {
			t.Errorf("AreaPath(%d).String() = %q, want %q", int(p), got, want)
		}
	}
}
