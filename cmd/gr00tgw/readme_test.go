//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"
)

// TestREADME runs every ```sh block of README.md and then of docs/*.md (in
// name order), as written, with bash (set -e -o pipefail), one after
// another in one fresh sandbox that looks
// like a fresh clone after `make build`: the tracked top-level entries of
// the checkout linked in (sources, testdata, Makefile, go.mod, ...), real
// directories for what the commands write (embodiments/ with the tracked
// plugins linked, build/, bin/), then `make build` run there. A block
// fails on a non-zero exit, naming the file, line and command, when
// a jq filter prints a bare `null` (the field the README shows is
// missing), or when a command uses a deprecated flag name. Every process
// a block starts (servers sent to the background) is stopped when it ends.
//
// Markers, an HTML comment on the line before a block:
//
//	<!-- readme-test: skip (REASON) -->          not run; reported as a skip with REASON
//	<!-- readme-test: needs-server (REASON) -->  run against `bin/gr00tgw serve`
//	                                             (what `make run` serves), started before
//	                                             the block and stopped after it
//	<!-- readme-test: needs-torch (REASON) -->   run when Debian's /usr/bin/python3 has
//	                                             torch (make torch-deps installs it),
//	                                             else skipped saying what is missing
//
// The README's commands use 127.0.0.1:20000 and /tmp/gw-plugins, so runs on
// one machine are serialised with a lock file, and a port already in use
// fails the test.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs every command block of README.md (about a minute)")
	}
	for _, tool := range []string{"bash", "curl", "jq", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("README.md's commands need %s, not on PATH (apt-get install %s)", tool, tool)
		}
	}
	root := moduleRoot(t)
	files := docFiles(t, root)
	type fileBlocks struct {
		name   string
		blocks []readmeBlock
	}
	var all []fileBlocks
	for _, name := range files {
		blocks, err := docBlocks(filepath.Join(root, name), name)
		require.NoError(t, err)
		if name == "README.md" {
			require.NotEmpty(t, blocks, "README.md has no ```sh block")
		}
		all = append(all, fileBlocks{name, blocks})
	}

	lockREADME(t)
	requirePortFree(t, readmeAddr)
	start := time.Now()
	sb := newReadmeSandbox(t, root)
	t.Logf("sandbox %s ready (make build) in %v", sb.dir, time.Since(start).Round(time.Millisecond))
	n := 0
	for _, f := range all {
		t.Run(f.name, func(t *testing.T) {
			for i, b := range f.blocks {
				n++
				name := fmt.Sprintf("block%d_line%d", i+1, b.line)
				ok := t.Run(name, func(t *testing.T) {
					if b.skip != "" {
						t.Skipf("%s:%d: readme-test: skip (%s)", f.name, b.line, b.skip)
					}
					if b.torch {
						if out, err := exec.Command("/usr/bin/python3", "-c", "import torch").CombinedOutput(); err != nil {
							t.Skipf("%s:%d: readme-test: needs-torch: /usr/bin/python3 has no torch (%v: %s): apt-get install python3-torch (make torch-deps)", f.name, b.line, err, bytes.TrimSpace(out))
						}
					}
					t0 := time.Now()
					if b.server {
						stop := sb.startServer(t)
						defer stop()
					}
					out, err := sb.runDocBlock(f.name, b)
					if err != nil {
						t.Fatal(err)
					}
					if out != "" {
						t.Logf("%s:%d: stdout (tail):\n%s", f.name, b.line, out)
					}
					t.Logf("%s:%d: %d lines ran in %v", f.name, b.line, len(b.lines), time.Since(t0).Round(time.Millisecond))
				})
				if !ok {
					t.Fatalf("%s block %d (line %d) failed; the blocks after it in %s depend on it and were not run", f.name, i+1, b.line, f.name)
				}
			}
		})
	}
	t.Logf("README.md and docs/: %d blocks in %v", n, time.Since(start).Round(time.Millisecond))
}

