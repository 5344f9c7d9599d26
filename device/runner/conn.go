//go:build linux

package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gr00tgw/gr00tgw/device"
)

// conn is one runner process and its connection: spawned, handshaken,
// pinged; dead is closed once the process has been reaped (its mappings are
// gone, so no stale write into a segment can follow).
type conn struct {
	cmd   *exec.Cmd
	s     *sock
	wmu   sync.Mutex
	hello HelloBody
	pid   int

	mu       sync.Mutex
	pending  map[uint64]chan msg
	attached map[uint32]bool
	cause    string // why it went away: set once
	kind     string // cause's metric label ("" for an orderly close)
	closing  bool   // an orderly close is under way: its exit is not a failure

	nextID atomic.Uint64
	dead   chan struct{}
	stderr *tail

	// pmu orders signals to the process group (kill) with the leader's
	// reaping (wait): once reaped is set, its pid (and so its group id)
	// may be reused, and -pid is never signalled again.
	pmu    sync.Mutex
	reaped bool
}

// tail keeps the last lines written to it and forwards everything to w.
type tail struct {
	mu    sync.Mutex
	w     io.Writer
	lines []string
	part  []byte
	keep  int
}

// maxTailLine bounds one kept stderr line (bytes; longer ones are cut).
const maxTailLine = 1024

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w != nil {
		_, _ = t.w.Write(p)
	}
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		line := t.part[:i]
		if len(line) > maxTailLine { // a runner's line is data for /info and logs
			line = append(line[:maxTailLine:maxTailLine], "…"...)
		}
		t.lines = append(t.lines, string(line))
		t.part = t.part[i+1:]
		if len(t.lines) > t.keep {
			t.lines = t.lines[len(t.lines)-t.keep:]
		}
	}
	if len(t.part) > 4096 {
		t.part = t.part[:0]
	}
	return len(p), nil
}

func (t *tail) last() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.lines...)
	if len(t.part) > 0 {
		out = append(out, string(t.part[:min(len(t.part), maxTailLine)]))
	}
	return out
}

// spawn starts argv with the runner end of a socket pair as descriptor 3
// and reads its HELLO within timeout.
func spawn(ctx context.Context, argv, env []string, stderr io.Writer, timeout time.Duration) (*conn, error) {
	if len(argv) == 0 {
		return nil, errors.New("runner: no runner command")
	}
	cc, rf, err := SocketPair()
	if err != nil {
		return nil, err
	}
	c := &conn{s: newSock(cc), pending: map[uint64]chan msg{}, attached: map[uint32]bool{},
		dead: make(chan struct{}), stderr: &tail{w: stderr, keep: 20}}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append([]string(nil), env...), "GR00TGW_RUNNER_FD=3")
	cmd.ExtraFiles = []*os.File{rf}
	cmd.Stdout = c.stderr
	cmd.Stderr = c.stderr
	// The runner dies with the gateway (and exits on EOF of its socket
	// besides, since Pdeathsig follows the thread that forked it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	// Wait returns this long after the runner exited even if a process it
	// left behind still holds its stdout or stderr.
	cmd.WaitDelay = time.Second
	err = cmd.Start()
	_ = rf.Close()
	if err != nil {
		_ = cc.Close()
		return nil, fmt.Errorf("runner: start %s: %w", argv[0], err)
	}
	c.cmd, c.pid = cmd, cmd.Process.Pid
	go c.wait()

	type helloOrErr struct {
		m   msg
		err error
	}
	hc := make(chan helloOrErr, 1)
	go func() {
		m, err := c.s.recv(time.Time{})
		hc <- helloOrErr{m, err}
	}()
	got := false // the HELLO reader has delivered
	fail := func(kind string, err error) (*conn, error) {
		c.kill(kind, err.Error())
		<-c.dead
		if !got {
			<-hc
		}
		return nil, c.startErr(err)
	}
	var h helloOrErr
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case h = <-hc:
		got = true
	case <-t.C:
		return fail("start", fmt.Errorf("runner: no HELLO within runner_start_timeout %v", timeout))
	case <-ctx.Done():
		return fail("start", ctx.Err())
	case <-c.dead:
		<-hc
		return nil, c.startErr(errors.New("runner: exited before HELLO"))
	}
	if h.err != nil {
		select { // an exit is a better cause than the EOF it caused
		case <-c.dead:
			return nil, c.startErr(errors.New("runner: exited before HELLO"))
		case <-time.After(200 * time.Millisecond):
		}
		return fail("protocol", fmt.Errorf("runner: reading HELLO: %w", h.err))
	}
	closeFD(h.m.fd)
	if h.m.typ != MsgHello {
		return fail("protocol", fmt.Errorf("%w: first message has type %d, want HELLO (%d)", errProtocol, h.m.typ, MsgHello))
	}
	if err := decode(h.m, &c.hello); err != nil {
		return fail("protocol", err)
	}
	if c.hello.Protocol != ProtocolVersion {
		return fail("protocol", fmt.Errorf("%w: runner speaks protocol version %d, want %d", errProtocol, c.hello.Protocol, ProtocolVersion))
	}
	if err := c.hello.Layout.Validate(); err != nil {
		return fail("protocol", fmt.Errorf("%w: HELLO %w", errProtocol, err))
	}
	go c.read()
	return c, nil
}

