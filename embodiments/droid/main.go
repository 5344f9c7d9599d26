// Command droid is the gwabi v1 plugin for the GR00T N1.7 DROID embodiment
// (oxe_droid_relative_eef_relative_joint, projector slot 24): it validates
// the observation, normalises the state with the checkpoint's q01/q99
// statistics and decodes the model's relative action chunk into absolute
// physical actions (upstream Isaac-GR00T gr00t/data/state_action/
// state_action_processor.py and gr00t/data/state_action/droid_frame.py).
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o droid.wasm ./embodiments/droid
package main

import "github.com/gr00tgw/gr00tgw/plugins/pdk"

// plugin is the instance the module's exports serve.
var plugin = New()

func init() { pdk.Register(plugin) }

func main() {}
