package imagebuild

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gr00tgw/gr00tgw/assets"
	"github.com/gr00tgw/gr00tgw/tools/internal/repo"
)

// checkout is the server module's root (holding go.mod, testdata/ and,
// after make plugins, build/plugins).
func checkout(t testing.TB) string {
	t.Helper()
	root, err := repo.Root()
	require.NoError(t, err)
	return root
}

// fakePlugins is a plugins_dir with one plugin's files (contents do not
// matter to the builder).
func fakePlugins(t testing.TB) string {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "droid", "demo"), 0o755))
	for _, f := range []string{"droid/droid.wasm", "droid/plugin.yaml", "droid/demo/request.json"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644))
	}
	return dir
}

func fakeBinary(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "gr00tgw")
	require.NoError(t, os.WriteFile(p, []byte("\x7fELF not really"), 0o755))
	return p
}

// The image holds what package assets looks for below GR00TGW_HOME, the
// binary, the users and a writable HOME; everything else is root-owned.
func TestSpecContents(t *testing.T) {
	root := checkout(t)
	s, err := New(Options{Checkout: root, Binary: fakeBinary(t), Plugins: fakePlugins(t), Arch: "amd64", Tag: "t"})
	require.NoError(t, err)
	files, err := s.Files()
	require.NoError(t, err)
	byPath := map[string]string{}
	for _, f := range files {
		p, rest, _ := strings.Cut(f, " ")
		_, dup := byPath[p]
		if dup {
			// A directory may appear in several layers (parents), a file not.
			assert.True(t, strings.HasPrefix(rest, "d"), "file %s in two layers", p)
		}
		byPath[p] = rest
	}
	for _, want := range []string{
		Binary, "/etc/passwd", "/etc/group", "/tmp", Home,
		Root + "/" + assets.CheckpointDir + "/config.json",
		Root + "/" + assets.CheckpointDir + "/model.safetensors",
		Root + "/" + assets.DemoDir + "/request.json",
		Root + "/" + assets.DemoDir + "/actions.json",
		Root + "/" + assets.CheckpointDir + "/demo/libero_sim/request.json",
		Root + "/" + assets.TokenizerDir + "/tokenizer.json",
		Root + "/" + assets.PluginsDir + "/droid/droid.wasm",
		Root + "/" + assets.PluginsDir + "/droid/demo/request.json",
	} {
		assert.Contains(t, byPath, want)
	}
	assert.Equal(t, "-rwxr-xr-x 0:0", byPath[Binary][:len("-rwxr-xr-x 0:0")])
	assert.True(t, strings.HasPrefix(byPath["/tmp"], "dtrwxrwxrwx 0:0"), byPath["/tmp"])
	assert.True(t, strings.HasPrefix(byPath[Home], "drwxr-xr-x 65532:65532"), byPath[Home])
	for p, rest := range byPath {
		if p != Home {
			assert.Contains(t, rest, " 0:0 ", "%s is root-owned", p)
		}
	}
	// Every entry's parent is listed (tar order: parents first).
	for _, l := range s.Layers {
		seen := map[string]bool{"/": true}
		for _, e := range l.Entries {
			assert.True(t, seen[filepath.Dir(e.Path)], "layer %q: %s before its parent", l.Name, e.Path)
			seen[e.Path] = true
		}
	}
	var passwd string
	for _, e := range s.Layers[0].Entries {
		if e.Path == "/etc/passwd" {
			passwd = string(e.Data)
		}
	}
	assert.Contains(t, passwd, "gr00tgw:x:65532:65532:gr00tgw:/home/gr00tgw:")
}