// startErr is a failed start with the runner's cause and last stderr lines.
func (c *conn) startErr(err error) error {
	c.mu.Lock()
	cause := c.cause
	c.mu.Unlock()
	msg := err.Error()
	if cause != "" && cause != msg {
		msg += " (" + cause + ")"
	}
	lines := c.stderr.last()
	if len(lines) > 0 {
		n := min(len(lines), 5)
		msg += "; last stderr: " + fmt.Sprint(lines[len(lines)-n:])
	}
	if errors.Is(err, errProtocol) {
		return &startError{fmt.Errorf("%w [%s]", errProtocol, msg), lines}
	}
	return &startError{errors.New(msg), lines}
}

// startError is a failed start and the runner's last stderr lines.
type startError struct {
	err    error
	stderr []string
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// wait reaps the process and records why it exited. When the leader has
// exited (a zombie: its pid cannot be reused yet) what it left in its
// process group is killed first: a child that inherited the socket, the
// stderr pipe or a segment mapping must not outlive it, since the segment
// is reused for the next call.
func (c *conn) wait() {
	waitExited(c.pid)
	c.pmu.Lock()
	_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	c.reaped = true
	c.pmu.Unlock()
	err := c.cmd.Wait()
	c.mu.Lock()
	if c.cause == "" {
		c.kind, c.cause = exitCause(c.cmd.ProcessState, err)
		if c.closing && c.kind == "exit" && c.cmd.ProcessState.ExitCode() == 0 {
			c.kind = ""
		}
	}
	pend := c.pending
	c.pending = map[uint64]chan msg{}
	c.mu.Unlock()
	_ = c.s.c.Close()
	close(c.dead)
	_ = pend // callers select on dead
}

// exitCause names a process exit: "exit status 3" (kind exit) or "signal
// killed" (kind signal).
func exitCause(ps *os.ProcessState, err error) (kind, cause string) {
	if ps == nil {
		return "exit", fmt.Sprintf("wait: %v", err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "signal", "signal " + ws.Signal().String()
	}
	return "exit", fmt.Sprintf("exit status %d", ps.ExitCode())
}

// kill records cause (unless one is recorded) and SIGKILLs the process.
func (c *conn) kill(kind, cause string) {
	c.mu.Lock()
	if c.cause == "" {
		c.kind, c.cause = kind, cause
	}
	c.mu.Unlock()
	if c.cmd != nil && c.cmd.Process != nil {
		// The runner leads its own process group: kill what it started
		// too (a wrapper script's children would keep its stderr open).
		// Not once the leader is reaped: its pid may belong to another
		// process group by then (wait has killed the group already).
		c.pmu.Lock()
		if !c.reaped {
			_ = syscall.Kill(-c.pid, syscall.SIGKILL)
		}
		c.pmu.Unlock()
		_ = c.cmd.Process.Kill()
	}
}

// waitExited blocks until process pid has exited, without reaping it
// (waitid WNOWAIT); it returns early on an error (ECHILD).
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != syscall.EINTR {
			return
		}
	}
}

