"""`python3 -B -m gr00t_torchrunner.probe`: what this interpreter's torch offers, as one JSON line.

The gateway runs it before it loads any weights (serve --backend torch) to refuse a configuration
this host cannot serve with one clear line. It always exits 0; a missing torch is reported in
"torch_error". Keys: python, torch, torch_error, numpy, cuda_available, cuda_version, device_count,
devices [{index, name, total_mib, capability, bf16}], mkldnn, cpu_bf16, sdpa, compile.
"""
from __future__ import annotations

import json
import platform
import sys
from typing import Any, Dict


def cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def probe() -> Dict[str, Any]:
    out: Dict[str, Any] = {"python": platform.python_version(), "executable": sys.executable, "torch": None,
                           "torch_error": None, "numpy": None, "cuda_available": False, "cuda_version": None,
                           "device_count": 0, "devices": [], "mkldnn": False, "cpu_bf16": False, "sdpa": False,
                           "compile": False}
    try:
        import numpy  # noqa: F401
        out["numpy"] = numpy.__version__
    except Exception:  # noqa: BLE001 — numpy is optional for the runner
        pass
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 — report, never crash
        out["torch_error"] = f"{type(e).__name__}: {e}"
        return out
    out["torch"] = torch.__version__
    out["mkldnn"] = bool(torch.backends.mkldnn.is_available())
    flags = cpu_flags()
    out["cpu_bf16"] = bool({"avx512_bf16", "amx_bf16"} & flags)
    out["sdpa"] = hasattr(F, "scaled_dot_product_attention")
    out["compile"] = hasattr(torch, "compile")
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["cuda_version"] = torch.version.cuda
        if out["cuda_available"]:
            out["device_count"] = torch.cuda.device_count()
            for i in range(out["device_count"]):
                p = torch.cuda.get_device_properties(i)
                out["devices"].append({"index": i, "name": p.name, "total_mib": p.total_memory >> 20,
                                       "capability": [p.major, p.minor], "bf16": p.major >= 8})
    except Exception as e:  # noqa: BLE001 — a broken driver is a finding, not a crash
        out["cuda_error"] = f"{type(e).__name__}: {e}"
    return out


if __name__ == "__main__":
    print(json.dumps(probe()))
