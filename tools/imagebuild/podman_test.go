package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// podmanWorkarounds are the podman arguments tried in turn until a
// container starts: none first; then what sandboxes without full cgroup
// delegation and with capped rlimits need (runc instead of crun, which
// refuses cgroups in hybrid mode; rlimits no higher than the caller's).
// The run always uses --network none: the check talks to the server from
// inside the container, on its loopback, so no network backend is needed.
func podmanWorkarounds() [][]string {
	sets := [][]string{nil}
	var ws []string
	if _, err := exec.LookPath("runc"); err == nil {
		ws = append(ws, "--runtime", "runc")
	}
	ws = append(ws, "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")
	sets = append(sets, ws)
	return sets
}

// TestPodmanServesDemo loads the docker-archive `make image` writes into
// podman, runs `gr00tgw serve` in it (the image's default command, PORT
// 8080), runs `gr00tgw smoke` inside the container (the demo against its
// golden, repeats bit-identical, the seed path), checks that the server
// runs as the non-root user and that SIGTERM drains it to exit status 0.
// Also checks that podman reads the OCI layout. Skipped without podman
// (Debian: apt-get install podman).
func TestPodmanServesDemo(t *testing.T) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("podman not installed (Debian: apt-get install podman runc): the image is not run; make image still builds it")
	}
	if testing.Short() {
		t.Skip("-short: not building and running the image")
	}
	root := checkout(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	pc := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, podman, args...)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}

	// Build: the static binary, the plugins (build/plugins of make test,
	// else a fresh pack), the image.
	dir := t.TempDir()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		//lint:ignore SA1019 only a fallback when no go is on PATH (the build machine is this one)
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	t0 := time.Now()
	bin := filepath.Join(dir, "gr00tgw")
	require.NoError(t, BuildBinary(ctx, goCmd, root, bin, runtime.GOARCH, "podman-test"))
	plugins := filepath.Join(root, "build", "plugins")
	if _, err := os.Stat(filepath.Join(plugins, "droid", "droid.wasm")); err != nil {
		plugins = filepath.Join(dir, "plugins")
		cmd := exec.CommandContext(ctx, goCmd, "run", "./plugins/cmd/gwplugin-pack", "-o", plugins, "./embodiments/droid", "./embodiments/libero")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "gwplugin-pack: %s", out)
	}
	tag := fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	s, err := New(Options{Checkout: root, Binary: bin, Plugins: plugins, CABundle: "", Arch: runtime.GOARCH,
		Created: time.Unix(0, 0), Tag: tag})
	require.NoError(t, err)
	img, err := s.Image()
	require.NoError(t, err)
	archive := filepath.Join(dir, "gr00tgw.tar")
	require.NoError(t, s.WriteArchive(archive, img))
	// podman 4 names an image pulled from a layout after its path: keep
	// the path lowercase.
	ociDir, err := os.MkdirTemp("", "gwimage-oci-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(ociDir) })
	ociDir = strings.ToLower(ociDir)
	require.NoError(t, s.WriteLayout(ociDir, img))
	t.Logf("image %s built in %v", s.RefName(), time.Since(t0).Round(100*time.Millisecond))

	out, err := pc("load", "-i", archive)
	require.NoError(t, err, "podman load: %s", out)
	ref := "localhost/" + s.RefName()
	require.Contains(t, out, ref)
	loadedID, err := pc("image", "inspect", "--format", "{{.Id}}", ref)
	require.NoError(t, err, loadedID)
	// Removing by ID drops every name the test gave the image (the
	// binary's version makes it this test's own).
	t.Cleanup(func() { _, _ = exec.Command(podman, "rmi", "-f", loadedID).CombinedOutput() })
	user, err := pc("image", "inspect", "--format", "{{.Config.User}} {{.Config.Entrypoint}} {{.Config.Cmd}}", ref)
	require.NoError(t, err, user)
	assert.Equal(t, "65532:65532 [/opt/gr00tgw/bin/gr00tgw] [serve]", user)

	// The OCI layout is readable by podman too (no run: the same image).
	layoutRef := "oci:" + ociDir + ":" + s.RefName()
	out, err = pc("pull", "-q", layoutRef)
	require.NoError(t, err, "podman pull %s: %s", layoutRef, out)
	pulled := lastLine(out)
	assert.True(t, strings.HasPrefix(loadedID, pulled) || strings.HasPrefix(pulled, loadedID), "the layout holds the archive's image: %s vs %s", pulled, loadedID)

	name := "gr00tgw-" + tag
	var started []string
	for _, ws := range podmanWorkarounds() {
		args := append([]string{"run", "-d", "--name", name, "--network", "none"}, ws...)
		out, err = pc(append(args, ref)...)
		if err == nil {
			started = ws
			break
		}
		t.Logf("podman run %s: %s", strings.Join(ws, " "), out)
		_, _ = pc("rm", "-f", name)
	}
	require.NoError(t, err, "podman run failed with every workaround")
	t.Cleanup(func() { _, _ = exec.Command(podman, "rm", "-f", name).CombinedOutput() })
	if started != nil {
		t.Logf("podman needed: %s", strings.Join(started, " "))
	}

	smoke, err := pc("exec", name, "gr00tgw", "smoke", "--url", "http://127.0.0.1:8080", "--wait", "120s")
	logs, _ := pc("logs", name)
	require.NoError(t, err, "smoke in the container: %s\nserver logs:\n%s", smoke, tail(logs, 3000))
	t.Logf("%s", smoke)
	assert.True(t, strings.HasPrefix(lastLine(smoke), "PASS "), smoke)
	assert.Contains(t, logs, `"addr":"0.0.0.0:8080"`, "PORT=8080 of the image is the listen address")

	who, err := pc("exec", name, "gr00tgw", "version")
	require.NoError(t, err, who)
	assert.Contains(t, who, "podman-test")
	top, err := pc("top", name, "user", "pid")
	require.NoError(t, err, top)
	assert.Contains(t, top, "gr00tgw", "the server runs as the non-root user")

	out, err = pc("stop", "-t", "40", name)
	require.NoError(t, err, out)
	code, err := pc("inspect", "--format", "{{.State.ExitCode}}", name)
	require.NoError(t, err, code)
	logs, _ = pc("logs", name)
	assert.Equal(t, "0", code, "exit status after SIGTERM; logs:\n%s", tail(logs, 2000))
	assert.Contains(t, logs, "Releasing backend", "SIGTERM drained the server")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
