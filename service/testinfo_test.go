package service

// The DROID contract the parser fuzz targets validate against (the HTTP
// front end's tests hold the test doubles that serve it).

const testActionDim = 132

var droidInfo = EmbodimentInfo{
	Name: "oxe_droid_relative_eef_relative_joint", ID: 24, Plugin: "droid", PluginVersion: "0.1.0",
	Cameras: []string{"exterior_image_1_left", "wrist_image_left"}, VideoDeltaIndices: []int{-15, 0},
	StateGroups:   []Group{{"eef_9d", 9}, {"gripper_position", 1}, {"joint_position", 7}},
	ActionGroups:  []Group{{"eef_9d", 9}, {"gripper_position", 1}, {"joint_position", 7}},
	ActionHorizon: 40,
}
