package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// stopTimeout is how long a server gets to exit after SIGTERM before its
// process group is killed.
const stopTimeout = 10 * time.Second

// readyTimeout bounds how long a server may take to start listening (and
// the gateway to connect its upstream).
const readyTimeout = 60 * time.Second

// buildBinary compiles ./cmd/switchboard of the module containing the
// working directory into dir, so the benchmark measures the code in the tree
// rather than whatever switchboard is on PATH.
func buildBinary(ctx context.Context, dir string, stderr io.Writer) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("locating the module (go env GOMOD): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the switchboard module: run from the repository or pass -bin")
	}
	bin := filepath.Join(dir, "switchboard")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/switchboard")
	cmd.Dir = filepath.Dir(gomod)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building switchboard: %w", err)
	}
	return bin, nil
}

// procs owns every child process of the harness: whatever happens (an
// error, Ctrl-C), closeAll stops each of them and its process group.
type procs struct {
	logger  *slog.Logger
	verbose io.Writer // nil = keep stderr only for error messages

	mu   sync.Mutex
	live []*proc
}

// proc is one running server.
type proc struct {
	name string
	cmd  *exec.Cmd
	tail *tailBuffer
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
}

// start runs bin with args in its own process group.
func (ps *procs) start(name, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, tail: &tailBuffer{max: 16 << 10}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdin = nil // the demo over HTTP and the gateway read nothing from stdin
	var w io.Writer = p.tail
	if ps.verbose != nil {
		w = io.MultiWriter(p.tail, &prefixWriter{prefix: name + ": ", w: ps.verbose})
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	// Output is copied through pipes; should the server leave a descendant
	// holding them, Wait still returns this long after the server exits.
	p.cmd.WaitDelay = time.Second
	setProcAttr(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { // owned by p: ends when the process exits, which stop ensures
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.live = append(ps.live, p)
	ps.mu.Unlock()
	ps.logger.Debug("started", "server", name, "pid", p.cmd.Process.Pid)
	return p, nil
}

// stop ends one process: SIGTERM to its group, then SIGKILL after
// stopTimeout. The group goes too, so nothing it spawned in it is left.
func (ps *procs) stop(p *proc) {
	ps.mu.Lock()
	for i, q := range ps.live {
		if q == p {
			ps.live = append(ps.live[:i], ps.live[i+1:]...)
			break
		}
	}
	ps.mu.Unlock()
	terminate(p.cmd)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		ps.logger.Warn("server did not stop in time; killing it", "server", p.name)
	}
	kill(p.cmd) // also whatever is left of its group
	<-p.done
}

// closeAll stops every process still running, most recent first (the
// gateway before its upstream).
func (ps *procs) closeAll() {
	for {
		ps.mu.Lock()
		n := len(ps.live)
		var p *proc
		if n > 0 {
			p = ps.live[n-1]
		}
		ps.mu.Unlock()
		if p == nil {
			return
		}
		ps.stop(p)
	}
}

// exited returns an error if p has already ended, with what it wrote.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited early (%v); its output ends with:\n%s", p.name, p.err, p.tail.String())
	default:
		return nil
	}
}

// waitFor polls check until it succeeds, p exits, or time runs out.
func waitFor(ctx context.Context, p *proc, what string, check func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if check(ctx) {
			return nil
		}
		if err := p.exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s %s: %w; its output ends with:\n%s", p.name, what, ctx.Err(), p.tail.String())
		case <-tick.C:
		}
	}
}

// listening reports whether something accepts TCP connections at addr.
func listening(addr string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
}

// httpOK reports whether GET url answers 200.
func httpOK(url string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago. The port is released before the server binds it; on a loopback-only
// benchmark machine the race is harmless, and a lost race shows up as the
// server exiting early, which waitFor reports.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	return addr, nil
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}

// prefixWriter prefixes each line with the server's name.
type prefixWriter struct {
	mu     sync.Mutex
	prefix string
	w      io.Writer
	line   []byte
}

func (pw *prefixWriter) Write(p []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.line = append(pw.line, p...)
	for {
		i := bytes.IndexByte(pw.line, '\n')
		if i < 0 {
			break
		}
		if _, err := fmt.Fprintf(pw.w, "%s%s\n", pw.prefix, pw.line[:i]); err != nil {
			return 0, err
		}
		pw.line = append(pw.line[:0], pw.line[i+1:]...)
	}
	return len(p), nil
}
