// Command libero is the gwabi v1 plugin for the libero_sim embodiment
// (projector slot 2): a single simulated Franka arm with an agent-view and
// a wrist camera (one frame each), end-effector state as seven groups
// (x, y, z, roll, pitch, yaw of width 1, gripper of width 2) and seven
// absolute action groups over a 16-step horizon. Its layout differs from
// DROID's in every respect (cameras, frames, groups, dims, horizon, action
// representation), which is what it is for.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o libero.wasm ./embodiments/libero
package main

import "github.com/gr00tgw/gr00tgw/plugins/pdk"

func init() { pdk.Register(New()) }

func main() {}
