package app_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
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
	g := &gateway{app: a, http: srv, logs: &syncBuffer{}}

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