// tiny is a spec with two small layers.
func tiny(t *testing.T, created time.Time) *Spec {
	src := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.WriteFile(src, []byte("payload"), 0o600))
	s := &Spec{Arch: "arm64", Tag: "v1", Revision: "abc", Created: created, Layers: []Layer{
		{Name: "a", Entries: withParents([]Entry{{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/x\n")}})},
		{Name: "b", Entries: withParents([]Entry{{Path: Binary, Mode: 0o755, Src: src}, {Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777}})},
	}}
	return s
}

// Same inputs, same digest; OCI media types; the runtime configuration.
func TestImageReproducibleAndConfigured(t *testing.T) {
	at := time.Unix(1700000000, 0)
	img1, err := tiny(t, at).Image()
	require.NoError(t, err)
	img2, err := tiny(t, at).Image()
	require.NoError(t, err)
	d1, err := img1.Digest()
	require.NoError(t, err)
	d2, err := img2.Digest()
	require.NoError(t, err)
	assert.Equal(t, d1, d2, "same inputs give the same digest")
	img3, err := tiny(t, at.Add(time.Second)).Image()
	require.NoError(t, err)
	d3, err := img3.Digest()
	require.NoError(t, err)
	assert.NotEqual(t, d1, d3, "the time is part of the image")

	mt, err := img1.MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCIManifestSchema1, mt)
	m, err := img1.Manifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIConfigJSON, m.Config.MediaType)
	require.Len(t, m.Layers, 2)
	for _, l := range m.Layers {
		assert.Equal(t, types.OCILayer, l.MediaType)
	}
	cf, err := img1.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, "arm64", cf.Architecture)
	rc := RuntimeConfig()
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, rc.Env, cf.Config.Env)
	assert.Contains(t, cf.Config.Env, "PORT=8080")
	assert.Contains(t, cf.Config.Env, "GR00TGW_HOME=/opt/gr00tgw")
	assert.Equal(t, []string{Binary}, cf.Config.Entrypoint)
	assert.Equal(t, []string{"serve"}, cf.Config.Cmd)
	assert.Contains(t, cf.Config.ExposedPorts, "8080/tcp")
	assert.Equal(t, "abc", cf.Config.Labels["org.opencontainers.image.revision"])
	assert.Len(t, cf.RootFS.DiffIDs, 2)
	assert.Len(t, cf.History, 2)

	// The second layer's tar: parents first, modes, times, no user names.
	layers, err := img1.Layers()
	require.NoError(t, err)
	rc2, err := layers[1].Uncompressed()
	require.NoError(t, err)
	defer rc2.Close()
	tr := tar.NewReader(rc2)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		assert.True(t, h.ModTime.Equal(at), "%s: time %v", h.Name, h.ModTime)
		assert.Empty(t, h.Uname+h.Gname, h.Name)
		switch h.Name {
		case "opt/gr00tgw/bin/gr00tgw":
			assert.EqualValues(t, 0o755, h.Mode)
			b, _ := io.ReadAll(tr)
			assert.Equal(t, "payload", string(b))
		case "tmp/":
			assert.EqualValues(t, 0o1777, h.Mode)
		}
	}
	assert.Equal(t, []string{"opt/", "opt/gr00tgw/", "opt/gr00tgw/bin/", "opt/gr00tgw/bin/gr00tgw", "tmp/"}, names)
}

