# gr00tgw — build, run and test with only Go installed.
#   make run    serve the embedded default (CPU backend, tiny checkpoint, DROID plugin) on 127.0.0.1:20000
#   make test   every test; -race on the concurrent packages; the fidelity tests again
#               with AVX-512 off (the AVX2 paths) and with the portable code (purego)
GO        ?= go
BIN       := bin/gr00tgw
PLUGINDIR := build/plugins
# Packages with concurrency: run under the race detector.
RACE_PKGS := ./service/... ./frontend/... ./binding/... ./client/... ./session/... ./safety/... ./record/... ./plugins/... ./core/tensor/... ./core/processor/... ./device/cpu/... ./device/runner/...
# Fidelity tests (goldens, corpora, kernels): run again at every ISA level.
ISA_PKGS  := ./core/... ./device/cpu/... ./embodiments/...
# The build and benchmark tools (gwimage, gwchart, gwschemas, benchmodel)
# are their own module, tools/ (its go.mod replaces the server module with
# ../), so Helm, go-containerregistry and the schema validator stay out of
# the server's go.mod. A target builds its tool into TOOLBIN and runs it
# from the checkout's root: relative paths mean what they always did.
TOOLBIN   := bin/tools
tool       = cd tools && $(GO) build -o $(CURDIR)/$(TOOLBIN)/$(1) ./cmd/$(1)

.PHONY: all build plugins run test torch-deps test-short test-arm64 vet lint bench bench-host bench-model fuzz docker image manifests check-deploy clean

all: build

build: plugins
	@echo "== $(BIN) (a first build compiles the dependencies: about a minute on 2 cores)"
	$(GO) build -o $(BIN) ./cmd/gr00tgw

# Every embodiment under embodiments/<name>/ is built to WASM with the stock
# toolchain (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) and packed with its
# manifest, sha256 filled in, into build/plugins/<name>/{<name>.wasm,plugin.yaml}.
plugins:
	@echo "== plugins: embodiments/* to wasm in $(PLUGINDIR) (a first build compiles the packer and the guests: about a minute)"
	$(GO) run ./plugins/cmd/gwplugin-pack -o $(PLUGINDIR)

run: build
	./$(BIN) serve

# The OCI image, built without a daemon or a registry (tools/imagebuild):
# a static binary (CGO_ENABLED=0), the plugins and the embedded default on
# an empty base, non-root (65532), serving on $$PORT (8080). Writes
# build/image/oci (an OCI layout) and build/image/gr00tgw.tar (a
# docker-archive: podman load -i / docker load -i). File times are the
# commit time, so the same commit gives the same digest.
IMAGE_TAG ?= latest
image: plugins
	$(call tool,gwimage)
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) \
	$(TOOLBIN)/gwimage --out build/image --tag $(IMAGE_TAG) \
		--revision "$$(git rev-parse HEAD 2>/dev/null)" \
		--version "$$(git describe --tags --always --dirty 2>/dev/null)"

# The plain manifests of deploy/k8s: the Helm chart deploy/helm/gr00tgw
# rendered offline with Helm's own engine (helm.sh/helm/v3 as a library)
# for every value set (defaults, deploy/helm/values/*.yaml).
manifests:
	$(call tool,gwchart)
	$(TOOLBIN)/gwchart render

# helm lint --strict, render, validate every object against the strict
# schemas of deploy/schemas, compare with deploy/k8s (make test runs the
# same checks as Go tests in tools/deploycheck).
check-deploy:
	$(call tool,gwchart)
	$(TOOLBIN)/gwchart check

# vet, then vet again cross-compiled for darwin/arm64: the tree must build
# off Linux (device/runner is Linux-only behind build tags; ~30 s more).
vet:
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...
	cd tools && $(GO) vet ./...

# staticcheck, pinned (fetched through the Go module proxy on first use);
# build/ is git-ignored scratch space, not the module's code.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) run $(STATICCHECK) $$($(GO) list ./... | grep -v /build/)
	cd tools && $(GO) run $(STATICCHECK) ./...

# Debian's torch for the PyTorch runner's tests (device/torchrunner,
# serve --backend torch in cmd/gr00tgw): when /usr/bin/python3 cannot
# import torch and numpy, installed with apt-get if this is root, else
# those tests skip (saying so). Never fails the build.
TORCH_DEBS := python3-torch python3-numpy libopenblas0-pthread
torch-deps:
	@if /usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "torch-deps: /usr/bin/python3 has no torch: apt-get install $(TORCH_DEBS) (for the torch-runner tests)"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(TORCH_DEBS) >/dev/null; } \
			|| echo "torch-deps: apt-get failed: the torch-runner tests will skip"; \
	else \
		echo "torch-deps: /usr/bin/python3 has no torch and apt-get cannot run here (apt-get install $(TORCH_DEBS) as root): the torch-runner tests will skip"; \
	fi

test: plugins vet lint torch-deps
	$(GO) test -count=1 -timeout 25m $$($(GO) list ./... | grep -v -e /service -e /frontend -e /binding -e /client -e /session -e /safety -e /record -e /plugins -e /core/tensor -e /core/processor -e /device/cpu -e /device/runner)
	$(GO) test -count=1 -race $(RACE_PKGS)
	@echo "== the tools module (tools/: image builder, chart renderer and checks, benchmark harness)"
	cd tools && $(GO) test -count=1 ./...
	@echo "== the fidelity tests with AVX-512 disabled (AVX2 paths; a no-op on a CPU without AVX-512)"
	GODEBUG=$${GODEBUG:+$$GODEBUG,}cpu.avx512f=off $(GO) test -count=1 $(ISA_PKGS)
	@echo "== the fidelity tests with the portable code (-tags purego)"
	$(GO) test -count=1 -tags purego $(ISA_PKGS)

