#!/usr/bin/python3
"""Writes the side files of n17-tiny-newrobot: the n17-tiny checkpoint (weights, config and
embodiment_id.json linked, DROID and libero_sim entries copied) plus a fictional robot under
the tag new_embodiment (projector slot 10 in n17-tiny's embodiment_id.json): one camera
"front" at delta 0; state "joints" (7) and "gripper" (1); actions "joints" RELATIVE to the
joint state and "gripper" ABSOLUTE over 16 steps; synthetic statistics. It stands for a
checkpoint fine-tuned on a new robot: the README's "Ship a new embodiment" commands and the
scaffold test use it.
Run from the repository root: /usr/bin/python3 testdata/n17-tiny-newrobot/gen.py
"""
import json, os

here = os.path.dirname(os.path.abspath(__file__))
tiny = os.path.join(here, "..", "n17-tiny")
TAG = "new_embodiment"

def load(name):
    with open(os.path.join(tiny, name)) as f:
        return json.load(f)

def dump(obj, name):
    with open(os.path.join(here, name), "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")

def modality(delta, keys, configs=None):
    return {"delta_indices": delta, "modality_keys": keys, "sin_cos_embedding_keys": None,
            "mean_std_embedding_keys": None, "action_configs": configs}

pc = load("processor_config.json")
pc["processor_kwargs"]["modality_configs"][TAG] = {
    "video": modality([0], ["front"]),
    "state": modality([0], ["joints", "gripper"]),
    "action": modality(list(range(16)), ["joints", "gripper"], [
        {"rep": "RELATIVE", "type": "NON_EEF", "format": "DEFAULT", "state_key": "joints"},
        {"rep": "ABSOLUTE", "type": "NON_EEF", "format": "DEFAULT", "state_key": None}]),
    "language": modality([0], ["annotation.human.task_description"]),
}
dump(pc, "processor_config.json")

def vec(n, v):
    return [v + 0.1 * i for i in range(n)]

def per_step(n, v):
    return [vec(n, v * (k + 1) / 40) for k in range(40)]

def st(lo, hi):
    return {"min": lo, "max": hi, "q01": lo, "q99": hi, "mean": lo, "std": hi}

stats = load("statistics.json")
stats[TAG] = {
    "state": {"joints": st(vec(7, -2), vec(7, 2)), "gripper": st(vec(1, 0), vec(1, 0.08))},
    "action": {"joints": st(vec(7, -2), vec(7, 2)), "gripper": st(vec(1, 0), vec(1, 1))},
    "relative_action": {"joints": st(per_step(7, -0.5), per_step(7, 0.5))},
}
dump(stats, "statistics.json")
