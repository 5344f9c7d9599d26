#!/usr/bin/env bash
# scripts/gpu-check.sh — the GPU check of gr00tgw's PyTorch runner.
#
# For a CUDA host with Python + torch (+ numpy) but no Go and no network
# (../shared/spec/gpu.md: H100, torch 2.11+cu130). It needs only a static
# gr00tgw (CGO_ENABLED=0; the Python runner is embedded in it), the
# embodiment plugins (build/plugins, `make plugins`) and this checkout's
# scripts/, device/torchrunner/ and testdata/n17-tiny/. Steps, each timed:
#
#   1. host: the card (nvidia-smi), python, torch, the binary
#   2. checkpoint: a real-size random N1.7-3B checkpoint (6.3 GB, the real
#      tensor names and shapes) generated on the host in Python
#      (device/torchrunner/tools/random_checkpoint.py) into --ckpt-dir
#      (build/gpu-check-n17-real; reused by the next run); --quick on the
#      CPU serves testdata/n17-tiny instead; --weights-dir skips this
#   3. selfcheck: action_pred of bf16 against fp32 on the same encoded inputs
#      (testdata/n17-tiny/caseA) on the same device, as PCC
#      (python3 -m gr00t_torchrunner.selfcheck), and both against a golden:
#      the tiny checkpoint's own, else the Go CPU backend's fp32 on the
#      host's cores (gr00tgw run; --go-ref on, the default without --quick)
#   4. serve: gr00tgw serve --backend torch --torch-device DEV until ready
#   5. smoke: gr00tgw smoke (the demo vs its golden, or determinism only)
#   6. bench: gr00tgw bench --n 200 (--quick: 20): per-stage and total
#      p50/p90/p99; peak GPU memory (nvidia-smi, polled) and the card
#   7. recovery: kill -9 the runner once; /health goes starting -> ok, the
#      next predict answers the same actions, smoke passes again
#   8. summary: one block with every figure (also OUT/summary.txt)
#
# Any failure exits non-zero; the server is stopped on exit. Budget: 8 min
# on one H100 (--quick: 3 min); the total is printed against it and a run
# over it fails.
#
# Usage:
#   scripts/gpu-check.sh [--quick] [--torch-device cuda|cuda:N|cpu] [--bin bin/gr00tgw]
#                        [--weights-dir DIR] [--out DIR] [--ckpt-dir DIR] [--python PY] [--n N]
#                        [--embodiments TAGS|all] [--pcc-min X] [--budget S]
#                        [--runner-pkg DIR] [--go-ref on|off] [--backend torch|cpu]
#                        [--plugins-dir DIR] [-- EXTRA SERVE FLAGS...]
#
# --backend cpu serves with the Go CPU backend instead (no --torch-* flags):
# a check of this script itself where the PyTorch runner is not available.
#
# Here (Go present): `make gpu-check` (builds bin/gr00tgw statically and the
# plugins, then runs this with GPU_CHECK_FLAGS). On a device machine without
# Go, build here and carry the binary and the plugins, one call:
#
#   make plugins && CGO_ENABLED=0 go build -o bin/gr00tgw ./cmd/gr00tgw
#   run(command='scripts/gpu-check.sh --out "$OUT/gpu-check"', carry=["bin/gr00tgw", "build/plugins"], timeout_s=540)
#   run(command='scripts/gpu-check.sh --quick --out "$OUT/gpu-check"', carry=[...same...], timeout_s=240)
#
# (bin/gr00tgw ~40 MB + build/plugins ~7 MB: within a 64 MiB carry; --out
# under the device's $OUT brings the logs, JSON reports and summary back;
# the checkpoint stays in --ckpt-dir. Results: OUT/summary.txt, bench.json,
# smoke*.json, info*.json, selfcheck.txt, serve.log, nvidia-smi.csv.)
# make test runs `--quick --torch-device cpu` on the tiny checkpoint
# (cmd/gr00tgw TestGPUCheckQuickCPU), so this script cannot rot.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T0=$(date +%s.%N)

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