// docFiles is what TestREADME runs: README.md, then docs/*.md by name.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	sort.Strings(docs)
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	return files
}

// readmeAddr is where the README's server listens (the default addr).
const readmeAddr = "127.0.0.1:20000"

// readmeBlock is one ```sh block: its first command's README line, its
// lines, and its marker.
type readmeBlock struct {
	line   int
	lines  []string
	skip   string // reason, when marked skip
	server bool   // marked needs-server
	torch  bool   // marked needs-torch
}

var (
	readmeFence  = regexp.MustCompile("^```\\s*([A-Za-z0-9_+-]*)\\s*$")
	readmeMarker = regexp.MustCompile(`^<!--\s*readme-test:\s*([a-z-]+)\s*(?:\((.*)\))?\s*-->$`)
)

// readmeBlocks parses a README's blocks: docBlocks(path, "README.md").
func readmeBlocks(path string) ([]readmeBlock, error) {
	return docBlocks(path, "README.md")
}

// docBlocks parses path's ```sh (or bash, shell) blocks and their
// markers, naming the file name in errors; an unknown marker, a skip
// without a reason, or a marker not followed by a shell block is an error.
// Blocks in other languages are not run (docFences refuses a fence with
// none).
func docBlocks(path, name string) ([]readmeBlock, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n")
	var (
		out     []readmeBlock
		pending *readmeBlock // marker seen, block not yet
		markAt  int
	)
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if m := readmeMarker.FindStringSubmatch(l); m != nil {
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: readme-test marker not followed by a ```sh block", name, markAt)
			}
			pending, markAt = &readmeBlock{}, i+1
			switch m[1] {
			case "skip":
				if strings.TrimSpace(m[2]) == "" {
					return nil, fmt.Errorf("%s:%d: readme-test: skip needs a reason: skip (REASON)", name, i+1)
				}
				pending.skip = strings.TrimSpace(m[2])
			case "needs-server":
				pending.server = true
			case "needs-torch":
				pending.torch = true
			default:
				return nil, fmt.Errorf("%s:%d: unknown readme-test marker %q (want skip, needs-server or needs-torch)", name, i+1, m[1])
			}
			continue
		}
		if strings.HasPrefix(l, "<!--") && strings.Contains(l, "readme-test") {
			return nil, fmt.Errorf("%s:%d: malformed readme-test marker %q (want <!-- readme-test: skip (REASON) --> or <!-- readme-test: needs-server (REASON) -->)", name, i+1, l)
		}
		m := readmeFence.FindStringSubmatch(l) // indented too (a block in a list item)
		if m == nil {
			if l != "" && pending != nil {
				return nil, fmt.Errorf("%s:%d: readme-test marker not followed by a ```sh block", name, markAt)
			}
			continue
		}
		// A fenced block: find its end.
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```") {
			j++
		}
		if j == len(lines) {
			return nil, fmt.Errorf("%s:%d: unterminated ``` block", name, i+1)
		}
		switch m[1] {
		case "sh", "bash", "shell":
			b := readmeBlock{line: i + 2, lines: lines[i+1 : j]}
			if pending != nil {
				b.skip, b.server, b.torch = pending.skip, pending.server, pending.torch
			}
			out = append(out, b)
		default:
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: readme-test marker before a ```%s block (only shell blocks run)", name, markAt, m[1])
			}
		}
		pending = nil
		i = j
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: readme-test marker not followed by a ```sh block", name, markAt)
	}
	return out, nil
}

// lockREADME serialises README runs on this machine (fixed port and /tmp
// paths); the lock goes with the test.
func lockREADME(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "gr00tgw-readme-test.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("README test lock %s: %v (another README run on this machine?)", f.Name(), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() })
}

func portInUse(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err == nil {
		c.Close()
		return true
	}
	return false
}

func requirePortFree(t *testing.T, addr string) {
	t.Helper()
	if portInUse(addr) {
		t.Fatalf("%s is in use (a `make run` server?): README.md's commands use it; stop that server and rerun", addr)
	}
}

