#!/usr/bin/env python3
"""Writes testdata/statistics.json and testdata/processor_config.json for the
libero_sim plugin: synthetic but LIBERO-shaped numbers (single Franka arm,
end-effector x/y/z/roll/pitch/yaw deltas in [-1, 1] like the LIBERO OSC
controller, two-finger gripper qpos), NOT statistics of a real checkpoint.

Regenerate: /usr/bin/python3 embodiments/libero/testdata/gen_statistics.py
"""
import json, os

here = os.path.dirname(os.path.abspath(__file__))

def stats(lo, hi, q01, q99, mean, std):
    return {"min": lo, "max": hi, "q01": q01, "q99": q99, "mean": mean, "std": std}

state = {
    "x": stats([-0.45], [0.25], [-0.38], [0.19], [-0.08], [0.11]),
    "y": stats([-0.40], [0.42], [-0.31], [0.33], [0.01], [0.13]),
    "z": stats([0.80], [1.45], [0.86], [1.32], [1.05], [0.09]),
    "roll": stats([2.55], [3.60], [2.78], [3.41], [3.09], [0.12]),
    "pitch": stats([-0.95], [0.70], [-0.62], [0.45], [-0.05], [0.21]),
    "yaw": stats([-1.20], [1.05], [-0.88], [0.79], [-0.02], [0.30]),
    "gripper": stats([0.0, -0.042], [0.041, 0.0], [0.0012, -0.0401], [0.0399, -0.0011], [0.021, -0.021], [0.014, 0.014]),
}
action = {k: stats([-0.9375], [0.9375], [-0.7821], [0.8196], [0.0], [0.31]) for k in ["x", "y", "z"]}
action.update({k: stats([-0.375], [0.375], [-0.2046], [0.2561], [0.0], [0.07]) for k in ["roll", "pitch", "yaw"]})
action["gripper"] = stats([-1.0], [1.0], [-1.0], [1.0], [-0.07], [0.99])
# "yaw" also has a degenerate dim to exercise numpy.isclose → 0.
state["yaw"]["q01"] = [0.5]
state["yaw"]["q99"] = [0.500004]

json.dump({"libero_sim": {"state": state, "action": action}}, open(os.path.join(here, "statistics.json"), "w"), indent=1)

keys_s = ["x", "y", "z", "roll", "pitch", "yaw", "gripper"]
keys_a = ["x", "y", "z", "roll", "pitch", "yaw", "gripper"]
def modality(delta, keys):
    # upstream's save_pretrained writes every field of an entry, nulls
    # included; libero_sim has no action_configs (null: all ABSOLUTE).
    return {"delta_indices": delta, "modality_keys": keys, "sin_cos_embedding_keys": None,
            "mean_std_embedding_keys": None, "action_configs": None}

proc = {"processor_class": "Gr00tN1d7Processor", "processor_kwargs": {
    "modality_configs": {"libero_sim": {
        "video": modality([0], ["image", "wrist_image"]),
        "state": modality([0], keys_s),
        "action": modality(list(range(16)), keys_a),
        "language": modality([0], ["annotation.human.action.task_description"])}},
    "max_state_dim": 132, "max_action_dim": 132, "max_action_horizon": 40,
    "use_percentiles": True, "use_mean_std": False, "clip_outliers": True,
    "use_relative_action": False, "letter_box_transform": False}}
json.dump(proc, open(os.path.join(here, "processor_config.json"), "w"), indent=1)
