package plugins

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gr00tgw/gr00tgw/plugins/abi"
)

// TestNameCache: described keys map to their envelope names at any
// position (the position is only a hint), unknown keys are built.
func TestNameCache(t *testing.T) {
	c := newNameCache(&Description{
		State:   []abi.StateGroup{{Key: "a"}, {Key: "bb"}},
		Cameras: []abi.Camera{{Key: "front"}},
		Actions: []abi.ActionGroup{{Key: "x"}, {Key: "y"}},
	})
	for _, i := range []int{0, 1, 2, 7} {
		assert.Equal(t, "state.a", prefixed(&c.state, i, abi.StatePrefix, "a"))
		assert.Equal(t, "state.bb", prefixed(&c.state, i, abi.StatePrefix, "bb"))
		assert.Equal(t, "state.zz", prefixed(&c.state, i, abi.StatePrefix, "zz"))
		assert.Equal(t, "video.front", prefixed(&c.video, i, abi.VideoPrefix, "front"))
		k, ok := c.action.lookup(i, "action.y")
		assert.True(t, ok)
		assert.Equal(t, "y", k)
		_, ok = c.action.lookup(i, "action.z")
		assert.False(t, ok)
	}
}