// waitPortFree waits until nothing listens on addr.
func waitPortFree(addr string, d time.Duration) error {
	for end := time.Now().Add(d); portInUse(addr); {
		if time.Now().After(end) {
			return fmt.Errorf("%s still in use %v after the block ended", addr, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

type readmeSandbox struct {
	dir string
	env []string
}

// newReadmeSandbox builds the fresh-clone look-alike and runs `make build`
// in it (what `make run` does before serving).
func newReadmeSandbox(t *testing.T, root string) *readmeSandbox {
	t.Helper()
	dir := t.TempDir()
	top, emb := trackedEntries(t, root)
	for _, e := range top {
		switch e {
		case "bin", "build", "embodiments", ".git":
			continue
		}
		require.NoError(t, os.Symlink(filepath.Join(root, e), filepath.Join(dir, e)))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "embodiments"), 0o755))
	for _, e := range emb {
		require.NoError(t, os.Symlink(filepath.Join(root, "embodiments", e), filepath.Join(dir, "embodiments", e)))
	}
	for _, d := range []string{".tmp", ".cache"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	sb := &readmeSandbox{dir: dir, env: readmeEnv(t, dir)}
	c := exec.Command("make", "build")
	c.Dir, c.Env = dir, sb.env
	out, err := c.CombinedOutput()
	require.NoError(t, err, "make build in the sandbox:\n%s", out)
	return sb
}

// trackedEntries lists the checkout's tracked top-level entries and
// embodiments/* directories (git ls-files; without git, what is there).
func trackedEntries(t *testing.T, root string) (top, emb []string) {
	t.Helper()
	seenTop, seenEmb := map[string]bool{}, map[string]bool{}
	add := func(rel string) {
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if _, err := os.Lstat(filepath.Join(root, parts[0])); err != nil {
			return // tracked but deleted in this checkout
		}
		if !seenTop[parts[0]] {
			seenTop[parts[0]] = true
			top = append(top, parts[0])
		}
		if parts[0] == "embodiments" && len(parts) > 2 && !seenEmb[parts[1]] {
			seenEmb[parts[1]] = true
			emb = append(emb, parts[1])
		}
	}
	c := exec.Command("git", "ls-files", "-z")
	c.Dir = root
	if out, err := c.Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				add(f)
			}
		}
		return top, emb
	}
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && !strings.HasSuffix(e.Name(), ".test") {
			add(e.Name() + "/x/x")
		}
	}
	ents, err = os.ReadDir(filepath.Join(root, "embodiments"))
	require.NoError(t, err)
	for _, e := range ents {
		if e.IsDir() {
			add("embodiments/" + e.Name() + "/x")
		}
	}
	return top, emb
}

// readmeEnv is the blocks' environment: the caller's, without gr00tgw's
// configuration variables and the calling make's, with the sandbox's bin/ and the go tool on PATH,
// TMPDIR and the wazero cache inside the sandbox, and the Go caches kept.
func readmeEnv(t *testing.T, dir string) []string {
	t.Helper()
	goCmd := goTool(t)
	goEnv := func(k string) string {
		out, err := exec.Command(goCmd, "env", k).Output()
		require.NoError(t, err, "go env %s", k)
		return strings.TrimSpace(string(out))
	}
	keep := []string{"GOCACHE=" + goEnv("GOCACHE"), "GOMODCACHE=" + goEnv("GOMODCACHE")}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GR00TGW_"), strings.HasPrefix(k, "GR00T_"),
			k == "PATH", k == "TMPDIR", k == "XDG_CACHE_HOME", k == "GOCACHE", k == "GOMODCACHE",
			k == "MAKEFLAGS", k == "MFLAGS", k == "MAKELEVEL": // a fresh shell's make, not a sub-make of `make test`
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, keep...),
		"PATH="+filepath.Join(dir, "bin")+string(os.PathListSeparator)+filepath.Dir(goCmd)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TMPDIR="+filepath.Join(dir, ".tmp"),
		"XDG_CACHE_HOME="+filepath.Join(dir, ".cache"),
	)
}

