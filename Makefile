# gr00tgw — build, run and test with only Go installed.
#   make run    serve the embedded default (CPU backend, tiny checkpoint, DROID plugin) on 127.0.0.1:20000
#   make test   every test; -race on the concurrent packages; the fidelity tests again
#               with AVX-512 off (the AVX2 paths) and with the portable code (purego)
GO        ?= go
BIN       := bin/gr00tgw
PLUGINDIR := build/plugins
# Packages with concurrency: run under the race detector.
RACE_PKGS := ./gateway/... ./plugins/... ./core/tensor/... ./core/processor/... ./device/cpu/...
# Fidelity tests (goldens, corpora, kernels): run again at every ISA level.
ISA_PKGS  := ./core/... ./device/... ./embodiments/...

.PHONY: all build plugins run test test-short vet bench bench-host bench-model fuzz docker clean

all: build

build: plugins
	$(GO) build -o $(BIN) ./cmd/gr00tgw

# Every embodiment under embodiments/<name>/ is built to WASM with the stock
# toolchain (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) and packed with its
# manifest, sha256 filled in, into build/plugins/<name>/{<name>.wasm,plugin.yaml}.
plugins:
	$(GO) run ./plugins/cmd/gwplugin-pack -o $(PLUGINDIR)

run: build
	./$(BIN) serve

vet:
	$(GO) vet ./...

test: plugins vet
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e /gateway -e /plugins -e /core/tensor -e /core/processor -e /device/cpu)
	$(GO) test -count=1 -race $(RACE_PKGS)
	@echo "== the fidelity tests with AVX-512 disabled (AVX2 paths; a no-op on a CPU without AVX-512)"
	GODEBUG=$${GODEBUG:+$$GODEBUG,}cpu.avx512f=off $(GO) test -count=1 $(ISA_PKGS)
	@echo "== the fidelity tests with the portable code (-tags purego)"
	$(GO) test -count=1 -tags purego $(ISA_PKGS)

test-short: plugins
	$(GO) test -count=1 -short ./...

bench:
	$(GO) test -run='^$$' -bench=. -benchtime=20x -benchmem ./...

# Host pipeline (decode 4 PNGs + eval chain + patchify + tokenize + mRoPE) in
# Go, next to the Python reference pipeline (Debian cv2/PIL/torch) on the
# same frames in the same run, and their ratio.
bench-host:
	@mkdir -p build
	@$(GO) test -run='^$$' -bench='^BenchmarkEncodeDROID$$' -benchtime=200x -benchmem ./core/processor/ | tee build/bench-host-go.txt
	@if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import cv2, torch, PIL' 2>/dev/null; then \
		/usr/bin/python3 testdata/image/bench_ref.py | tee build/bench-host-py.txt; \
		go_ms=$$(awk '/^BenchmarkEncodeDROID/ {for (i=1;i<=NF;i++) if ($$(i+1)=="ns/op") print $$i/1e6}' build/bench-host-go.txt); \
		py_ms=$$(awk '/^REQUEST_MS/ {print $$2}' build/bench-host-py.txt); \
		awk -v g=$$go_ms -v p=$$py_ms 'BEGIN {printf "host_ratio go_ms=%.3f python_ms=%.3f ratio=%.1fx\n", g, p, p/g}'; \
	else echo "python3-opencv/torch/PIL not installed: Go figures only (apt-get install python3-opencv python3-torch python3-pil)"; fi

# GEMM shapes, a real-size ViT block and a real-size DiT step in Go, next to
# Debian's PyTorch (when present) in the same run, as ratios.
bench-model:
	$(GO) run ./internal/benchmodel/cmd/benchmodel -gemm

# Every fuzz target in the tree for FUZZTIME each (opt-in; not part of test).
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

clean:
	rm -rf bin build