// read delivers replies to their callers; a malformed message or a closed
// socket kills the runner (protocol).
func (c *conn) read() {
	for {
		m, err := c.s.recv(time.Time{})
		if err != nil {
			select {
			case <-c.dead:
				return
			default:
			}
			if !errors.Is(err, errProtocol) {
				// EOF, reset: the process is exiting. Let wait record
				// how, unless it lingers with its socket gone.
				select {
				case <-c.dead:
				case <-time.After(time.Second):
					c.kill("protocol", "runner closed its socket: "+err.Error())
				}
				return
			}
			c.kill("protocol", err.Error())
			return
		}
		closeFD(m.fd)
		c.mu.Lock()
		ch := c.pending[m.id]
		delete(c.pending, m.id)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		} else if m.typ != MsgError && m.typ != MsgResult {
			// A reply to nobody that is not a late answer to a call
			// whose caller left.
			c.kill("protocol", fmt.Sprintf("%v: unsolicited message type %d id %d", errProtocol, m.typ, m.id))
			return
		}
	}
}

// send writes one message registered for its reply (when reply is true).
func (c *conn) send(typ uint32, body any, fd int, reply bool) (uint64, chan msg, error) {
	id := c.nextID.Add(1)
	var ch chan msg
	if reply {
		ch = make(chan msg, 1)
		c.mu.Lock()
		if c.cause != "" {
			c.mu.Unlock()
			return 0, nil, c.gone()
		}
		c.pending[id] = ch
		c.mu.Unlock()
	}
	c.wmu.Lock()
	err := c.s.send(typ, id, body, fd)
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		select {
		case <-c.dead:
			return 0, nil, c.gone()
		default:
		}
		return 0, nil, fmt.Errorf("%w: runner[pid %d]: send: %w", device.ErrRestarting, c.pid, err)
	}
	return id, ch, nil
}

func (c *conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// gone is the error of a call whose runner went away.
func (c *conn) gone() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cause := c.cause
	if cause == "" {
		cause = "exited"
	}
	return fmt.Errorf("%w: runner[pid %d] went away: %s", device.ErrRestarting, c.pid, cause)
}

// call sends a message and waits for its reply within timeout (0: none) or
// the runner's death.
func (c *conn) call(typ uint32, body any, fd int, timeout time.Duration) (msg, error) {
	id, ch, err := c.send(typ, body, fd, true)
	if err != nil {
		return msg{}, err
	}
	var tc <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	select {
	case m := <-ch:
		return m, nil
	case <-c.dead:
		return msg{}, c.gone()
	case <-tc:
		c.forget(id)
		return msg{}, errTimeout
	}
}

var errTimeout = errors.New("runner: no reply in time")

// replyErr turns an ERROR reply into an error of its kind.
func replyErr(m msg, what string) error {
	if m.typ != MsgError {
		return fmt.Errorf("%w: %s answered with message type %d", errProtocol, what, m.typ)
	}
	var e ErrorBody
	if err := decode(m, &e); err != nil {
		return err
	}
	switch e.Kind {
	case KindInput:
		return fmt.Errorf("%w: runner: %s: %s", device.ErrInput, what, e.Message)
	case KindCancelled:
		return fmt.Errorf("runner: %s: %w: %s", what, context.Canceled, e.Message)
	case KindProtocol:
		return fmt.Errorf("%w: runner: %s: %s", errProtocol, what, e.Message)
	}
	return fmt.Errorf("runner: %s: device failure: %s", what, e.Message)
}

// attach makes seg known to the runner (once per connection).
func (c *conn) attach(seg *segment, timeout time.Duration) error {
	c.mu.Lock()
	ok := c.attached[seg.id]
	c.mu.Unlock()
	if ok {
		return nil
	}
	m, err := c.call(MsgAttach, AttachBody{Segment: seg.id, Size: len(seg.mem)}, seg.fd, timeout)
	if errors.Is(err, errTimeout) {
		c.kill("hang", fmt.Sprintf("hang: no ATTACHED within %v", timeout))
		<-c.dead
		return c.gone()
	}
	if err != nil {
		return err
	}
	if m.typ != MsgAttached {
		err := replyErr(m, fmt.Sprintf("attach segment[%d]", seg.id))
		if errors.Is(err, errProtocol) {
			// Killed and reaped; the caller sees ErrRestarting.
			c.kill("protocol", err.Error())
			<-c.dead
			return fmt.Errorf("%w (%w)", err, c.gone())
		}
		return err
	}
	c.mu.Lock()
	c.attached[seg.id] = true
	c.mu.Unlock()
	return nil
}