// stopGroup ends process group pgid: SIGTERM, then SIGKILL after grace.
func stopGroup(pgid int, grace time.Duration) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // already gone
	}
	for end := time.Now().Add(grace); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// tail is the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > n {
		l = append([]string{fmt.Sprintf("[... %d lines]", len(l)-n)}, l[len(l)-n:]...)
	}
	return strings.Join(l, "\n")
}

// startServer starts `bin/gr00tgw serve` (what `make run` serves, no
// configuration) in the sandbox and waits for readiness; stop ends it.
func (sb *readmeSandbox) startServer(t *testing.T) (stop func()) {
	t.Helper()
	logPath := filepath.Join(sb.dir, ".tmp", fmt.Sprintf("serve-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	defer logf.Close()
	c := exec.Command(filepath.Join(sb.dir, "bin", "gr00tgw"), "serve")
	c.Dir, c.Env, c.Stdout, c.Stderr = sb.dir, sb.env, logf, logf
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, c.Start())
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	stop = func() {
		stopGroup(c.Process.Pid, 30*time.Second)
		<-exited
		if err := waitPortFree(readmeAddr, 10*time.Second); err != nil {
			t.Error(err)
		}
	}
	client := &http.Client{Timeout: 2 * time.Second}
	for end := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			stop()
			t.Fatalf("`bin/gr00tgw serve` (what `make run` serves) exited before it was ready: %v\n%s", err, tail(logPath, 30))
		default:
		}
		if resp, err := client.Get("http://" + readmeAddr + "/v2/health/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop
			}
		}
		if time.Now().After(end) {
			stop()
			t.Fatalf("`bin/gr00tgw serve` not ready after 3 minutes:\n%s", tail(logPath, 30))
		}
	}
}

// readmePrelude is the first script line; the block follows from line 2.
const readmePrelude = `set -e -o pipefail; trap 'rc=$?; printf "%s %s\n" "$LINENO" "$rc" > "$README_TEST_FAILED"' ERR`

// runBlock runs a README.md block: runDocBlock("README.md", b).
func (sb *readmeSandbox) runBlock(b readmeBlock) (stdout string, err error) {
	return sb.runDocBlock("README.md", b)
}

