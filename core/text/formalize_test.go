package text

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// Goldens from CPython 3.11.2 (Debian, Unicode 14.0):
//   /usr/bin/python3 testdata/text/gen_formalize.py
// VERIFY_PYREF=1 re-runs it with --check.

func TestFormalizeGolden(t *testing.T) {
	f, err := os.Open("../../testdata/text/formalize_golden.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var g struct{ In, Out string }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &g))
		require.Equal(t, g.Out, FormalizeLanguage(g.In), "in %q", g.In)
		n++
	}
	require.NoError(t, sc.Err())
	require.Greater(t, n, 30)
	require.Equal(t, "put the blue block in the green bowl", FormalizeLanguage("Put the blue block in the green bowl"))
}

// TestFormalizeCodepoints compares every code point Python 3.11 knows
// (Unicode 14.0; unassigned ones are skipped) with Python's result for the
// one-character string.
func TestFormalizeCodepoints(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/text/formalize_codepoints.json")
	require.NoError(t, err)
	var tab struct {
		Ranges [][3]any          `json:"ranges"`
		Maps   map[string]string `json:"maps"`
	}
	require.NoError(t, json.Unmarshal(raw, &tab))
	checked, bad := 0, 0
	for _, rg := range tab.Ranges {
		lo, hi, kind := int(rg[0].(float64)), int(rg[1].(float64)), rg[2].(string)
		if kind == "skip" {
			continue
		}
		for c := lo; c <= hi; c++ {
			var want string
			switch kind {
			case "keep":
				want = string(rune(c))
			case "drop":
				want = ""
			case "map":
				want = tab.Maps[strconv.Itoa(c)]
			}
			if got := FormalizeLanguage(string(rune(c))); got != want {
				bad++
				if bad < 20 {
					t.Errorf("U+%04X: got %q, python %q", c, got, want)
				}
			}
			checked++
		}
	}
	require.Zero(t, bad, "%d of %d code points differ", bad, checked)
	require.Greater(t, checked, 280000)
}

func TestVerifyPyRef(t *testing.T) {
	if os.Getenv("VERIFY_PYREF") == "" {
		t.Skip("set VERIFY_PYREF=1 to re-run testdata/text/gen_formalize.py --check with /usr/bin/python3")
	}
	out, err := exec.Command("/usr/bin/python3", "../../testdata/text/gen_formalize.py", "--check").CombinedOutput()
	t.Logf("%s", out)
	require.NoError(t, err)
}
