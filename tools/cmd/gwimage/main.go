// Command gwimage builds gr00tgw's OCI image without a daemon or a
// registry (package tools/imagebuild; make image):
//
//	cd tools && go run ./cmd/gwimage [--out DIR] [--tag latest] [--arch amd64]
//
// It works on the checkout holding the server module's go.mod, from any
// directory inside it; OUT defaults to the checkout's build/image.
// It builds a static binary (CGO_ENABLED=0) into OUT/rootfs-bin/gr00tgw,
// takes testdata/n17-tiny, testdata/tokenizer and build/plugins (run make
// plugins first) and writes
//
//	OUT/oci/           an OCI image layout:   podman run oci:OUT/oci:gr00tgw:TAG
//	OUT/gr00tgw.tar    a docker-archive:      podman load -i OUT/gr00tgw.tar (or docker load)
//
// With --rootfs DIR it writes the image's file system as a directory
// instead (the Dockerfile copies it into a scratch image). Every file gets
// the time SOURCE_DATE_EPOCH (else the Unix epoch): the same inputs give
// the same digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/gr00tgw/gr00tgw/tools/imagebuild"
	"github.com/gr00tgw/gr00tgw/tools/internal/repo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gwimage:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "output directory (oci/ layout and gr00tgw.tar; default build/image of the checkout)")
	tag := flag.String("tag", "latest", "image tag (the reference is gr00tgw:TAG)")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH of the binary and the image")
	rootfs := flag.String("rootfs", "", "write the image's file system to this directory instead of an image")
	binary := flag.String("binary", "", "ship this static binary instead of building one")
	ca := flag.String("ca-bundle", imagebuild.CABundle, "host CA bundle to ship at "+imagebuild.CABundle+" (empty or missing: none)")
	revision := flag.String("revision", "", "source commit for the org.opencontainers.image.revision label")
	version := flag.String("version", "", "release version linked into the binary (main.version; gr00tgw version, /info)")
	flag.Parse()
	if flag.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	ctx := context.Background()
	checkout, err := repo.Root()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(checkout, "build", "image")
	}
	created := time.Unix(0, 0)
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", v)
		}
		created = time.Unix(n, 0)
	}
	if *ca != "" {
		if _, err := os.Stat(*ca); err != nil {
			fmt.Fprintf(os.Stderr, "gwimage: no CA bundle at %s: the image ships none (TLS to an OTLP collector needs one; Debian: apt-get install ca-certificates)\n", *ca)
			*ca = ""
		}
	}
	bin := *binary
	if bin == "" {
		work := *out
		if *rootfs != "" {
			work = filepath.Join(os.TempDir(), "gwimage-bin")
		}
		bin = filepath.Join(work, "rootfs-bin", "gr00tgw")
		goCmd, err := exec.LookPath("go")
		if err != nil {
			//lint:ignore SA1019 only a fallback when no go is on PATH (the build machine is this one)
			goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		t0 := time.Now()
		if err := imagebuild.BuildBinary(ctx, goCmd, checkout, bin, *arch, *version); err != nil {
			return err
		}
		fmt.Printf("built %s (CGO_ENABLED=0 GOARCH=%s) in %v\n", bin, *arch, time.Since(t0).Round(100*time.Millisecond))
	}
	spec, err := imagebuild.New(imagebuild.Options{
		Checkout: checkout, Binary: bin, CABundle: *ca, Arch: *arch,
		Created: created, Tag: *tag, Revision: *revision,
	})
	if err != nil {
		return err
	}
	if *rootfs != "" {
		if err := spec.WriteRootfs(*rootfs); err != nil {
			return err
		}
		fmt.Printf("wrote the image's file system to %s\n", *rootfs)
		return nil
	}

	t0 := time.Now()
	img, err := spec.Image()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	var total int64
	for i, l := range layers {
		size, err := l.Size()
		if err != nil {
			return err
		}
		total += size
		fmt.Printf("layer %d  %8.1f MiB  %s\n", i+1, float64(size)/(1<<20), spec.Layers[i].Name)
	}
	layoutDir := filepath.Join(*out, "oci")
	archive := filepath.Join(*out, "gr00tgw.tar")
	if err := spec.WriteLayout(layoutDir, img); err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	if err := spec.WriteArchive(archive, img); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	st, err := os.Stat(archive)
	if err != nil {
		return err
	}
	fmt.Printf("image %s  %s  linux/%s  %.1f MiB compressed (%d layers), built in %v\n",
		spec.RefName(), digest, *arch, float64(total)/(1<<20), len(layers), time.Since(t0).Round(100*time.Millisecond))
	fmt.Printf("  OCI layout      %s   (podman run --rm -p 8080:8080 oci:%s:%s)\n", layoutDir, layoutDir, spec.RefName())
	fmt.Printf("  docker-archive  %s   %.1f MiB (podman load -i %s; docker load -i %s)\n", archive, float64(st.Size())/(1<<20), archive, archive)
	return nil
}