// runDocBlock runs b, a block of file name, with bash in the sandbox; its
// error names the file's line and the command that did not work.
func (sb *readmeSandbox) runDocBlock(name string, b readmeBlock) (stdout string, err error) {
	tmp := filepath.Join(sb.dir, ".tmp")
	id := strings.NewReplacer("/", "_", ".", "_").Replace(name) + "-" + strconv.Itoa(b.line)
	script := filepath.Join(tmp, "block-"+id+".sh")
	failed := filepath.Join(tmp, "block-"+id+".failed")
	outPath, errPath := filepath.Join(tmp, "block-"+id+".out"), filepath.Join(tmp, "block-"+id+".err")
	if err := os.WriteFile(script, []byte(readmePrelude+"\n"+strings.Join(b.lines, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	outf, err := os.Create(outPath)
	if err != nil {
		return "", err
	}
	defer outf.Close()
	errf, err := os.Create(errPath)
	if err != nil {
		return "", err
	}
	defer errf.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := exec.Command("bash", script)
	c.Dir, c.Stdout, c.Stderr = sb.dir, outf, errf
	c.Env = append(append([]string(nil), sb.env...), "README_TEST_FAILED="+failed)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var runErr error
	select {
	case runErr = <-done:
	case <-ctx.Done():
		stopGroup(c.Process.Pid, 5*time.Second)
		runErr = fmt.Errorf("timed out after 5 minutes: %w", <-done)
	}
	// Whatever the block left running (a server sent to the background
	// and not stopped, or stopped by a command that did not run) goes.
	stopGroup(c.Process.Pid, 30*time.Second)
	var portErr error
	if !b.server { // else the test's server holds the port until stop
		portErr = waitPortFree(readmeAddr, 30*time.Second)
	}

	show := func() string {
		return fmt.Sprintf("--- stdout:\n%s\n--- stderr:\n%s", tail(outPath, 25), tail(errPath, 25))
	}
	if runErr != nil {
		where := fmt.Sprintf("%s:%d: the block", name, b.line)
		if f, err := os.ReadFile(failed); err == nil {
			var lineNo, rc int
			if _, err := fmt.Sscan(string(f), &lineNo, &rc); err == nil && lineNo >= 2 && lineNo-2 < len(b.lines) {
				where = fmt.Sprintf("%s:%d: `%s`", name, b.line+lineNo-2, strings.TrimSpace(b.lines[lineNo-2]))
			}
		}
		return "", fmt.Errorf("%s failed (%v)\n%s", where, runErr, show())
	}
	if e, _ := os.ReadFile(errPath); bytes.Contains(e, []byte("has been deprecated")) || bytes.Contains(e, []byte("single-dash long flags go")) {
		return "", fmt.Errorf("%s:%d: the block uses a deprecated flag name or spelling (write the current --name)\n%s", name, b.line, show())
	}
	if n := bareNullLine(outPath); n > 0 {
		return "", fmt.Errorf("%s:%d: the block's output line %d is a bare `null` (a jq filter found nothing: the field the text shows is missing)\n%s", name, b.line, n, show())
	}
	return tail(outPath, 12), portErr
}

// bareNullLine is the first output line that is exactly "null" (1-based),
// or 0.
func bareNullLine(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; s.Scan(); n++ {
		if bytes.Equal(bytes.TrimSpace(s.Bytes()), []byte("null")) {
			return n
		}
	}
	return 0
}

// TestREADMEMarkers: the parser finds shell blocks with their first
// command's line and markers, and refuses malformed markers.
func TestREADMEMarkers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	write := func(s string) {
		require.NoError(t, os.WriteFile(path, []byte(s), 0o644))
	}
	write("# x\n\n```sh\necho a\n```\n\n<!-- readme-test: skip (needs a GPU) -->\n```sh\necho b\n```\n" +
		"```\nnot shell\n```\n<!-- readme-test: needs-server (the server above) -->\n\n```bash\necho c\necho d\n```\n")
	bs, err := readmeBlocks(path)
	require.NoError(t, err)
	require.Len(t, bs, 3)
	require.Equal(t, readmeBlock{line: 4, lines: []string{"echo a"}}, bs[0])
	require.Equal(t, readmeBlock{line: 9, lines: []string{"echo b"}, skip: "needs a GPU"}, bs[1])
	require.Equal(t, readmeBlock{line: 17, lines: []string{"echo c", "echo d"}, server: true}, bs[2])

	for doc, want := range map[string]string{
		"<!-- readme-test: skip -->\n```sh\nx\n```\n":           "skip needs a reason",
		"<!-- readme-test: sikp (typo) -->\n```sh\nx\n```\n":    "unknown readme-test marker",
		"<!-- readme-test skip (no colon) -->\n```sh\nx\n```\n": "malformed readme-test marker",
		"<!-- readme-test: skip (x) -->\ntext\n```sh\nx\n```\n": "not followed by a ```sh block",
		"<!-- readme-test: skip (x) -->\n```go\nx\n```\n":       "only shell blocks run",
		"```sh\nx\n":                       "unterminated",
		"<!-- readme-test: skip (x) -->\n": "not followed by a ```sh block",
	} {
		write(doc)
		_, err := readmeBlocks(path)
		require.ErrorContains(t, err, want, "%q", doc)
	}
}

// TestREADMERunner: a failing command is named with its README line; a
// failing command inside a pipeline fails the block; a bare null output
// fails it; what a block leaves in the background is stopped.
func TestREADMERunner(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".tmp"), 0o755))
	sb := &readmeSandbox{dir: dir, env: os.Environ()}
	_, err := sb.runBlock(readmeBlock{line: 10, lines: []string{"echo ok", "true | cat"}})
	require.NoError(t, err)

	_, err = sb.runBlock(readmeBlock{line: 20, lines: []string{"echo first", "ls no-such-file   # comment", "echo never"}})
	require.ErrorContains(t, err, "README.md:21: `ls no-such-file   # comment` failed")
	require.ErrorContains(t, err, "no-such-file")

	_, err = sb.runBlock(readmeBlock{line: 30, lines: []string{"false | cat"}})
	require.ErrorContains(t, err, "README.md:30: `false | cat` failed")

	_, err = sb.runBlock(readmeBlock{line: 40, lines: []string{`echo '{"a": 1}' | jq .b`}})
	require.ErrorContains(t, err, "bare `null`")

	_, err = sb.runBlock(readmeBlock{line: 45, lines: []string{`echo 'Flag --weights has been deprecated, use --weights-dir' >&2`}})
	require.ErrorContains(t, err, "deprecated flag")

	t0 := time.Now()
	_, err = sb.runBlock(readmeBlock{line: 50, lines: []string{"sleep 300 & echo $! > bg.pid"}})
	require.NoError(t, err)
	require.Less(t, time.Since(t0), 20*time.Second)
	b, err := os.ReadFile(filepath.Join(dir, "bg.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil { // gone, or a zombie not yet reaped by its new parent
		f := strings.Fields(string(st))
		require.True(t, len(f) > 2 && f[2] == "Z", "background sleep still running: %s", st)
	}
}

