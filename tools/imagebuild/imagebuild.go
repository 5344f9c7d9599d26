// Package imagebuild assembles gr00tgw's OCI image from Go code alone: no
// Docker daemon, no registry and no base image. The image is a static
// binary (CGO_ENABLED=0) on an empty base, plus the files it needs:
//
//	/etc/passwd, /etc/group                 root and the non-root user gr00tgw (65532:65532)
//	/etc/ssl/certs/ca-certificates.crt      the build machine's CA bundle, when it has one (OTLP over TLS)
//	/tmp (1777), /home/gr00tgw (65532)      scratch space and HOME (plugin compilation cache, goldens)
//	/opt/gr00tgw/testdata/n17-tiny          the embedded default checkpoint, its demos and goldens
//	/opt/gr00tgw/testdata/tokenizer         the vendored Qwen3 tokenizer
//	/opt/gr00tgw/build/plugins              the packed embodiment plugins (make plugins)
//	/opt/gr00tgw/bin/gr00tgw                the binary
//
// GR00TGW_HOME=/opt/gr00tgw lets package assets find the embedded default;
// PORT=8080 (config: a port-only alias of addr) makes `serve` listen on
// 0.0.0.0:8080, KServe's and Knative's convention. The entrypoint is the
// binary and the command `serve`, so `podman run IMAGE` serves the tiny
// checkpoint and `podman run IMAGE smoke --url …` runs any subcommand.
//
// Each group above is one layer, the rarely changing ones first. Every
// tar entry carries the same modification time (SOURCE_DATE_EPOCH, else
// the Unix epoch) and no host user names, so the same inputs give the same
// image digest. The same tree is written as a plain directory by
// WriteRootfs, which the Dockerfile copies into a scratch image: the two
// images hold the same files, and config_test checks that the Dockerfile
// declares the same user, environment, port and entrypoint as Config.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Image layout constants, shared by the builder, the Dockerfile check and
// the deployment manifests (deploy/): change them together.
const (
	// Root is GR00TGW_HOME inside the image.
	Root = "/opt/gr00tgw"
	// Binary is the entrypoint.
	Binary = Root + "/bin/gr00tgw"
	// UID and GID of the non-root user gr00tgw (distroless' "nonroot").
	UID, GID = 65532, 65532
	// User names the user; Home is its HOME (writable: caches).
	User = "gr00tgw"
	Home = "/home/gr00tgw"
	// Port is the default listen port (env PORT).
	Port = 8080
	// CABundle is where Go's crypto/x509 looks first on Linux.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// Trees are the checkout paths copied below Root, as the assets package
// expects them (CheckpointDir, TokenizerDir, PluginsDir).
var Trees = []string{"testdata/n17-tiny", "testdata/tokenizer", "build/plugins"}

// Entry is one file, directory or nothing else of the image's root file
// system.
type Entry struct {
	// Path is absolute inside the image ("/opt/gr00tgw/bin/gr00tgw").
	Path string
	// Mode holds the permission bits and fs.ModeDir for a directory.
	Mode     fs.FileMode
	UID, GID int
	// Src is a host file whose contents this entry takes; else Data.
	Src  string
	Data []byte
}

// Layer is a named group of entries, one image layer.
type Layer struct {
	Name    string
	Entries []Entry
}

// Spec is everything the image is made of.
type Spec struct {
	Layers []Layer
	// Created is the time of every tar entry and of the image config.
	Created time.Time
	// Arch is the GOARCH of the binary ("amd64", "arm64").
	Arch string
	// Tag is the image's version tag ("latest"), Revision the source
	// commit ("" when unknown): labels.
	Tag, Revision string
}

// Options select what New puts into the image.
type Options struct {
	// Checkout is the module root holding testdata/ and build/plugins/.
	Checkout string
	// Binary is the static gr00tgw binary to ship (BuildBinary).
	Binary string
	// Plugins is the packed plugin directory to ship at build/plugins;
	// "" is <Checkout>/build/plugins (make plugins).
	Plugins string
	// CABundle is the host CA bundle to ship; "" ships none.
	CABundle string
	Arch     string
	Created  time.Time
	Tag      string
	Revision string
}

// New lists the image's entries from the checkout and the binary.
func New(o Options) (*Spec, error) {
	if o.Arch == "" {
		return nil, errors.New("imagebuild: no architecture")
	}
	s := &Spec{Created: o.Created.UTC(), Arch: o.Arch, Tag: o.Tag, Revision: o.Revision}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:gr00tgw:%s:/sbin/nologin\n", User, UID, GID, Home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", User, GID)
	base := Layer{Name: "base: users, CA bundle, /tmp, home", Entries: []Entry{
		dir("/etc"),
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		dir("/home"),
		{Path: Home, Mode: fs.ModeDir | 0o755, UID: UID, GID: GID},
	}}
	if o.CABundle != "" {
		base.Entries = append(base.Entries, dir("/etc/ssl"), dir("/etc/ssl/certs"),
			Entry{Path: CABundle, Mode: 0o644, Src: o.CABundle})
	}
	s.Layers = append(s.Layers, base)

	assets := Layer{Name: "embedded default: tiny checkpoint and tokenizer"}
	plugins := Layer{Name: "embodiment plugins"}
	for _, rel := range Trees {
		l := &assets
		if strings.HasPrefix(rel, "build/") {
			l = &plugins
		}
		src := filepath.Join(o.Checkout, filepath.FromSlash(rel))
		if rel == "build/plugins" && o.Plugins != "" {
			src = o.Plugins
		}
		es, err := tree(src, path.Join(Root, rel))
		if err != nil {
			return nil, err
		}
		l.Entries = append(l.Entries, es...)
	}
	s.Layers = append(s.Layers, assets, plugins)

	st, err := os.Stat(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: binary: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("imagebuild: binary %s is not a regular file", o.Binary)
	}
	s.Layers = append(s.Layers, Layer{Name: "gr00tgw binary", Entries: []Entry{
		{Path: path.Dir(Binary), Mode: fs.ModeDir | 0o755}, {Path: Binary, Mode: 0o755, Src: o.Binary},
	}})
	for i := range s.Layers {
		s.Layers[i].Entries = withParents(s.Layers[i].Entries)
	}
	return s, nil
}