QUICK=0
DEVICE=cuda
BIN=$ROOT/bin/gr00tgw
WEIGHTS=
OUT=$ROOT/build/gpu-check
CKPT=$ROOT/build/gpu-check-n17-real
PY=${GR00TGW_TORCH_PYTHON:-}
N=
EMBODIMENTS=oxe_droid_relative_eef_relative_joint
PCC_MIN=0.99
BUDGET=
RUNNER_PKG=
PLUGINS=$ROOT/build/plugins
BACKEND=torch
GO_REF=
EXTRA=()
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--torch-device) DEVICE=$2; shift ;;
	--torch-device=*) DEVICE=${1#*=} ;;
	--bin) BIN=$2; shift ;;
	--bin=*) BIN=${1#*=} ;;
	--weights-dir) WEIGHTS=$2; shift ;;
	--weights-dir=*) WEIGHTS=${1#*=} ;;
	--out) OUT=$2; shift ;;
	--out=*) OUT=${1#*=} ;;
	--ckpt-dir) CKPT=$2; shift ;;
	--ckpt-dir=*) CKPT=${1#*=} ;;
	--python) PY=$2; shift ;;
	--python=*) PY=${1#*=} ;;
	--n) N=$2; shift ;;
	--n=*) N=${1#*=} ;;
	--embodiments) EMBODIMENTS=$2; shift ;;
	--embodiments=*) EMBODIMENTS=${1#*=} ;;
	--pcc-min) PCC_MIN=$2; shift ;;
	--pcc-min=*) PCC_MIN=${1#*=} ;;
	--budget) BUDGET=$2; shift ;;
	--budget=*) BUDGET=${1#*=} ;;
	--runner-pkg) RUNNER_PKG=$2; shift ;;
	--runner-pkg=*) RUNNER_PKG=${1#*=} ;;
	--go-ref) GO_REF=$2; shift ;;
	--go-ref=*) GO_REF=${1#*=} ;;
	--backend) BACKEND=$2; shift ;;
	--backend=*) BACKEND=${1#*=} ;;
	--plugins-dir) PLUGINS=$2; shift ;;
	--plugins-dir=*) PLUGINS=${1#*=} ;;
	-h | --help) usage; exit 0 ;;
	--) shift; EXTRA=("$@"); break ;;
	*) echo "gpu-check: unknown argument $1 (--help)" >&2; exit 2 ;;
	esac
	shift
done
case $DEVICE in
cpu | cuda | cuda:[0-9]*) ;;
*) echo "gpu-check: --torch-device $DEVICE: want cpu, cuda or cuda:N" >&2; exit 2 ;;
esac
case $BACKEND in
torch | cpu) ;;
*) echo "gpu-check: --backend $BACKEND: want torch or cpu" >&2; exit 2 ;;
esac
case $GO_REF in
'') GO_REF=on; [ "$QUICK" = 1 ] && GO_REF=off ;;
on | off) ;;
*) echo "gpu-check: --go-ref $GO_REF: want on or off" >&2; exit 2 ;;
esac
if [ -z "$N" ]; then N=200; [ "$QUICK" = 1 ] && N=20; fi
if [ -z "$BUDGET" ]; then BUDGET=480; [ "$QUICK" = 1 ] && BUDGET=180; fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/serve.log
SUMMARY=$OUT/summary.txt

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
fail() { echo "gpu-check: FAIL: $*" >&2; exit 1; }
STEP=0
STEP_T0=
step() { # step TITLE: closes the previous step's timing and opens the next
	step_end
	STEP=$((STEP + 1))
	STEP_T0=$(now)
	echo
	echo "== [$STEP] $* ($(secs "$T0" "$STEP_T0") s)"
}
step_end() {
	if [ -n "$STEP_T0" ]; then echo "-- [$STEP] done in $(secs "$STEP_T0" "$(now)") s"; fi
	STEP_T0=
}

# --- the python that has torch (also the HTTP/JSON helper: stdlib only) ---
if [ -z "$PY" ]; then
	for c in python3 /usr/bin/python3 python; do
		if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import torch' >/dev/null 2>&1; then PY=$(command -v "$c"); break; fi
	done