// docFences lists the lines of path's fences that have no language (an
// opening ``` alone), which TestDocFences refuses: a command block says
// ```sh (and runs, or carries a marker with its reason), any other block
// its language, so no command is left unrun without a reason.
func docFences(path string) ([]int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var bare []int
	inside := false
	for i, l := range strings.Split(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n") {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "```") {
			continue
		}
		if !inside && t == "```" {
			bare = append(bare, i+1)
		}
		inside = !inside
	}
	return bare, nil
}

// TestDocFences: every fence of README.md and docs/*.md names its
// language, and docFences finds the ones that do not.
func TestDocFences(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.md")
	require.NoError(t, os.WriteFile(path, []byte("```sh\nls\n```\n\n```\nbare\n```\n```text\n```\n"), 0o644))
	bare, err := docFences(path)
	require.NoError(t, err)
	require.Equal(t, []int{5}, bare)

	root := moduleRoot(t)
	for _, name := range docFiles(t, root) {
		bare, err := docFences(filepath.Join(root, name))
		require.NoError(t, err)
		for _, line := range bare {
			t.Errorf("%s:%d: a ``` fence with no language: write ```sh for a command (it runs, or takes a <!-- readme-test: skip (REASON) --> marker), else the block's language (text, json, yaml, promql, ...)", name, line)
		}
	}
}

// readmePackageRows reads the README's package table (the one headed
// `| package | holds |`): the paths in backticks of each row's first
// cell, braces expanded (`core/{a,b}` → core/a, core/b). A path ending in
// "/" names a directory with no Go code.
func readmePackageRows(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var paths []string
	in := false
	tick := regexp.MustCompile("`([^`]+)`")
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if !in {
			in = regexp.MustCompile(`^\|\s*package\s*\|\s*holds\s*\|$`).MatchString(l)
			continue
		}
		if !strings.HasPrefix(l, "|") {
			break
		}
		cells := strings.Split(l, "|")
		if len(cells) < 3 || strings.Trim(cells[1], " -") == "" {
			continue // the |---| line
		}
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			paths = append(paths, expandBraces(m[1])...)
		}
	}
	if !in {
		return nil, fmt.Errorf("%s: no `| package | holds |` table", path)
	}
	return paths, nil
}

