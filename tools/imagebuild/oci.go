package imagebuild

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/google/go-containerregistry/pkg/name"
)

// Image builds the OCI image: OCI media types throughout (podman's oci:
// transport needs them; docker load takes them too), one gzip layer per
// Layer, the runtime configuration of RuntimeConfig and OCI labels.
func (s *Spec) Image() (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range s.Layers {
		gz, err := s.tarLayer(l)
		if err != nil {
			return nil, err
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(gz)), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("imagebuild: layer %q: %w", l.Name, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "gwimage: " + l.Name, Comment: "tools/imagebuild"},
		})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	rc := RuntimeConfig()
	cf.OS, cf.Architecture = "linux", s.Arch
	cf.Created = v1.Time{Time: s.Created}
	ports := map[string]struct{}{}
	for _, p := range rc.ExposedPorts {
		ports[p] = struct{}{}
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "gr00tgw",
		"org.opencontainers.image.description": "Go serving gateway for NVIDIA GR00T N1.7 (embedded default: the tiny random checkpoint)",
		"org.opencontainers.image.source":      "https://github.com/gr00tgw/gr00tgw",
		"org.opencontainers.image.version":     s.Tag,
	}
	if s.Revision != "" {
		labels["org.opencontainers.image.revision"] = s.Revision
	}
	cf.Config = v1.Config{
		User:         rc.User,
		Env:          rc.Env,
		WorkingDir:   rc.WorkingDir,
		Entrypoint:   rc.Entrypoint,
		Cmd:          rc.Cmd,
		ExposedPorts: ports,
		StopSignal:   rc.StopSignal,
		Labels:       labels,
	}
	return mutate.ConfigFile(img, cf)
}

// RefName is the image reference written into the layout and the archive:
// "gr00tgw:<tag>".
func (s *Spec) RefName() string { return "gr00tgw:" + s.Tag }

// WriteLayout writes img as an OCI image layout in dir (replaced), its
// index entry annotated with the reference name, so that
// `podman run oci:DIR:gr00tgw:TAG` and skopeo find it.
func (s *Spec) WriteLayout(dir string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": s.RefName(),
	}))
}

// WriteArchive writes img as a docker-archive tarball (manifest.json +
// blobs), tagged RefName: `podman load -i FILE` and `docker load -i FILE`
// both take it.
func (s *Spec) WriteArchive(file string, img v1.Image) error {
	tag, err := name.NewTag(s.RefName())
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}

// BuildBinary builds ./cmd/gr00tgw of checkout as a static linux binary
// for arch (CGO_ENABLED=0: the image has no C library), stripped of its
// symbol table, with the go command goCmd. A version other than "" is
// linked in as main.version (what `gr00tgw version` and /info report).
func BuildBinary(ctx context.Context, goCmd, checkout, out, arch, version string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	ldflags := "-s -w"
	if version != "" {
		ldflags += " -X main.version=" + version
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/gr00tgw")
	cmd.Dir = checkout
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("imagebuild: go build (CGO_ENABLED=0 GOARCH=%s): %w\n%s", arch, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
