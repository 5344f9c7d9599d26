package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/model/actionhead"
)

// TestTensorShapesMatchPlan: Plan's action-head entries and the tensors the
// action-head loader reads (actionhead.Config.TensorShapes, also used to
// synthesise benchmark checkpoints) are the same names and shapes, for the
// tiny checkpoint's config and for the real N1.7 sizes.
func TestTensorShapesMatchPlan(t *testing.T) {
	tiny, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	require.NoError(t, err)
	for name, raw := range map[string][]byte{"tiny": tiny, "real": []byte(`{}`)} {
		t.Run(name, func(t *testing.T) {
			mc, err := ParseConfig(raw)
			require.NoError(t, err)
			ac, err := actionhead.ConfigFromJSON(raw)
			require.NoError(t, err)
			fromPlan := map[string][]int{}
			for _, s := range Plan(mc) {
				if n, ok := strings.CutPrefix(s.Name, ActionHeadPrefix); ok && s.Used {
					fromPlan[n] = s.Shape
				}
			}
			require.Equal(t, fromPlan, ac.TensorShapes())
		})
	}
}