// expandBraces expands one {a,b,...} group (the table's only form).
func expandBraces(s string) []string {
	i, j := strings.Index(s, "{"), strings.Index(s, "}")
	if i < 0 || j < i {
		return []string{s}
	}
	var out []string
	for _, alt := range strings.Split(s[i+1:j], ",") {
		out = append(out, s[:i]+strings.TrimSpace(alt)+s[j+1:])
	}
	return out
}

// packageDirs lists the package directories of every Go module under root
// (each go.mod outside build/, bin/, testdata/ and hidden directories),
// relative to root with slashes, by `go list ./...` in each module.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	var mods []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root {
			switch n := d.Name(); {
			case strings.HasPrefix(n, "."), n == "build", n == "bin", n == "testdata", n == "node_modules", n == "vendor":
				return filepath.SkipDir
			}
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			mods = append(mods, filepath.Dir(p))
		}
		return nil
	}))
	var dirs []string
	for _, m := range mods {
		c := exec.Command(goTool(t), "list", "-e", "-f", "{{.Dir}}", "./...") // -e: a module whose dependencies are not downloaded still lists its directories
		c.Dir = m
		out, err := c.Output()
		require.NoError(t, err, "go list ./... in %s", m)
		for _, d := range strings.Fields(string(out)) {
			rel, err := filepath.Rel(root, d)
			require.NoError(t, err)
			dirs = append(dirs, filepath.ToSlash(rel))
		}
	}
	return dirs
}

// checkPackageTable compares the table's paths with the package
// directories: every package up to two levels deep (`core/image`,
// `device`) is a row of its own; a deeper one (`core/model/backbone`) is
// covered by a row naming it or an ancestor at least two levels deep
// (`core/model`); every row names a package directory or an ancestor of
// one (a row ending in "/" an existing directory with no Go code).
func checkPackageTable(root string, rows, pkgs []string) []string {
	listed := map[string]bool{}
	var probs []string
	for _, r := range rows {
		if strings.HasSuffix(r, "/") {
			if fi, err := os.Stat(filepath.Join(root, r)); err != nil || !fi.IsDir() {
				probs = append(probs, fmt.Sprintf("row %q: no such directory", r))
			}
			continue
		}
		listed[r] = true
	}
	used := map[string]bool{}
	for _, p := range pkgs {
		parts := strings.Split(p, "/")
		covered := false
		for n := len(parts); n >= 1 && n >= min(2, len(parts)); n-- {
			if a := strings.Join(parts[:n], "/"); listed[a] {
				covered, used[a] = true, true
				break
			}
		}
		if !covered {
			probs = append(probs, fmt.Sprintf("package %s: not in the table (want a row for %s)", p, strings.Join(parts[:min(2, len(parts))], "/")))
		}
	}
	for r := range listed {
		if !used[r] {
			probs = append(probs, fmt.Sprintf("row %q: no package there (moved or removed?)", r))
		}
	}
	sort.Strings(probs)
	return probs
}

