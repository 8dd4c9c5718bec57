package app_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
)

// TestHotReload is B6: adding, removing and changing servers in the file is
// applied; an untouched server keeps its pid; a client session stays open
// across the reload and receives list_changed; an invalid file is rejected
// and the running config stays.
func TestHotReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchboard.yaml")
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("servers:" + demoServer("keep") + demoServer("drop") + demoServer("change"))
	cfg, err := config.Load(path, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Settings.Store = filepath.Join(dir, "sb.db")
	a, err := app.New(t.Context(), cfg, &app.Options{SelfExecutable: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	a.StartAndWait()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	g := &gateway{app: a, http: srv, logs: &logtest.Buffer{}}

	changed := make(chan struct{}, 64)
	c := mcp.NewClient(&mcp.Implementation{Name: "watcher", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	keepPID := g.serverByName(t, "keep")["pid"]
	changePID := g.serverByName(t, "change")["pid"]

	// An invalid file is rejected; nothing changes.
	write("servers:\n  broken:\n    transport: smoke-signals\n")
	if err := a.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), "switchboard.yaml:3") {
		t.Errorf("reload of an invalid file: %v, want its error with file:line", err)
	}
	if g.serverByName(t, "drop")["status"] != "CONNECTED" {
		t.Error("an invalid reload changed the running servers")
	}

	// Drop one, change one, add one, keep one.
	write("servers:" + demoServer("keep") + demoServer("change") + "    description: changed\n" + demoServer("added"))
	if err := a.Reload(t.Context()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	waitFor(t, "added and change to connect", func() bool {
		return g.serverByName(t, "added")["status"] == "CONNECTED" && g.serverByName(t, "change")["status"] == "CONNECTED"
	})
	if code, _ := g.rest(t, "GET", "/api/v1/aggregator/servers/drop", nil); code != 404 {
		t.Errorf("dropped server still listed: %d", code)
	}
	if pid := g.serverByName(t, "keep")["pid"]; pid != keepPID {
		t.Errorf("untouched server restarted: pid %v → %v", keepPID, pid)
	}
	if s := g.serverByName(t, "change"); s["pid"] == changePID || s["description"] != "changed" {
		t.Errorf("changed server not restarted with its new definition: %v", s)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no list_changed after the reload")
	}
	waitFor(t, "tools/list to follow the reload", func() bool {
		tools := toolNames(t, cs)
		return tools["added.echo"] != nil && tools["drop.echo"] == nil && tools["keep.echo"] != nil
	})
	if text, _ := callText(t, cs, "keep.echo", map[string]any{"text": "same session"}); text != "same session" {
		t.Errorf("keep.echo after reload = %q", text)
	}

	// The watcher picks up a change of the file by itself.
	wctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { a.WatchConfig(wctx, 50*time.Millisecond); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	time.Sleep(100 * time.Millisecond) // let it take its first look
	write("servers:" + demoServer("keep") + demoServer("change") + "    description: changed\n")
	waitFor(t, "the watcher to remove added", func() bool {
		code, _ := g.rest(t, "GET", "/api/v1/aggregator/servers/added", nil)
		return code == 404
	})
}

// TestReloadAllOrNothing: a reload that fails validation, or that brings a
// server that cannot start, leaves the running gateway exactly as it was:
// the same servers with the same definitions and processes, and the same
// client sessions. A reload that changes a setting only a restart applies
// says which, by name.
func TestReloadAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "switchboard.yaml")
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := "servers:" + demoServer("keep") + demoServer("change")
	write(base)
	cfg, err := config.Load(path, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Settings.Store = filepath.Join(dir, "sb.db")
	logs := &logtest.Buffer{}
	a, err := app.New(t.Context(), cfg, &app.Options{SelfExecutable: os.Args[0], Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	a.StartAndWait()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	g := &gateway{app: a, http: srv, logs: logs}
	c := mcp.NewClient(&mcp.Implementation{Name: "watcher", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	type state struct {
		names           []string
		keepPID         any
		changePID       any
		changeDesc      any
		changeStatus    any
		keepConnectedAt any
	}
	snapshot := func() state {
		_, body := g.rest(t, "GET", "/api/v1/aggregator/servers", nil)
		var names []string
		for _, s := range body["servers"].([]any) {
			names = append(names, s.(map[string]any)["name"].(string))
		}
		k, ch := g.serverByName(t, "keep"), g.serverByName(t, "change")
		return state{names: names, keepPID: k["pid"], changePID: ch["pid"], changeDesc: ch["description"],
			changeStatus: ch["status"], keepConnectedAt: k["connected_at"]}
	}
	before := snapshot()
	if before.keepPID == nil || before.changePID == nil {
		t.Fatalf("servers not running: %+v", before)
	}
	unchanged := func(step string) {
		t.Helper()
		if after := snapshot(); !reflect.DeepEqual(after, before) {
			t.Errorf("%s: the running gateway changed:\n before %+v\n after  %+v", step, before, after)
		}
		if text, _ := callText(t, cs, "change.echo", map[string]any{"text": step}); text != step {
			t.Errorf("%s: the client session no longer works: change.echo = %q", step, text)
		}
	}

	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"invalid file", base + "  broken:\n    transport: smoke-signals\n", "switchboard.yaml:"},
		{"a new server that cannot start", base + "    description: changed\n" + `
  broken:
    transport: stdio
    command: /nonexistent/switchboard-no-such-server
    auto_start: true
`, `"broken"`},
		{"a changed server that cannot start", "servers:" + demoServer("keep") + `
  change:
    transport: stdio
    command: /nonexistent/switchboard-no-such-server
    auto_start: true
`, `"change"`},
	} {
		write(tc.yaml)
		err := a.Reload(t.Context())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: reload = %v, want an error naming %s", tc.name, err, tc.want)
		}
		unchanged(tc.name)
	}
	if code, _ := g.rest(t, "GET", "/api/v1/aggregator/servers/broken", nil); code != 404 {
		t.Errorf("a server of a failed reload is registered: %d", code)
	}

	// A setting only a restart applies is named; the servers are reloaded.
	write(base + "settings:\n  rate_limit_per_second: 7\n")
	if err := a.Reload(t.Context()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !strings.Contains(logs.String(), "settings.rate_limit_per_second") {
		t.Errorf("the reload log does not name the setting that needs a restart:\n%s", logs.String())
	}
	unchanged("settings change")
}
