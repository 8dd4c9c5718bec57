package upstream_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/fixture"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// TestBoundedRepliesStdio runs the conformance fixture as a stdio child
// and sends it calls whose replies the gateway cannot pass on (20 MiB, over
// the default max_result_bytes of 16 MiB; a line that is not JSON-RPC; a
// reply cut short), each with four calls beside it. Only the call the bad
// reply answers fails: the others answer, the process is not restarted,
// and no failure is held against the server.
func TestBoundedRepliesStdio(t *testing.T) {
	rec := newRecorder()
	logs := &logtest.Buffer{}
	m := newManager(t, rec, logs, nil)
	ctx := t.Context()
	if err := m.Add(fakeStdio("fx", "fixture")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "fx"); err != nil {
		t.Fatal(err)
	}
	st, _ := m.Status("fx")
	pid := st.PID

	const side = 256 << 10 // the replies beside the bad one, well within the limit
	tests := []struct {
		name  string
		tool  string
		args  map[string]any
		check func(res *mcp.CallToolResult, err error) error
		// counted: the failure counts against the server's error rate
		// (a broken reply does; one too large for the gateway does not).
		counted bool
	}{
		{"a 20 MiB reply", fixture.ToolLargeResult, map[string]any{"bytes": 20 << 20}, func(_ *mcp.CallToolResult, err error) error {
			var tl *upstream.ResultTooLargeError
			if !errors.As(err, &tl) || tl.Limit != config.DefaultMaxResultBytes || tl.Size <= 20<<20 {
				return fmt.Errorf("err = %v, want a ResultTooLargeError over 20 MiB", err)
			}
			want := fmt.Sprintf(`calling tool "test_large_result" on server "fx": result too large: upstream reply of %d bytes exceeds max_result_bytes (16777216)`, tl.Size)
			if err.Error() != want {
				return fmt.Errorf("message %q, want %q", err, want)
			}
			return nil
		}, false},
		{"a stray line on stdout", fixture.ToolStdoutGarbage, map[string]any{}, func(res *mcp.CallToolResult, err error) error {
			if err != nil || res.IsError || textOf(t, res) != "ok" {
				return fmt.Errorf("got %+v, %v; want ok (the line is dropped)", res, err)
			}
			return nil
		}, false},
		{"a reply cut short", fixture.ToolStdoutGarbage, map[string]any{"corrupt_reply": true}, func(_ *mcp.CallToolResult, err error) error {
			if err == nil || !strings.Contains(err.Error(), "malformed reply") || upstream.IsResultTooLarge(err) {
				return fmt.Errorf("err = %v, want a malformed reply", err)
			}
			return nil
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 5)
			call := func(name string, args map[string]any, check func(*mcp.CallToolResult, error) error) {
				defer wg.Done()
				res, err := m.CallTool(ctx, "fx", &mcp.CallToolParams{Name: name, Arguments: args})
				errs <- check(res, err)
			}
			wg.Add(5)
			for range 4 {
				go call(fixture.ToolLargeResult, map[string]any{"bytes": side}, func(res *mcp.CallToolResult, err error) error {
					if err != nil || len(textOf(t, res)) != side {
						return fmt.Errorf("a call beside it failed: %v", err)
					}
					return nil
				})
			}
			go call(tt.tool, tt.args, tt.check)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			// The same connection goes on serving.
			if res, err := m.CallTool(ctx, "fx", &mcp.CallToolParams{Name: fixture.ToolSimpleText}); err != nil || res.IsError {
				t.Errorf("a call after it: %+v, %v", res, err)
			}
			st, _ := m.Status("fx")
			if st.PID != pid || st.Restarts != 0 || st.State != upstream.StateConnected || (st.Health.ErrorRate > 0) != tt.counted {
				t.Errorf("status: pid %d (was %d), %d restarts, %s, error rate %v; want the same process, CONNECTED, a failure counted: %v",
					st.PID, pid, st.Restarts, st.State, st.Health.ErrorRate, tt.counted)
			}
		})
	}
	if got := logs.String(); !strings.Contains(got, "level=WARN") || strings.Contains(got, strings.Repeat("x", 100)) {
		t.Errorf("want warnings about the replaced replies without their contents, got:\n%.2000s", got)
	}
	if steps := rec.steps("fx"); len(steps) != 2 {
		t.Errorf("transitions %q, want only the connect", steps)
	}
}