// TestREADMEPackages holds README.md's package table to the tree, so it
// cannot go stale as packages move.
func TestREADMEPackages(t *testing.T) {
	// The rule itself, on a made-up tree.
	probs := checkPackageTable(t.TempDir(),
		[]string{"a", "a/b", "c/d", "gone", "nodir/"},
		[]string{"a", "a/b", "a/b/c/d", "c/d/e", "x/y/z", "a/k"})
	require.Equal(t, []string{
		"package a/k: not in the table (want a row for a/k)",
		"package x/y/z: not in the table (want a row for x/y)",
		`row "gone": no package there (moved or removed?)`,
		`row "nodir/": no such directory`,
	}, probs)
	require.Equal(t, []string{"core/a", "core/b"}, expandBraces("core/{a, b}"))

	root := moduleRoot(t)
	rows, err := readmePackageRows(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	for _, p := range checkPackageTable(root, rows, packageDirs(t, root)) {
		t.Errorf("README.md's package table: %s", p)
	}
	if t.Failed() {
		t.Log("the tree's package directories two levels deep, per module: " +
			"for m in $(git ls-files '*go.mod'); do (cd $(dirname $m) && go list -f '{{.Dir}}' ./...); done | sed \"s|^$PWD/||\" | cut -d/ -f1-2 | sort -u")
	}
}

// Front-door budgets (issue 26): README.md is a front door, not the manual
// (it had grown to 57 KB), and RATIONALE.md holds decisions, not run logs
// (it had grown to 833 lines); what does not fit goes to docs/.
const (
	readmeMaxBytes    = 12 << 10
	rationaleMaxLines = 420 // "under ~400", with room for one record
)

// TestDocBudgets holds README.md and RATIONALE.md to their budgets.
func TestDocBudgets(t *testing.T) {
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	if len(readme) > readmeMaxBytes {
		t.Errorf("README.md is %d bytes, over its %d: move detail to docs/*.md and link it", len(readme), readmeMaxBytes)
	}
	rationale, err := os.ReadFile(filepath.Join(root, "RATIONALE.md"))
	require.NoError(t, err)
	n := strings.Count(string(rationale), "\n")
	if n > rationaleMaxLines {
		t.Errorf("RATIONALE.md is %d lines, over its %d: keep what, why, the figure and the command; move the rest to docs/internals.md or docs/performance.md", n, rationaleMaxLines)
	}
}

// TestDocLinks: every relative link of README.md, RATIONALE.md and
// docs/*.md names a file that exists, and its #anchor a heading there
// (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens).
func TestDocLinks(t *testing.T) {
	require.Equal(t, "the-device-in-its-own-process-devicerunner-devicerunnermd",
		anchorOf("The device in its own process (device/runner, device/RUNNER.md)"))
	require.Equal(t, "7-logs-metrics-traces", anchorOf("7. Logs, metrics, traces"))

	root := moduleRoot(t)
	link := regexp.MustCompile(`\]\(([^)\s]*)\)`)
	for _, name := range append(docFiles(t, root), "RATIONALE.md") {
		raw, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		for i, l := range strings.Split(string(raw), "\n") {
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := filepath.Join(root, name)
				if file != "" {
					path = filepath.Join(root, filepath.Dir(name), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: link %s: %v", name, i+1, target, err)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !mdAnchors(t, path)[anchor] {
					t.Errorf("%s:%d: link %s: no heading with that anchor in %s", name, i+1, target, file)
				}
			}
		}
	}
}

// TestDocPackagePaths: every ./path the docs name in a command (`go test
// ./device/cpu`, `go run ./internal/benchmodel/cmd/benchmodel`) is a
// directory of the checkout (or of the tools module, for commands run
// there after `cd tools`), so a package that moves cannot leave a dead
// command behind in a table cell or a sentence.
func TestDocPackagePaths(t *testing.T) {
	ref := regexp.MustCompile("(?:^|[\\s`(])\\./([A-Za-z0-9_.\\-/]+)")
	root := moduleRoot(t)
	for _, name := range append(docFiles(t, root), "RATIONALE.md") {
		raw, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		for i, l := range strings.Split(string(raw), "\n") {
			for _, m := range ref.FindAllStringSubmatch(l, -1) {
				rel := strings.TrimRight(strings.TrimSuffix(m[1], "..."), "/.")
				if rel == "" {
					continue // ./...
				}
				if !isDir(filepath.Join(root, rel)) && !isDir(filepath.Join(root, "tools", rel)) {
					t.Errorf("%s:%d: ./%s: no such directory in the checkout (moved? update the command)", name, i+1, m[1])
				}
			}
		}
	}
}

// isDir reports whether path is a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// anchorOf is GitHub's anchor of a heading.
func anchorOf(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdAnchors is the set of heading anchors of a Markdown file (headings in
// fenced blocks are not headings; a repeated one gets -1, -2, ...).
func mdAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	out, seen := map[string]bool{}, map[string]int{}
	inside := false
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inside = !inside
			continue
		}
		if inside || !strings.HasPrefix(l, "#") {
			continue
		}
		a := anchorOf(strings.TrimLeft(l, "#"))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
