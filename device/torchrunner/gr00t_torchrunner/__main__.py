"""`python3 -B -m gr00t_torchrunner ...`: the runner process (device/RUNNER.md).

Loads the checkpoint on the requested device, then serves the runner protocol on the inherited
socket (--fd, default $GR00TGW_RUNNER_FD). Exits 0 after the client's CLOSE, 1 when the client goes
away, 2 for bad flags or a device/dtype this host cannot give (the message names the flag), 3 when
the checkpoint cannot be loaded. Flags it does not know are ignored (the protocol's rule).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import List, Optional


class JSONFormatter(logging.Formatter):
    """One JSON object per line, as the Go runner logs (the gateway forwards stderr)."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def format(self, r: logging.LogRecord) -> str:
        out = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(r.created)) + f".{int(r.msecs):03d}Z",
               "level": r.levelname.replace("WARNING", "WARN"), "msg": r.getMessage(),
               "runner": self.index, "pid": os.getpid()}
        for k in ("key", "err"):
            if hasattr(r, k):
                out[k] = getattr(r, k)
        if r.exc_info:
            out["exc"] = self.formatException(r.exc_info)
        return json.dumps(out)


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python3 -m gr00t_torchrunner", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fd", type=int, default=int(os.environ.get("GR00TGW_RUNNER_FD", "-1")),
                    help="inherited SOCK_SEQPACKET socket (env GR00TGW_RUNNER_FD)")
    ap.add_argument("--weights-dir", required=True, help="checkpoint directory")
    ap.add_argument("--device", default="cuda", help="cpu, cuda (runner index mod device count) or cuda:N")
    ap.add_argument("--dtype", default="auto", choices=["auto", "bf16", "fp32"],
                    help="auto: bf16 on CUDA, fp32 on CPU")
    ap.add_argument("--cuda-graphs", default="on", choices=["on", "off"], help="capture a CUDA graph per stage and layout")
    ap.add_argument("--compile", action="store_true", help="torch.compile the adapter and denoise stages (torch ≥ 2.0)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    ap.add_argument("--index", type=int, default=0, help="this runner's index (logs; cuda device choice)")
    ap.add_argument("--backend", default="torch", help="accepted for the protocol; must be torch")
    ap.add_argument("--policy", default="", help="accepted for the protocol; the dtype comes from --dtype")
    args, unknown = ap.parse_known_args(argv)
    args.unknown = unknown
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(argv)
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(JSONFormatter(args.index))
    log = logging.getLogger("gr00t_torchrunner")
    log.addHandler(h)
    log.setLevel(logging.INFO)
    if args.fd < 0:
        print("gr00t_torchrunner: need --fd (or GR00TGW_RUNNER_FD)", file=sys.stderr)
        return 2
    if args.backend != "torch":
        print(f"gr00t_torchrunner: --backend {args.backend}: this runner is the torch backend", file=sys.stderr)
        return 2
    if args.unknown:
        log.info("ignoring unknown flags %s", " ".join(args.unknown))

    import torch  # noqa: F401 — after the flag checks: importing torch takes seconds

    from . import engine, wire
    from .server import Server

    try:
        conn = wire.Conn.from_fd(args.fd)
    except (OSError, wire.ProtocolError) as e:
        print(f"gr00t_torchrunner: --fd {args.fd}: {e}", file=sys.stderr)
        return 2
    opts = engine.Options(weights_dir=args.weights_dir, device=args.device, dtype=args.dtype,
                          cuda_graphs=args.cuda_graphs == "on", compile=args.compile, threads=args.threads,
                          index=args.index)
    t0 = time.perf_counter()
    try:
        eng = engine.Engine(opts)
    except engine.SetupError as e:
        print(f"gr00t_torchrunner: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as e:
        print(f"gr00t_torchrunner: loading {args.weights_dir}: {type(e).__name__}: {e}", file=sys.stderr)
        return 3
    log.info("runner ready on %s (%s) in %.1f s: load %.1f s, warm-up %.1f s", eng.device,
             eng.facts()["policy"], time.perf_counter() - t0, eng.load_s, eng.warmup_s)
    code = Server(conn, eng.predict, engine.hello(eng, os.getpid()), eng.device, eng.changed_facts, eng.fatal).serve()
    log.info("runner %s", "closed" if code == 0 else "exiting: client went away")
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown (CUDA, compile workers) inside the gateway's CLOSE deadline


if __name__ == "__main__":
    sys.exit(main())