fi
[ -n "$PY" ] || fail "no python3 with torch on PATH or at /usr/bin/python3 (--python PY)"
"$PY" -c 'import torch' 2>/dev/null || fail "--python $PY: cannot import torch"
[ -x "$BIN" ] || fail "--bin $BIN: not an executable (build it: CGO_ENABLED=0 go build -o bin/gr00tgw ./cmd/gr00tgw)"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
[ -d "$PLUGINS" ] || fail "--plugins-dir $PLUGINS: absent (make plugins)"
TINY=$ROOT/testdata/n17-tiny
[ -f "$TINY/caseA/pixel_values.npy" ] || fail "$TINY/caseA: absent (the checkout's testdata is needed)"

HELPER=$OUT/gpucheck_helper.py
cat >"$HELPER" <<'PYEOF'
"""gpu-check.sh's HTTP/JSON helper (standard library only)."""
import json, math, os, socket, sys, time, urllib.error, urllib.request


def get(url, timeout=10.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def post(url, body, timeout=120.0):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def flat(actions):
    out = []
    def walk(v):
        if isinstance(v, list):
            for x in v:
                walk(x)
        else:
            out.append(float(v))
    for k in sorted(actions):
        walk(actions[k])
    return out


def pcc(a, b):
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    if saa == 0 or sbb == 0:
        return 1.0 if a == b else 0.0
    return sab / math.sqrt(saa * sbb)


def cmd_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()


def cmd_wait_ready(base, timeout, pid):
    t0 = time.monotonic()
    last = ""
    while time.monotonic() - t0 < float(timeout):
        if not alive(int(pid)):
            print(f"server (pid {pid}) exited before it was ready", file=sys.stderr)
            return 1
        try:
            code, body = get(base + "/v2/health/ready", 5)
            if code == 200:
                print(f"{time.monotonic() - t0:.1f}")
                return 0
            st = json.loads(body or b"{}")
            msg = st.get("state") or st.get("status") or st.get("error") or ""
            if msg != last:
                print(f"  +{time.monotonic() - t0:5.1f} s ready: {code} {msg}", file=sys.stderr)
                last = msg
        except (OSError, ValueError):
            pass
        time.sleep(0.25)
    print(f"not ready after {timeout} s", file=sys.stderr)
    return 1


def cmd_get(base, path, out):
    code, body = get(base + path)
    with open(out, "wb") as f:
        f.write(body)
    return 0 if code == 200 else 1


def cmd_info(path):
    """Prints the facts of /info the check reports, as key=value lines."""
    i = json.load(open(path))
    f = i.get("device_facts") or {}
    r = i.get("runner") or {}
    hw = i.get("hardware") or {}
    vals = {
        "device_name": f.get("device_name", "?"), "device": f.get("device", hw.get("device", "?")),
        "backend": hw.get("backend", "?"), "dtype": f.get("dtype", (i.get("policy") or {}).get("dtype_policy", "?")),
        "torch": f.get("torch", "?"), "cuda": f.get("cuda", "-"), "capability": f.get("capability", "-"),
        "cuda_graphs": json.dumps(f.get("cuda_graphs", "-")), "compile": f.get("compile", "-"),
        "memory_total_mib": f.get("memory_total_mib", "-"), "memory_allocated_mib": f.get("memory_allocated_mib", "-"),
        "load_ms": f.get("load_ms", "-"), "warmup_ms": f.get("warmup_ms", "-"), "runner": f.get("runner", f.get("runner_impl", "?")),
        "parameters": f.get("parameters", "-"), "runner_pid": r.get("pid", ""), "restarts": r.get("restarts", ""),
        "isolation": r.get("isolation", ""), "last_cause": r.get("last_cause", ""),
    }
    for k, v in vals.items():
        print(f"{k}={v}")
    return 0


def cmd_predict(base, out):
    code, body = get(base + "/demo")
    if code != 200:
        print(f"GET /demo: {code} {body[:300]!r}", file=sys.stderr)
        return 1
    req = json.dumps(json.loads(body)["request"]).encode()
    t0 = time.monotonic()
    code, body = post(base + "/predict", req)
    ms = (time.monotonic() - t0) * 1e3
    if code != 200:
        print(f"POST /predict: {code} {body[:300]!r}", file=sys.stderr)
        return 1
    r = json.loads(body)
    json.dump({"actions": r["actions"], "wall_ms": ms, "timing_ms": r.get("timing_ms")}, open(out, "w"))
    print(f"{ms:.1f}")
    return 0


def cmd_compare(a, b, min_pcc):
    x, y = flat(json.load(open(a))["actions"]), flat(json.load(open(b))["actions"])
    if len(x) != len(y) or not x:
        print(f"actions: {len(x)} vs {len(y)} values")
        return 1
    md = max(abs(p - q) for p, q in zip(x, y))
    c = pcc(x, y)
    same = "bit-identical" if x == y else f"max|d|={md:.3g}"
    print(f"{same} PCC={c:.9f}")
    return 0 if all(map(math.isfinite, y)) and c >= float(min_pcc) else 1


def cmd_watch(base, timeout, pid):
    """After the runner's kill: /health until it left ok and came back."""
    t0 = time.monotonic()
    seen, last, left = ["ok (before)"], "ok", False
    while time.monotonic() - t0 < float(timeout):
        try:
            code, body = get(base + "/health", 2)
            st = json.loads(body).get("status", f"http {code}")
        except (OSError, ValueError) as e:
            st = f"error ({type(e).__name__})"
        dt = time.monotonic() - t0
        if st != last:
            seen.append(f"{st} (+{dt:.2f} s)")
            print(f"  +{dt:6.2f} s health: {st}", file=sys.stderr)
            last = st
        if st != "ok":
            left = True
        elif left:
            print(f"{dt:.2f} " + " -> ".join(seen))
            return 0
        if st == "failed":
            break
        if not alive(int(pid)):
            print("server exited", file=sys.stderr)
            return 1
        time.sleep(0.05)
    print(f"no recovery within {timeout} s: " + " -> ".join(seen), file=sys.stderr)
    return 1


def cmd_bench(path):
    """Prints the bench's per-stage and total p50/p90/p99 table."""
    r = json.load(open(path))
    s = r["summary"]
    keys = ["wall", "total", "queue", "encode", "device"] + sorted(k for k in s if k.startswith("device_stages."))
    print(f"  {'field (ms)':<24} {'p50':>9} {'p90':>9} {'p99':>9}")
    for k in keys:
        if k in s:
            v = s[k]
            print(f"  {k:<24} {v['p50']:9.2f} {v['p90']:9.2f} {v['p99']:9.2f}")
    print(f"  {r['n']} requests, {r['errors']} errors, {r['throughput_rps']:.1f} req/s")
    return 0


def cmd_nvsmi(path, baseline):
    """Peak memory.used of an nvidia-smi -lms CSV (index, name, used, total)."""
    peak, name, total = -1, "", ""
    for line in open(path):
        p = [x.strip() for x in line.split(",")]
        if len(p) >= 4 and p[2].isdigit():
            if int(p[2]) > peak:
                peak, name, total = int(p[2]), p[1], p[3]
    if peak < 0:
        print("n/a (no nvidia-smi samples)")
        return 0
    base = f", {peak - int(baseline)} MiB over the idle card" if baseline.isdigit() else ""
    print(f"{peak} MiB of {total} MiB (nvidia-smi memory.used, whole card, polled every 0.5 s{base})")
    return 0


def main():
    cmd, args = sys.argv[1].replace("-", "_"), sys.argv[2:]
    return globals()["cmd_" + cmd](*args) or 0


if __name__ == "__main__":
    sys.exit(main())
PYEOF
helper() { "$PY" -B "$HELPER" "$@"; }

SERVER_PID=
SMI_PID=
cleanup() {
	local rc=$?
	set +e
	if [ -n "$SMI_PID" ]; then kill "$SMI_PID" 2>/dev/null; wait "$SMI_PID" 2>/dev/null; fi
	if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
		echo "gpu-check: stopping the server (pid $SERVER_PID)"
		kill -TERM "$SERVER_PID" 2>/dev/null
		for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null
	fi
	if [ $rc -ne 0 ]; then
		echo "gpu-check: FAILED (exit $rc) after $(secs "$T0" "$(now)") s; logs in $OUT" >&2
		if [ -f "$LOG" ]; then echo "--- last lines of $LOG" >&2; tail -n 40 "$LOG" >&2; fi
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

MODE="full"; [ "$QUICK" = 1 ] && MODE="quick"
echo "gpu-check ($MODE): --torch-device $DEVICE, bench --n $N, budget $BUDGET s, out $OUT"

# ---------------------------------------------------------------- 1. host
step "host"
GPU_INDEX=
CARD="n/a (cpu)"
SMI=$(command -v nvidia-smi || true)
if [ "$DEVICE" != cpu ]; then
	GPU_INDEX=0
	case $DEVICE in cuda:*) GPU_INDEX=${DEVICE#cuda:} ;; esac
	if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then # torch's cuda:N is the Nth visible card
		IFS=, read -r -a VIS <<<"$CUDA_VISIBLE_DEVICES"
		[ "${#VIS[@]}" -gt "$GPU_INDEX" ] && GPU_INDEX=${VIS[$GPU_INDEX]}
	fi
	if [ -n "$SMI" ]; then
		"$SMI" --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv -i "$GPU_INDEX" || fail "nvidia-smi -i $GPU_INDEX"
		CARD=$("$SMI" --query-gpu=name --format=csv,noheader -i "$GPU_INDEX" | head -n1)
	else
		echo "no nvidia-smi on PATH: the card's name comes from the runner, peak memory from torch only"
	fi
fi
echo "python: $PY ($("$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'))"
if [ "$DEVICE" != cpu ]; then
	"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || fail "--torch-device $DEVICE: torch.cuda.is_available() is False"
fi
echo "binary: $BIN ($("$BIN" version | head -n1)); plugins: $PLUGINS ($(cd "$PLUGINS" && echo *))"
echo "cpus: $(nproc), memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), disk free at $OUT: $(df -h "$OUT" | awk 'NR==2 {print $4}')"

# ---------------------------------------------------------- 2. checkpoint
step "checkpoint"
GEN_NOTE=
if [ -n "$WEIGHTS" ]; then
	[ -d "$WEIGHTS" ] || fail "--weights-dir $WEIGHTS: not a directory"
	WEIGHTS=$(cd "$WEIGHTS" && pwd)
	GEN_NOTE="given (--weights-dir)"
elif [ "$QUICK" = 1 ] && [ "$DEVICE" = cpu ]; then
	WEIGHTS=$TINY
	GEN_NOTE="the tiny checkpoint (--quick on the CPU)"
else
	WEIGHTS=$CKPT
	if [ -f "$WEIGHTS/model.safetensors.index.json" ]; then
		GEN_NOTE="reused (generated by an earlier run; the index is written last)"
	else
		rm -rf "$WEIGHTS"
		t=$(now)
		"$PY" -B "$ROOT/device/torchrunner/tools/random_checkpoint.py" --out "$WEIGHTS" --tiny-dir "$TINY" --device "$DEVICE" \
			|| fail "random_checkpoint.py"
		GEN_NOTE="generated in $(secs "$t" "$(now)") s"
	fi
fi
CKPT_BYTES=$(du -sb "$WEIGHTS" | awk '{print $1}')
echo "checkpoint: $WEIGHTS ($(awk -v b="$CKPT_BYTES" 'BEGIN {printf "%.2f GB", b / 1e9}'), $GEN_NOTE)"

# ------------------------------------------------------------ 3. selfcheck
step "selfcheck: action_pred bf16 vs fp32 on the same inputs ($DEVICE)"
if [ -z "$RUNNER_PKG" ]; then
	RUNNER_PKG=$ROOT/device/torchrunner
	if [ ! -f "$RUNNER_PKG/gr00t_torchrunner/__init__.py" ]; then # else the newest the binary extracted
		# shellcheck disable=SC2012 # newest first; the names are torchrunner-<hex>
		RUNNER_PKG=$(ls -dt "${XDG_CACHE_HOME:-$HOME/.cache}"/gr00tgw/torchrunner-* 2>/dev/null | head -n1 || true)
	fi
fi
if [ -z "$RUNNER_PKG" ] || ! PYTHONPATH=$RUNNER_PKG "$PY" -c 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec("gr00t_torchrunner.selfcheck") else 3)' 2>/dev/null; then
	fail "no gr00t_torchrunner.selfcheck in ${RUNNER_PKG:-the checkout (device/torchrunner) or the runner cache} (--runner-pkg DIR)"
fi
# caseA's encoded inputs fit the tiny and the real-size checkpoint; its
# action_pred.npy (torch fp32 of the tiny checkpoint) is a golden only for
# the tiny one. For another checkpoint the golden is the Go CPU backend's
# fp32 on the same inputs (gr00tgw run on the host's cores; --go-ref).
INPUTS=$OUT/inputs
rm -rf "$INPUTS" && mkdir -p "$INPUTS"
for f in pixel_values image_grid_thw input_ids attention_mask position_ids state_normalized noise; do
	cp "$TINY/caseA/$f.npy" "$INPUTS/"
done
GOLDEN=
if [ "$WEIGHTS" = "$TINY" ]; then
	cp "$TINY/caseA/action_pred.npy" "$INPUTS/"
	GOLDEN="the reference's torch fp32 (caseA golden)"
elif [ "$GO_REF" = on ]; then
	t=$(now)
	"$BIN" run --weights-dir "$WEIGHTS" --inputs "$INPUTS" --out "$OUT/go-ref" --plugins-dir - >"$OUT/go-ref.log" 2>&1 \
		|| { tail -n 20 "$OUT/go-ref.log" >&2; fail "gr00tgw run (the Go CPU reference; --go-ref off skips it)"; }
	cp "$OUT/go-ref/action_pred.npy" "$INPUTS/"
	GOLDEN="the Go CPU backend's fp32 (gr00tgw run, $(nproc) cores, $(secs "$t" "$(now)") s)"
	echo "Go CPU reference: $(tail -n 1 "$OUT/go-ref.log")"
fi
SELFCHECK=$OUT/selfcheck.txt
PYTHONPATH=$RUNNER_PKG timeout 300 "$PY" -B -m gr00t_torchrunner.selfcheck --weights-dir "$WEIGHTS" --inputs "$INPUTS" \
	--device "$DEVICE" --dtypes fp32,bf16 --min-pcc "$PCC_MIN" 2>&1 | tee "$SELFCHECK" \
	|| fail "gr00t_torchrunner.selfcheck (a PCC below --pcc-min $PCC_MIN, or an error; output: $SELFCHECK)"
field() { # field FILE LINE-PREFIX KEY: KEY=value's value on the first line starting with LINE-PREFIX
	awk -v pre="$2" -v key="$3" 'index($0, pre) == 1 { for (i = 1; i <= NF; i++) if (index($i, key "=") == 1) { print substr($i, length(key) + 2); exit } }' "$1"
}
PCC=$(field "$SELFCHECK" "selfcheck dtype=bf16 " pcc_vs_fp32)
[ -n "$PCC" ] || fail "selfcheck printed no 'selfcheck dtype=bf16 … pcc_vs_fp32=…' line"
awk -v p="$PCC" -v m="$PCC_MIN" 'BEGIN { exit !(p + 0 >= m + 0) }' || fail "action_pred PCC bf16 vs fp32 $PCC below --pcc-min $PCC_MIN"
PCC_LINE="$PCC (gate $PCC_MIN), max|d| $(field "$SELFCHECK" "selfcheck dtype=bf16 " max_abs); predict bf16 $(field "$SELFCHECK" "selfcheck dtype=bf16 " ms) ms, fp32 $(field "$SELFCHECK" "selfcheck dtype=fp32 " ms) ms"
SC_PEAK=$(field "$SELFCHECK" "selfcheck dtype=bf16 " peak_mib)
GOLDEN_LINE="n/a (no golden for this checkpoint; --go-ref on computes one)"
if [ -n "$GOLDEN" ]; then
	g32=$(field "$SELFCHECK" "selfcheck golden " fp32_pcc)
	g16=$(field "$SELFCHECK" "selfcheck golden " bf16_pcc)
	{ [ -n "$g32" ] && [ -n "$g16" ]; } || fail "selfcheck printed no 'selfcheck golden fp32_pcc=… bf16_pcc=…' line"
	awk -v p="$g32" -v m="$PCC_MIN" 'BEGIN { exit !(p + 0 >= m + 0) }' || fail "torch fp32 vs $GOLDEN: PCC $g32 below --pcc-min $PCC_MIN"
	GOLDEN_LINE="fp32 $g32, bf16 $g16 vs $GOLDEN"
fi

# ---------------------------------------------------------------- 4. serve
step "serve --backend $BACKEND --torch-device $DEVICE"
PORT=$(helper port)
BASE=http://127.0.0.1:$PORT
SMI_BASE=
if [ -n "$SMI" ] && [ -n "$GPU_INDEX" ]; then
	SMI_BASE=$("$SMI" --query-gpu=memory.used --format=csv,noheader,nounits -i "$GPU_INDEX" | head -n1 | tr -d ' ')
	"$SMI" --query-gpu=index,name,memory.used,memory.total --format=csv,noheader,nounits -i "$GPU_INDEX" -lms 500 >"$OUT/nvidia-smi.csv" 2>/dev/null &
	SMI_PID=$!
fi
SERVE=("$BIN" serve --backend "$BACKEND" --weights-dir "$WEIGHTS" --plugins-dir "$PLUGINS" --addr "127.0.0.1:$PORT"
	--log-format text --golden-dir -)
[ "$BACKEND" = torch ] && SERVE+=(--torch-device "$DEVICE" --torch-python "$PY")
[ "$EMBODIMENTS" != all ] && SERVE+=(--embodiments "$EMBODIMENTS")
SERVE+=("${EXTRA[@]}")
echo "${SERVE[*]}"
"${SERVE[@]}" >"$LOG" 2>&1 &
SERVER_PID=$!
READY_S=$(helper wait-ready "$BASE" "$((BUDGET - 20))" "$SERVER_PID") || fail "the server did not become ready (log: $LOG)"
helper get "$BASE" /info "$OUT/info.json" || fail "GET /info"
declare -A INFO
while IFS='=' read -r k v; do INFO[$k]=$v; done < <(helper info "$OUT/info.json")
echo "ready in $READY_S s: ${INFO[runner]} on ${INFO[device]} (${INFO[device_name]}), dtype ${INFO[dtype]}, torch ${INFO[torch]}" \
	"cuda ${INFO[cuda]}, cuda graphs ${INFO[cuda_graphs]}, compile ${INFO[compile]}; load ${INFO[load_ms]} ms, warm-up ${INFO[warmup_ms]} ms;" \
	"runner pid ${INFO[runner_pid]} (${INFO[isolation]})"
[ "${INFO[backend]}" = "$BACKEND" ] || fail "/info hardware.backend is ${INFO[backend]}, want $BACKEND"
[ -n "${INFO[runner_pid]}" ] || fail "/info names no runner pid (device.isolation must be process)"
[ "$DEVICE" != cpu ] && [ "$CARD" = "n/a (cpu)" ] && CARD=${INFO[device_name]}

# ---------------------------------------------------------------- 5. smoke
step "smoke"
"$BIN" smoke --url "$BASE" --timeout 120s --out "$OUT/smoke.json" | tee "$OUT/smoke.txt" || fail "gr00tgw smoke"
SMOKE=$(head -n1 "$OUT/smoke.txt" | sed "s/ per_group\[.*//")

# ---------------------------------------------------------------- 6. bench
step "bench --n $N"
"$BIN" bench --url "$BASE" --n "$N" --warmup 3 --timeout 120s --out "$OUT/bench.json" | tee "$OUT/bench.txt" || fail "gr00tgw bench"
if [ -n "$SMI_PID" ]; then kill "$SMI_PID" 2>/dev/null || true; wait "$SMI_PID" 2>/dev/null || true; SMI_PID=; fi
PEAK="n/a (cpu)"
if [ "$DEVICE" != cpu ]; then
	if [ -f "$OUT/nvidia-smi.csv" ]; then PEAK=$(helper nvsmi "$OUT/nvidia-smi.csv" "${SMI_BASE:-}"); else PEAK="n/a (no nvidia-smi)"; fi
	PEAK="$PEAK; the runner after its load: ${INFO[memory_allocated_mib]} MiB allocated of ${INFO[memory_total_mib]} MiB; torch peak of one bf16 predict (selfcheck): $SC_PEAK MiB"
fi
echo "peak GPU memory: $PEAK"

# ------------------------------------------------------------- 7. recovery
step "kill the runner once and recover"
helper predict "$BASE" "$OUT/before.json" >/dev/null || fail "predict before the kill"
PID=${INFO[runner_pid]}
CMDLINE=$(tr '\0' ' ' <"/proc/$PID/cmdline" 2>/dev/null || true)
PPID_OF=$(awk '{print $4}' "/proc/$PID/stat" 2>/dev/null || true)
[ -n "$CMDLINE" ] || fail "runner pid $PID from /info is not running"
[ "$PPID_OF" = "$SERVER_PID" ] || fail "pid $PID ($CMDLINE) is not a child of the server $SERVER_PID (parent $PPID_OF): not killing it"
echo "runner pid $PID: $CMDLINE"
kill -KILL "$PID"
RECOVERY=$(helper watch "$BASE" 300 "$SERVER_PID") || fail "no recovery after the runner's kill"
RESTART_S=${RECOVERY%% *}
echo "health: ${RECOVERY#* }"
P_MS=$(helper predict "$BASE" "$OUT/after.json") || fail "the first predict after the recovery"
MATCH=$(helper compare "$OUT/before.json" "$OUT/after.json" 0.99999) || fail "actions after the recovery differ from before: $MATCH"
helper get "$BASE" /info "$OUT/info-after.json" || fail "GET /info after the recovery"
declare -A INFO2
while IFS='=' read -r k v; do INFO2[$k]=$v; done < <(helper info "$OUT/info-after.json")
[ "${INFO2[runner_pid]}" != "$PID" ] || fail "/info still names the killed runner $PID"
echo "restarted in $RESTART_S s (kill -> health ok); new runner pid ${INFO2[runner_pid]}, restarts ${INFO2[restarts]}, last cause '${INFO2[last_cause]}'"
echo "first predict after: $P_MS ms, actions vs before the kill: $MATCH"
"$BIN" smoke --url "$BASE" --timeout 120s --out "$OUT/smoke-after.json" | tee "$OUT/smoke-after.txt" || fail "gr00tgw smoke after the recovery"
SMOKE2=$(head -n1 "$OUT/smoke-after.txt" | sed "s/ per_group\[.*//")

# --------------------------------------------------------------- 8. summary
step_end
TOTAL=$(secs "$T0" "$(now)")
VERDICT=PASS
awk -v t="$TOTAL" -v b="$BUDGET" 'BEGIN { exit !(t + 0 <= b + 0) }' || VERDICT="FAIL (over the $BUDGET s budget)"
{
	echo
	echo "== gpu-check summary ($MODE, --torch-device $DEVICE): $VERDICT"
	echo "card:             $CARD"
	echo "runner:           ${INFO[runner]}, torch ${INFO[torch]}, cuda ${INFO[cuda]}, dtype ${INFO[dtype]}, device ${INFO[device]} (${INFO[device_name]})"
	echo "                  cuda graphs ${INFO[cuda_graphs]}, compile ${INFO[compile]}"
	echo "checkpoint:       $WEIGHTS ($(awk -v b="$CKPT_BYTES" 'BEGIN {printf "%.2f GB", b / 1e9}'), $GEN_NOTE)"
	echo "serve ready:      $READY_S s (runner load ${INFO[load_ms]} ms, warm-up ${INFO[warmup_ms]} ms)"
	echo "smoke:            $SMOKE"
	echo "bench:            per stage and total, ms (wall: the client's)"
	helper bench "$OUT/bench.json"
	echo "peak GPU memory:  $PEAK"
	echo "action_pred PCC:  bf16 vs fp32 (torch, $DEVICE) on caseA's inputs: $PCC_LINE"
	echo "                  vs a golden: $GOLDEN_LINE"
	echo "recovery:         runner $PID killed (SIGKILL); health ${RECOVERY#* }; restart $RESTART_S s"
	echo "                  next predict $P_MS ms, $MATCH vs before; smoke again: $SMOKE2"
	echo "total:            $TOTAL s (budget $BUDGET s)"
} | tee "$SUMMARY"
[ "$VERDICT" = PASS ] || exit 1
