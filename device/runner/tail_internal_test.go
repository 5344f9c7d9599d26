//go:build linux

package runner

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTailBoundsLines: the stderr tail keeps its last lines, each cut to
// maxTailLine bytes (a runner printing a megabyte line made /info carry it).
func TestTailBoundsLines(t *testing.T) {
	tl := &tail{keep: 2}
	_, _ = tl.Write([]byte("first\n" + strings.Repeat("x", 5000) + "\nshort\npart"))
	got := tl.last()
	assert.Equal(t, []string{strings.Repeat("x", maxTailLine) + "…", "short", "part"}, got)
}
