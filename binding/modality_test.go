package binding

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/core/processor"
)

// TestModalityOf: the served modality config is processor_config.json's
// verbatim, and the one rebuilt for a checkpoint without the file (the
// DROID release configuration) is the same.
func TestModalityOf(t *testing.T) {
	ck, err := ReadCheckpoint(filepath.Join(repoRoot(t), "testdata", "n17-tiny"))
	require.NoError(t, err)
	pc, err := ck.processorConfig(processor.DROIDTag)
	require.NoError(t, err)
	got := modalityOf(ck, processor.DROIDTag, &pc)
	require.Len(t, got, 4)
	assert.Equal(t, []int{-15, 0}, got["video"].DeltaIndices)
	assert.Nil(t, got["state"].SinCosEmbeddingKeys, "null kept")
	acs := got["action"].ActionConfigs
	require.Len(t, acs, 3)
	assert.Equal(t, "XYZ_ROT6D", acs[0].Format)
	assert.Equal(t, "gripper_position", *acs[1].StateKey)

	def := processor.DefaultDROIDConfig()
	assert.Equal(t, got, modalityFromConfig(&def), "the release defaults rebuild the file's DROID entry")

	lib, err := ck.processorConfig("libero_sim")
	require.NoError(t, err)
	lm := modalityOf(ck, "libero_sim", &lib)
	assert.Equal(t, []string{"image", "wrist_image"}, lm["video"].ModalityKeys)
}
