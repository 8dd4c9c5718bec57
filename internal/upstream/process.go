package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// killWait bounds the wait for a SIGKILLed process to be reaped. Only a
// process stuck in the kernel (uninterruptible sleep) takes longer; we stop
// waiting rather than hang the supervisor.
const killWait = 5 * time.Second

// notFoundError is a stdio command that does not exist: a configuration
// problem, reported as it is and never retried automatically.
type notFoundError struct{ command string }

func (e *notFoundError) Error() string { return "command not found: " + e.command }

// preflight checks that the command of cmd exists, as exec would look it up,
// so that a missing program (npx without Node.js) is reported in one plain
// line instead of as a failed fork/exec. configured is the command as the
// operator wrote it, which the message names.
func preflight(cmd *exec.Cmd, configured string) error {
	if cmd.Err != nil {
		if errors.Is(cmd.Err, exec.ErrNotFound) {
			return &notFoundError{command: configured}
		}
		return cmd.Err
	}
	if !strings.ContainsRune(cmd.Path, os.PathSeparator) {
		return nil
	}
	path := cmd.Path
	if !filepath.IsAbs(path) && cmd.Dir != "" {
		path = filepath.Join(cmd.Dir, path) // exec resolves a relative path against Dir
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return &notFoundError{command: configured}
	}
	return nil
}

// procTransport runs a stdio server in its own process group and talks to it
// over pipes of our own, so that we, not exec.Cmd.Wait, decide when they
// close: Wait runs as soon as the process starts (to learn of its exit at
// once) and must not close the stdout the session is still reading.
//
// Closing the connection stops the process (see [process.stop]).
//
// Its stdout passes a filter that bounds each message to limit bytes (see
// bound.go), so the SDK's own bound is off.
type procTransport struct {
	cmd      *exec.Cmd
	shutdown time.Duration
	limit    int
	replies  *replyLog
	// started learns how the start went, before Connect returns.
	started func(*process, error)
}

func (t *procTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	p, err := startProcess(t.cmd, t.shutdown)
	if t.started != nil {
		t.started(p, err)
	}
	if err != nil {
		return nil, err
	}
	out := newLineFilter(readHalf{p}, t.limit, t.replies)
	return (&mcp.IOTransport{Reader: out, Writer: p, MaxLineLength: -1}).Connect(ctx)
}

// process is a running stdio server.
type process struct {
	cmd      *exec.Cmd
	pid      int
	stdin    *os.File // our end: write
	stdout   *os.File // our end: read
	shutdown time.Duration
	exited   chan struct{} // closed when Wait returned; cmd.ProcessState is set then

	stopOnce sync.Once
	stopErr  error
}

func startProcess(cmd *exec.Cmd, shutdown time.Duration) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close() // the child has its copies
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, stdin: inW, stdout: outR, shutdown: shutdown, exited: make(chan struct{})}
	// Owned by the process: it returns when the process exits, which stop
	// guarantees.
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(p.exited)
	}()
	return p, nil
}

func (p *process) Read(b []byte) (int, error)  { return p.stdout.Read(b) }
func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close stops the process; the SDK calls it when the session closes.
func (p *process) Close() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

// readHalf is the read side handed to the SDK. Closing it does nothing:
// the connection is closed by closing stdin (the write side), and stdout is
// closed once the process is gone, so the child never writes to a closed
// pipe while it shuts down.
type readHalf struct{ p *process }

func (r readHalf) Read(b []byte) (int, error) { return r.p.Read(b) }
func (readHalf) Close() error                 { return nil }

// stop ends the process within the shutdown timeout, as the MCP spec asks:
// close its stdin; after a fifth of the timeout, SIGTERM its process group
// (with SIGCONT, so a stopped process can act on it); at the timeout,
// SIGKILL the group. Then stdout is closed, which also releases a reader
// blocked by a grandchild that kept the pipe open.
func (p *process) stop() error {
	defer p.stdout.Close()
	start := time.Now()
	p.stdin.Close()
	wait := func(until time.Time) bool {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		select {
		case <-p.exited:
			return true
		case <-t.C:
			return false
		}
	}
	if wait(start.Add(p.shutdown / 5)) {
		return nil
	}
	terminateGroup(p.pid)
	if wait(start.Add(p.shutdown)) {
		return nil
	}
	err := killProcessGroup(p.pid)
	_ = p.cmd.Process.Kill() // where there are no groups; "already finished" otherwise
	if err != nil {
		return fmt.Errorf("killing process group %d: %w", p.pid, err)
	}
	if !wait(time.Now().Add(killWait)) {
		return fmt.Errorf("process %d did not exit after SIGKILL", p.pid)
	}
	return nil
}

// exitState says how the process ended ("exit status 3", "signal: killed"),
// or "" while it runs.
func (p *process) exitState() string {
	select {
	case <-p.exited:
		if ps := p.cmd.ProcessState; ps != nil {
			return ps.String()
		}
	default:
	}
	return ""
}

var _ io.ReadWriteCloser = (*process)(nil)
