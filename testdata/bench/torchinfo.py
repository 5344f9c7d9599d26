"""The header every torch reference timing prints: torch's version and
threads, and the BLAS library really mapped into the process, with a
warning when it is not OpenBLAS (Debian's python3-torch runs on whichever
libblas.so.3 alternative is installed; the reference BLAS is ~50-100x
slower and makes every ratio meaningless)."""

import ctypes
import os

import torch


def report():
    print(f"# torch {torch.__version__} threads={torch.get_num_threads()} "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}", flush=True)
    torch.nn.functional.linear(torch.ones(8, 8), torch.ones(8, 8))
    with open("/proc/self/maps") as f:
        libs = sorted({ln.split()[-1] for ln in f if "blas" in ln.lower() and "/" in ln})
    print(f"# blas: {' '.join(libs) or 'none mapped'}", flush=True)
    if not any("openblas" in lib for lib in libs):
        print("# WARNING: torch is not running on OpenBLAS (the reference BLAS is ~50-100x slower): "
              "apt-get install libopenblas0-pthread", flush=True)
        return
    # The kernels OpenBLAS chose for this CPU (OPENBLAS_CORETYPE overrides;
    # 0.3.21 falls back on old ones for CPUs newer than it).
    for lib in libs:
        if "libopenblas" in lib:
            name = ctypes.CDLL(lib).openblas_get_corename
            name.restype = ctypes.c_char_p
            print(f"# openblas core: {name().decode()} (OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}, "
                  f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY')})", flush=True)
