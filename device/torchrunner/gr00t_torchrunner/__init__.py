"""gr00t_torchrunner: GR00T N1.7 on PyTorch behind gr00tgw's runner protocol (device/RUNNER.md).

The gateway (`gr00tgw serve --backend torch`) starts it as

    python3 -B -m gr00t_torchrunner [--device D] [--dtype T] [--compile] [--cuda-graphs on|off] \
        --fd 3 --backend torch --weights-dir DIR --policy P --threads N --index I

and supervises it like the Go runner. `python3 -B -m gr00t_torchrunner.probe` prints what this
interpreter's torch offers, as one JSON line, without loading a model.
"""

__version__ = "0.1.0"
