package assets

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDefaultAssetsDir: the checkout holds the embedded default's
// tokenizer and checkpoint where the layout says (moved from
// core/processor, which now takes explicit paths).
func TestDefaultAssetsDir(t *testing.T) {
	tok, err := Path(TokenizerDir)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(tok, "tokenizer.json"))
	ck, err := Path(CheckpointDir)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(ck, "processor_config.json"))
}