// The layout and the archive are what podman and docker read: an
// index.json naming the reference, a manifest.json with RepoTags.
func TestWriteLayoutAndArchive(t *testing.T) {
	s := tiny(t, time.Unix(0, 0))
	img, err := s.Image()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, s.WriteLayout(filepath.Join(dir, "oci"), img))
	var idx struct {
		Manifests []struct {
			MediaType   string            `json:"mediaType"`
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "oci", "index.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &idx))
	require.Len(t, idx.Manifests, 1)
	assert.Equal(t, "gr00tgw:v1", idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	assert.Equal(t, string(types.OCIManifestSchema1), idx.Manifests[0].MediaType)
	dg, err := img.Digest()
	require.NoError(t, err)
	assert.Equal(t, dg.String(), idx.Manifests[0].Digest)

	archive := filepath.Join(dir, "gr00tgw.tar")
	require.NoError(t, s.WriteArchive(archive, img))
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Name == "manifest.json" {
			var m []struct{ RepoTags []string }
			require.NoError(t, json.NewDecoder(tr).Decode(&m))
			require.Len(t, m, 1)
			assert.Equal(t, []string{"gr00tgw:v1"}, m[0].RepoTags)
			found = true
		}
	}
	assert.True(t, found, "manifest.json in the archive")
}

// WriteRootfs writes the same tree as the layers (what the Dockerfile
// copies).
func TestWriteRootfs(t *testing.T) {
	s := tiny(t, time.Unix(1, 0))
	dir := t.TempDir()
	require.NoError(t, s.WriteRootfs(dir))
	st, err := os.Stat(filepath.Join(dir, "tmp"))
	require.NoError(t, err)
	assert.Equal(t, fs.ModeDir|fs.ModeSticky|0o777, st.Mode())
	b, err := os.ReadFile(filepath.Join(dir, "opt/gr00tgw/bin/gr00tgw"))
	require.NoError(t, err)
	assert.Equal(t, "payload", string(b))
	st, err = os.Stat(filepath.Join(dir, "opt/gr00tgw/bin/gr00tgw"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o755), st.Mode())
}

// gzip of the layers is deterministic (the digest depends on it).
func TestTarLayerDeterministic(t *testing.T) {
	s := tiny(t, time.Unix(5, 0))
	a, err := s.tarLayer(s.Layers[1])
	require.NoError(t, err)
	b, err := s.tarLayer(s.Layers[1])
	require.NoError(t, err)
	assert.Equal(t, a, b)
	zr, err := gzip.NewReader(bytes.NewReader(a))
	require.NoError(t, err)
	_, err = io.ReadAll(zr)
	require.NoError(t, err)
}

// The Dockerfile builds the same image for Docker users: its build stage
// writes this builder's root file system, and its final stage declares
// RuntimeConfig — user, environment, working directory, port, stop
// signal, entrypoint and command.
func TestDockerfileMatchesRuntimeConfig(t *testing.T) {
	f, err := os.Open(filepath.Join(checkout(t), "Dockerfile"))
	require.NoError(t, err)
	defer f.Close()
	var stages [][]string // instructions per stage, continuation lines joined
	sc := bufio.NewScanner(f)
	var cur string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, cur = cur+line, ""
		if strings.HasPrefix(line, "FROM ") {
			stages = append(stages, nil)
		}
		require.NotEmpty(t, stages, "instruction before FROM: %s", line)
		stages[len(stages)-1] = append(stages[len(stages)-1], line)
	}
	require.NoError(t, sc.Err())
	require.Len(t, stages, 2, "a build stage and the final stage")
	assert.Contains(t, strings.Join(stages[0], "\n"), "cd tools && go run ./cmd/gwimage --rootfs /rootfs", "the build stage writes this builder's file system")

	final := map[string][]string{}
	for _, ins := range stages[1] {
		op, arg, _ := strings.Cut(ins, " ")
		final[op] = append(final[op], strings.TrimSpace(arg))
	}
	assert.Equal(t, []string{"scratch"}, final["FROM"])
	assert.Contains(t, final["COPY"], "--from=build /rootfs/ /")
	assert.Contains(t, final["COPY"], "--from=build --chown=65532:65532 /rootfs"+Home+" "+Home)
	rc := RuntimeConfig()
	assert.Equal(t, []string{rc.User}, final["USER"])
	var env []string
	for _, e := range final["ENV"] {
		env = append(env, strings.Fields(e)...)
	}
	sort.Strings(env)
	want := append([]string(nil), rc.Env...)
	sort.Strings(want)
	assert.Equal(t, want, env)
	assert.Equal(t, []string{rc.WorkingDir}, final["WORKDIR"])
	assert.Equal(t, rc.ExposedPorts, final["EXPOSE"])
	assert.Equal(t, []string{rc.StopSignal}, final["STOPSIGNAL"])
	jsonArg := func(op string) []string {
		require.Len(t, final[op], 1, op)
		var v []string
		require.NoError(t, json.Unmarshal([]byte(final[op][0]), &v), "%s in exec form", op)
		return v
	}
	assert.Equal(t, rc.Entrypoint, jsonArg("ENTRYPOINT"))
	assert.Equal(t, rc.Cmd, jsonArg("CMD"))
	for op := range final {
		assert.Contains(t, []string{"FROM", "COPY", "USER", "ENV", "WORKDIR", "EXPOSE", "STOPSIGNAL", "ENTRYPOINT", "CMD"}, op, "an instruction the check does not cover")
	}
}