test-short: plugins
	$(GO) test -count=1 -short ./...
	cd tools && $(GO) test -count=1 -short ./...

# linux/arm64 under qemu-user (opt-in; not part of test). Cross-builds and
# vets the tree for arm64, builds every test binary of ARM64_PKGS with
# GOARCH=arm64 and runs it with -short (iteration counts trimmed, allocation
# checks skipped; every golden, tap and corpus test runs) under
# qemu-aarch64(-static) (Debian: apt-get install qemu-user-static), NEON
# kernels on; then ARM64_PORTABLE again with them off (GODEBUG=cpu.asimd=off,
# the portable code). The plugin guests are built to wasm with the host
# toolchain and run by wazero's arm64 compiler. ~10 min on 2 cores. Without
# qemu it says so and succeeds. Binaries and logs: build/arm64/.
ARM64_PKGS     := ./core/... ./device/... ./embodiments/... ./service/... ./frontend/... ./binding/...
ARM64_PORTABLE := ./core/tensor ./core/model/... ./device/cpu
ARM64_FLAGS    ?= -test.short
QEMU_AARCH64   ?= $(shell command -v qemu-aarch64-static 2>/dev/null || command -v qemu-aarch64 2>/dev/null)

test-arm64:
	@if [ -z "$(QEMU_AARCH64)" ]; then \
		echo "test-arm64: SKIPPED: no qemu-aarch64-static or qemu-aarch64 on PATH (Debian: apt-get install qemu-user-static)"; \
		exit 0; \
	fi; \
	set -e; \
	$(MAKE) --no-print-directory plugins; \
	echo "== GOARCH=arm64 go build ./... && go vet ./..."; \
	GOARCH=arm64 $(GO) build ./... ; GOARCH=arm64 $(GO) vet ./...; \
	bins=$$(pwd)/build/arm64; mkdir -p $$bins; fail=; start=$$(date +%s); \
	for pass in neon portable; do \
		if [ $$pass = neon ]; then pkgs="$(ARM64_PKGS)"; env=; else pkgs="$(ARM64_PORTABLE)"; env=GODEBUG=cpu.asimd=off; fi; \
		echo "== arm64 tests under $(QEMU_AARCH64), $$pass kernels $$env"; \
		for line in $$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}={{.Dir}}{{end}}' $$pkgs); do \
			pkg=$${line%%=*}; dir=$${line#*=}; rel=$${dir#$$(pwd)/}; bin=$$bins/$$(echo $$rel | tr / _).test; \
			if [ $$pass = neon ]; then GOARCH=arm64 $(GO) test -c -o $$bin $$pkg; fi; \
			t0=$$(date +%s); \
			if (cd $$dir && env $$env $(QEMU_AARCH64) $$bin $(ARM64_FLAGS) -test.timeout=15m > $$bin.$$pass.log 2>&1); then \
				echo "ok   $$rel $$(( $$(date +%s) - t0 ))s"; \
			else \
				echo "FAIL $$rel ($$pass; log $$bin.$$pass.log)"; tail -30 $$bin.$$pass.log; fail="$$fail $$rel($$pass)"; \
			fi; \
		done; \
	done; \
	echo "== test-arm64: $$(( $$(date +%s) - start ))s"; \
	if [ -n "$$fail" ]; then echo "test-arm64 FAILED:$$fail"; exit 1; fi

bench:
	$(GO) test -run='^$$' -bench=. -benchtime=20x -benchmem ./...
	cd tools && $(GO) test -run='^$$' -bench=. -benchtime=20x -benchmem ./...

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
	else echo "python3-opencv/torch/PIL not installed: Go figures only (apt-get install python3-opencv python3-torch python3-pil libopenblas0-pthread)"; fi

# GEMM shapes, a real-size ViT block, LLM layer and DiT step, then one whole
# real-size predict stage by stage (vision, llm, adapter, denoise) with load
# time and peak RSS, in Go next to Debian's PyTorch (when present) in the
# same run, as ratios. The real-size random checkpoint (~6.3 GB, real tensor
# names and shapes) is written to BENCH_CHECKPOINT on the first run; peak
# memory is torch's ~15 GB (the Go side ~6 GB, never both at once).
BENCH_CHECKPOINT ?= build/n17-real
bench-model:
	$(call tool,benchmodel)
	$(TOOLBIN)/benchmodel -gemm -stages -checkpoint $(BENCH_CHECKPOINT)

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

# The GPU check of the PyTorch runner (scripts/gpu-check.sh; --help for
# what it runs and prints): a static bin/gr00tgw (CGO_ENABLED=0, the Python
# runner embedded) and the plugins, then the script with GPU_CHECK_FLAGS
# (e.g. --quick, --torch-device cuda:1). On a CUDA host without Go: build
# here with the same two steps, carry bin/gr00tgw and build/plugins, run
# scripts/gpu-check.sh there (8 min on one H100; --quick 3 min).
GPU_CHECK_FLAGS ?=
.PHONY: gpu-check
gpu-check: plugins
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/gr00tgw
	scripts/gpu-check.sh --bin $(BIN) $(GPU_CHECK_FLAGS)