func dir(p string) Entry { return Entry{Path: p, Mode: fs.ModeDir | 0o755} }

// tree lists the regular files and directories below src as entries below
// dst, root-owned, 0644 (0755 when the host file is executable) and 0755
// for directories. A symlink or other special file is an error: the image
// must not depend on what a link points to on the build machine.
func tree(src, dst string) ([]Entry, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: %w (run make plugins first for build/plugins)", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("imagebuild: %s is not a directory", src)
	}
	var out []Entry
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			out = append(out, Entry{Path: target, Mode: fs.ModeDir | 0o755})
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o644)
			if info.Mode()&0o111 != 0 {
				mode = 0o755
			}
			out = append(out, Entry{Path: target, Mode: mode, Src: p})
		default:
			return fmt.Errorf("imagebuild: %s is neither a regular file nor a directory (%v)", p, d.Type())
		}
		return nil
	})
	return out, err
}

// withParents adds every missing parent directory (root-owned, 0755) and
// sorts the entries by path, parents first, so a layer's tar lists each
// directory before its contents.
func withParents(es []Entry) []Entry {
	seen := map[string]bool{}
	for _, e := range es {
		seen[e.Path] = true
	}
	for _, e := range es {
		for p := path.Dir(e.Path); p != "/" && !seen[p]; p = path.Dir(p) {
			seen[p] = true
			es = append(es, dir(p))
		}
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].Path < es[j].Path })
	return es
}

// Files lists every path of the image with its mode, owner and size (for
// tests and the build report), sorted.
func (s *Spec) Files() ([]string, error) {
	var out []string
	for _, l := range s.Layers {
		for _, e := range l.Entries {
			size := int64(len(e.Data))
			if e.Src != "" {
				st, err := os.Stat(e.Src)
				if err != nil {
					return nil, err
				}
				size = st.Size()
			}
			if e.Mode.IsDir() {
				size = 0
			}
			out = append(out, fmt.Sprintf("%s %v %d:%d %d", e.Path, e.Mode, e.UID, e.GID, size))
		}
	}
	sort.Strings(out)
	return out, nil
}

// tarLayer writes l as a gzip-compressed tar stream.
func (s *Spec) tarLayer(l Layer) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, e := range l.Entries {
		name := strings.TrimPrefix(e.Path, "/")
		h := &tar.Header{
			Name:    name,
			Mode:    int64(e.Mode.Perm()),
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: s.Created,
			Format:  tar.FormatPAX,
		}
		if e.Mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		var body io.Reader
		if e.Mode.IsDir() {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			data := e.Data
			if e.Src != "" {
				b, err := os.ReadFile(e.Src)
				if err != nil {
					return nil, err
				}
				data = b
			}
			h.Size = int64(len(data))
			body = bytes.NewReader(data)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("imagebuild: %s: %w", e.Path, err)
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteRootfs writes the image's file system as a plain directory below
// dir (what the Dockerfile copies into its scratch image). Ownership is
// applied only when running as root; modes always.
func (s *Spec) WriteRootfs(dir string) error {
	asRoot := os.Geteuid() == 0
	for _, l := range s.Layers {
		for _, e := range l.Entries {
			p := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(e.Path, "/")))
			if e.Mode.IsDir() {
				if err := os.MkdirAll(p, 0o755); err != nil {
					return err
				}
			} else {
				data := e.Data
				if e.Src != "" {
					b, err := os.ReadFile(e.Src)
					if err != nil {
						return err
					}
					data = b
				}
				if err := os.WriteFile(p, data, e.Mode.Perm()); err != nil {
					return err
				}
			}
			if err := os.Chmod(p, e.Mode&(fs.ModePerm|fs.ModeSticky)); err != nil {
				return err
			}
			if asRoot {
				if err := os.Lchown(p, e.UID, e.GID); err != nil {
					return err
				}
			}
			if err := os.Chtimes(p, s.Created, s.Created); err != nil {
				return err
			}
		}
	}
	return nil
}

// Config is the image's runtime configuration: what the Dockerfile's final
// stage declares too (checked by a test).
type Config struct {
	User         string
	Env          []string
	WorkingDir   string
	Entrypoint   []string
	Cmd          []string
	ExposedPorts []string
	StopSignal   string
}

// RuntimeConfig is the one runtime configuration of the image.
func RuntimeConfig() Config {
	return Config{
		User: strconv.Itoa(UID) + ":" + strconv.Itoa(GID),
		Env: []string{
			"PATH=" + path.Dir(Binary),
			"HOME=" + Home,
			"GR00TGW_HOME=" + Root,
			"PORT=" + strconv.Itoa(Port),
		},
		WorkingDir:   Home,
		Entrypoint:   []string{Binary},
		Cmd:          []string{"serve"},
		ExposedPorts: []string{strconv.Itoa(Port) + "/tcp"},
		StopSignal:   "SIGTERM",
	}
}
