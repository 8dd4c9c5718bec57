package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// fakePins pins "v1" of every tool, and approves what it is given.
type fakePins struct {
	approved []string // tool, hash, by
	pinned   catalog.Pin
}

var pinnedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (f *fakePins) Pinned(_ context.Context, t catalog.Tool) (PinRecord, error) {
	return PinRecord{Hash: f.pinned.Hash, Definition: f.pinned.Definition, PinnedAt: pinnedAt, ChangedAt: pinnedAt.Add(time.Hour)}, nil
}

func (f *fakePins) Approve(_ context.Context, t catalog.Tool, hash, by string) (PinRecord, error) {
	cur, _ := t.Pin()
	if hash != "" && hash != cur.Hash {
		return PinRecord{}, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "changed again"}
	}
	f.approved = append(f.approved, t.Name, hash, by)
	return PinRecord{Hash: cur.Hash, Definition: cur.Definition, PinnedAt: pinnedAt, ApprovedBy: by}, nil
}

func TestQuarantineRoutes(t *testing.T) {
	schema := map[string]any{"type": "object"}
	v1 := &mcp.Tool{Name: "rug", Description: "v1", InputSchema: schema}
	v2 := &mcp.Tool{Name: "rug", Description: "v2", InputSchema: schema}
	pinned, err := catalog.PinOf(v1)
	if err != nil {
		t.Fatal(err)
	}
	current, _ := catalog.PinOf(v2)
	cat := catalog.New(nil)
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Tools: []*mcp.Tool{{Name: "echo", InputSchema: schema}, v2},
		Held: map[string]bool{"rug": true}}); err != nil {
		t.Fatal(err)
	}
	pins := &fakePins{pinned: pinned}
	h := New(&fakeServers{}, cat, &fakeCaller{}, &Options{Pins: pins})
	var last []byte
	do := func(id *authz.Identity, method, path, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		rec := httptest.NewRecorder()
		as(h, id).ServeHTTP(rec, req)
		var out map[string]any
		last = rec.Body.Bytes()
		if err := json.Unmarshal(last, &out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec.Code, out
	}

	st, out := do(&adminID, "GET", "/api/v1/tools/quarantined", "")
	if st != 200 {
		t.Fatalf("list: %d %v", st, out)
	}
	var list struct {
		Tools []QuarantinedTool `json:"tools"`
	}
	if err := json.Unmarshal(last, &list); err != nil {
		t.Fatal(err)
	}
	got := list.Tools
	changedAt := pinnedAt.Add(time.Hour)
	want := []QuarantinedTool{{Name: "demo.rug", OriginalName: "rug", ServerID: "id-1", ServerName: "demo", Available: true,
		Pinned:        Definition{Hash: pinned.Hash, Definition: pinned.Definition, PinnedAt: &pinnedAt},
		Current:       Definition{Hash: current.Hash, Definition: current.Definition},
		ChangedFields: []string{"description"}, ChangedAt: &changedAt}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("quarantined (-want +got):\n%s", diff)
	}
	if out["total"] != float64(1) {
		t.Errorf("total = %v", out["total"])
	}

	tests := []struct {
		name, path, body string
		id               *authz.Identity
		status           int
		code             string
	}{
		{"agents may not list", "/api/v1/tools/quarantined", "", &agentA, 403, CodeForbidden},
		{"agents may not approve", "/api/v1/tools/demo.rug/approve", "", &agentA, 403, CodeForbidden},
		{"unknown tool", "/api/v1/tools/demo.nope/approve", "", &adminID, 404, "tool_not_found"},
		{"served tool", "/api/v1/tools/demo.echo/approve", "", &adminID, 409, CodeConflict},
		{"bad body", "/api/v1/tools/demo.rug/approve", `{"hsh":"x"}`, &adminID, 400, CodeBadRequest},
		{"stale hash", "/api/v1/tools/demo.rug/approve", `{"hash":"` + pinned.Hash + `"}`, &adminID, 409, CodeConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			if strings.HasSuffix(tc.path, "quarantined") {
				method = "GET"
			}
			st, out := do(tc.id, method, tc.path, tc.body)
			if st != tc.status || errCode(out) != tc.code {
				t.Errorf("%d %v, want %d %s", st, out, tc.status, tc.code)
			}
		})
	}
	if len(pins.approved) != 0 {
		t.Fatalf("refused approvals reached the pins: %v", pins.approved)
	}

	// Without a body, and with the hash the admin saw; either separator.
	for _, tc := range []struct{ path, body, hash string }{
		{"/api/v1/tools/demo.rug/approve", "", ""},
		{"/api/v1/tools/demo__rug/approve", `{"hash":"` + current.Hash + `"}`, current.Hash},
	} {
		pins.approved = nil
		st, out := do(&adminID, "POST", tc.path, tc.body)
		if st != 200 || out["name"] != "demo.rug" || out["hash"] != current.Hash || out["approved_by"] != "root" || out["server_name"] != "demo" {
			t.Errorf("approve %s: %d %v", tc.path, st, out)
		}
		if diff := cmp.Diff([]string{"demo.rug", tc.hash, "root"}, pins.approved); diff != "" {
			t.Errorf("approval given to the pins (-want +got):\n%s", diff)
		}
	}

	// A gateway without pins says so.
	bare := New(&fakeServers{}, cat, &fakeCaller{}, nil)
	req := httptest.NewRequest("GET", "/api/v1/tools/quarantined", nil)
	rec := httptest.NewRecorder()
	as(bare, &adminID).ServeHTTP(rec, req)
	if rec.Code != http.StatusNotImplemented {
		t.Errorf("without pins: %d %s", rec.Code, rec.Body)
	}
}
