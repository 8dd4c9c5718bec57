package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func init() {
	fakeServers["flaky"] = runFlaky
	fakeServers["stubborn"] = runStubborn
	fakeServers["sleeper"] = runSleeper
}

// newFlakyServer is the basic server with tools that fail on request:
//   - fail returns a protocol error (it counts against the error rate);
//   - tool_error returns a result with isError;
//   - wait_file blocks until the file named by its "path" argument exists
//     (or the call is cancelled), so a test decides when calls end.
func newFlakyServer() *mcp.Server {
	s := newBasicServer()
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("internal failure")
	})
	s.AddTool(&mcp.Tool{Name: "tool_error", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not today"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "wait_file", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Path string }
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := os.Stat(args.Path); err == nil {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-tick.C:
			}
		}
	})
	return s
}

func runFlaky() {
	if err := newFlakyServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// runStubborn is a badly behaved server: it ignores SIGTERM, outlives its
// stdin, and has a child of its own (in its process group) that does the
// same. It prints the child's pid to stderr.
func runStubborn() {
	signal.Ignore(syscall.SIGTERM)
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), serverEnv+"=sleeper")
	child.Stderr = os.Stderr // holds the gateway's stderr pipe, as daemons do
	if err := child.Start(); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "grandchild pid %d\n", child.Process.Pid)
	_ = newBasicServer().Run(context.Background(), &mcp.StdioTransport{})
	for { // stdin closed: a good server would exit now
		time.Sleep(time.Hour)
	}
}

// runSleeper ignores SIGTERM and never exits by itself.
func runSleeper() {
	signal.Ignore(syscall.SIGTERM)
	for {
		time.Sleep(time.Hour)
	}
}

// grandchildPID reads the pid runStubborn printed.
func grandchildPID(t *testing.T, lines []string) int {
	t.Helper()
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "grandchild pid "); ok {
			pid, err := strconv.Atoi(rest)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	return 0
}

// groupAlive reports whether any process of group pgid is still running. A
// zombie (dead, not yet reaped by its new parent, which in a container may
// be an init that never reaps) does not count. Without /proc, kill(-pgid, 0)
// decides.
func groupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		state, pgrp, ok := procStat(e.Name())
		if ok && pgrp == pgid && state != "Z" {
			return true
		}
	}
	return false
}

// procAlive is groupAlive for one process.
func procAlive(pid int) bool {
	if _, err := os.Stat("/proc"); err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	state, _, ok := procStat(strconv.Itoa(pid))
	return ok && state != "Z"
}

// procStat reads the state and process group of /proc/<pid>/stat.
func procStat(pid string) (state string, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", 0, false
	}
	// "pid (comm) state ppid pgrp ...": comm may contain spaces and parens.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	return f[0], pgrp, err == nil
}
