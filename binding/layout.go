package binding

import (
	"fmt"
	"slices"

	"github.com/gr00tgw/gr00tgw/core/image"
	"github.com/gr00tgw/gr00tgw/core/processor"
	"github.com/gr00tgw/gr00tgw/plugins"
)

// modelVersion is the model generation every backend here implements.
const modelVersion = "n17"

// alignProcessor reconciles the processor configuration read from the
// checkpoint's processor_config.json with the plugin's gw_describe for the
// same embodiment, and fills what the file does not carry:
//
//   - cameras (keys and order) and their frame offsets must agree;
//   - the action horizon (len(action delta_indices)) must agree;
//   - the accepted per-frame grid: when the processor has none (every
//     embodiment but DROID) it becomes the plugin's layout grid, after
//     checking that the chain really maps the plugin's declared frame
//     size onto it; when both have one they must agree;
//   - L_max: the plugin's layout value when the processor has none.
//
// A disagreement is a configuration error: the checkpoint and the plugin
// describe different robots, and serving would fail on every request.
func alignProcessor(c *processor.Config, d *plugins.Description) error {
	tag := d.Embodiment
	cams := make([]string, len(d.Cameras))
	for i, cam := range d.Cameras {
		cams[i] = cam.Key
		if !slices.Equal(cam.DeltaIndices, c.VideoDeltaIndices) {
			return fmt.Errorf("%w: embodiment[%s]: camera %s: plugin frame offsets %v, processor_config.json %v",
				processor.ErrConfig, tag, cam.Key, cam.DeltaIndices, c.VideoDeltaIndices)
		}
	}
	if !slices.Equal(cams, c.Cameras) {
		return fmt.Errorf("%w: embodiment[%s]: plugin cameras %v, processor_config.json %v", processor.ErrConfig, tag, cams, c.Cameras)
	}
	if d.ActionHorizon != 0 && c.ActionHorizon != 0 && d.ActionHorizon != c.ActionHorizon {
		return fmt.Errorf("%w: embodiment[%s]: plugin action horizon %d, processor_config.json %d",
			processor.ErrConfig, tag, d.ActionHorizon, c.ActionHorizon)
	}
	lg := d.Layout.VitGridTHW
	if grid := (image.Grid{T: lg[0], H: lg[1], W: lg[2]}); grid != (image.Grid{}) {
		// Every camera's declared frame size must land on the layout grid.
		for _, cam := range d.Cameras {
			if cam.Width <= 0 || cam.Height <= 0 {
				continue
			}
			sz, err := c.Chain.Sizes(cam.Width, cam.Height)
			if err != nil {
				return fmt.Errorf("%w: embodiment[%s]: camera %s: chain on a %dx%d frame: %w",
					processor.ErrConfig, tag, cam.Key, cam.Width, cam.Height, err)
			}
			if sz.Grid != grid {
				return fmt.Errorf("%w: embodiment[%s]: camera %s: a %dx%d frame gives grid %v under the checkpoint's chain, plugin layout %s says %v",
					processor.ErrConfig, tag, cam.Key, cam.Width, cam.Height, sz.Grid, d.Layout.Name, grid)
			}
		}
		switch {
		case c.RequireGrid == (image.Grid{}):
			c.RequireGrid = grid
		case c.RequireGrid != grid:
			return fmt.Errorf("%w: embodiment[%s]: processor grid %v, plugin layout %s grid %v",
				processor.ErrConfig, tag, c.RequireGrid, d.Layout.Name, grid)
		}
	}
	if c.MaxTextTokens == 0 && d.Layout.LMax > 0 {
		c.MaxTextTokens = d.Layout.LMax
	}
	return nil
}