// predict runs one PREDICT. When ctx ends first it sends CANCEL and waits
// grace for the answer; past that the runner is killed (hang) and reaped
// before predict returns, so that it never writes into seg afterwards.
func (c *conn) predict(ctx context.Context, seg *segment, body *PredictBody, grace time.Duration) (*ResultBody, error) {
	if dl, ok := ctx.Deadline(); ok {
		// Rounded up: a runner that honours it stops no earlier than
		// the caller's own deadline.
		body.TimeoutMS = max(int64((time.Until(dl)+time.Millisecond-1)/time.Millisecond), 1)
	}
	id, ch, err := c.send(MsgPredict, body, -1, true)
	if err != nil {
		return nil, err
	}
	var m msg
	select {
	case m = <-ch:
	case <-c.dead:
		return nil, c.gone()
	case <-ctx.Done():
		// CANCEL carries the PREDICT's id.
		c.wmu.Lock()
		_ = c.s.send(MsgCancel, id, nil, -1)
		c.wmu.Unlock()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-ch:
			return nil, ctx.Err()
		case <-c.dead:
			return nil, fmt.Errorf("%w (%w)", ctx.Err(), c.gone())
		case <-t.C:
			c.kill("hang", fmt.Sprintf("hang: predict not stopped within runner_call_grace %v after its deadline", grace))
			<-c.dead
			return nil, fmt.Errorf("%w (%w)", ctx.Err(), c.gone())
		}
	}
	if m.typ != MsgResult {
		err := replyErr(m, "predict")
		if errors.Is(err, errProtocol) {
			c.kill("protocol", err.Error())
			<-c.dead
			return nil, fmt.Errorf("%w (%w)", err, c.gone())
		}
		if errors.Is(err, context.Canceled) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// The runner stopped the call at its timeout_ms (a clock a
			// hair ahead of ours): a deadline, not a shutdown, unless
			// the runner is being closed.
			c.mu.Lock()
			closing := c.closing
			c.mu.Unlock()
			if !closing {
				return nil, fmt.Errorf("runner: predict: %w (the runner stopped it at timeout_ms %d)", context.DeadlineExceeded, body.TimeoutMS)
			}
		}
		return nil, err
	}
	var r ResultBody
	if err := decode(m, &r); err != nil {
		c.kill("protocol", err.Error())
		<-c.dead
		return nil, fmt.Errorf("%w (%w)", err, c.gone())
	}
	return &r, nil
}

// ping sends PING and kills the runner when no PONG comes within timeout.
func (c *conn) ping(timeout time.Duration) {
	m, err := c.call(MsgPing, nil, -1, timeout)
	switch {
	case errors.Is(err, errTimeout):
		c.kill("hang", fmt.Sprintf("hang: no PONG within runner_ping_timeout %v", timeout))
	case err == nil && m.typ != MsgPong:
		c.kill("protocol", fmt.Sprintf("%v: PING answered with message type %d, want PONG (%d)", errProtocol, m.typ, MsgPong))
	}
}

// close asks the runner to exit (CLOSE → CLOSED) and kills it when it has
// not exited within timeout of CLOSE (one deadline for CLOSED and exit).
func (c *conn) close(timeout time.Duration) {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	deadline := time.Now().Add(timeout)
	_, _ = c.call(MsgClose, nil, -1, timeout)
	select {
	case <-c.dead:
	case <-time.After(time.Until(deadline)):
		c.kill("hang", "did not exit after CLOSE")
		<-c.dead
	}
}

// status returns the recorded cause.
func (c *conn) causeOf() (kind, cause string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kind, c.cause
}
