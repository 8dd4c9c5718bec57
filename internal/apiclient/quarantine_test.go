package apiclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// fakePins has every held tool pinned at "old" and approves any definition
// whose hash is the one given (or any, with none).
type fakePins struct{ by, hash string }

func (f *fakePins) Pinned(context.Context, catalog.Tool) (api.PinRecord, error) {
	return api.PinRecord{Hash: "old", Definition: []byte(`{"description":"old"}`), PinnedAt: time.Unix(1, 0).UTC()}, nil
}

func (f *fakePins) Approve(_ context.Context, t catalog.Tool, hash, by string) (api.PinRecord, error) {
	cur, _ := t.Pin()
	if hash != "" && hash != cur.Hash {
		return api.PinRecord{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: "changed again"}
	}
	f.by, f.hash = by, hash
	return api.PinRecord{Hash: cur.Hash, ApprovedBy: by, PinnedAt: time.Unix(2, 0).UTC()}, nil
}

func TestQuarantine(t *testing.T) {
	cat := catalog.New(nil)
	if _, err := cat.Set(catalog.Entry{Server: "demo", Available: true, Held: map[string]bool{"rug": true},
		Tools: []*mcp.Tool{{Name: "rug", Description: "new", InputSchema: map[string]any{"type": "object"}}}}); err != nil {
		t.Fatal(err)
	}
	pins := &fakePins{}
	h := api.New(&fakeServers{}, cat, fakeCaller{}, &api.Options{Pins: pins})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(authz.WithIdentity(r.Context(), authz.LocalAdmin())))
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.QuarantinedTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if list.Total != 1 || len(list.Tools) != 1 {
		t.Fatalf("list = %+v", list)
	}
	q := list.Tools[0]
	if q.Name != "demo.rug" || q.ServerID != "id-1" || q.Pinned.Hash != "old" || q.Current.Hash == "" || len(q.ChangedFields) == 0 {
		t.Errorf("quarantined tool = %+v", q)
	}

	_, err = c.ApproveTool(t.Context(), "demo.rug", "not-the-hash")
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Errorf("stale approval: %v, want a 409", err)
	}
	got, err := c.ApproveTool(t.Context(), "demo.rug", q.Current.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "demo.rug" || got.Hash != q.Current.Hash || got.ApprovedBy != "local" || pins.hash != q.Current.Hash {
		t.Errorf("approved = %+v (pins saw %+v)", got, pins)
	}
	if _, err := c.ApproveTool(t.Context(), "demo.rug", ""); err != nil {
		t.Errorf("approval without a hash: %v", err)
	}
	if _, err := c.ApproveTool(t.Context(), "demo.nope", ""); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("unknown tool: %v, want a 404", err)
	}
}
