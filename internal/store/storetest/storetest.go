// Package storetest is the behavioural test suite of package store. It lives
// outside store's _test files so that every dialect (SQLite today, PostgreSQL
// later) runs the very same checks against its own database.
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// Run runs the suite. open must return a new, empty, migrated database each
// time it is called (once per subtest) and close it when t ends.
func Run(t *testing.T, open func(t *testing.T) *store.DB) {
	tests := []struct {
		name string
		fn   func(t *testing.T, db *store.DB)
	}{
		{"ServerCreateGetList", testServerCreateGetList},
		{"ServerConflict", testServerConflict},
		{"ServerInvalid", testServerInvalid},
		{"NotFound", testNotFound},
		{"UpsertServer", testUpsertServer},
		{"ReplaceServerTools", testReplaceServerTools},
		{"ReplaceServerToolsAtomic", testReplaceServerToolsAtomic},
		{"DeleteServerCascades", testDeleteServerCascades},
		{"RenameServer", testRenameServer},
		{"ConnectionEvents", testConnectionEvents},
		{"Transact", testTransact},
		{"TransactNested", testTransactNested},
		{"TransactPanic", testTransactPanic},
		{"ConcurrentWriters", testConcurrentWriters},
		{"APIKeys", testAPIKeys},
		{"Grants", testGrants},
		{"WorkspaceGrants", testWorkspaceGrants},
		{"Tokens", testTokens},
		{"UseTokenRace", testUseTokenRace},
		{"RevokeGrantTokens", testRevokeGrantTokens},
		{"Purge", testPurge},
		{"Breakers", testBreakers},
		{"TimeRoundTrip", testTimeRoundTrip},
		{"EmptyLists", testEmptyLists},
		{"InvocationsInsertQuery", testInvocationsInsertQuery},
		{"InvocationsFillAndConflict", testInvocationsFillAndConflict},
		{"InvocationsPaging", testInvocationsPaging},
		{"InvocationStats", testInvocationStats},
		{"SortOrder", testSortOrder},
		{"NotifyListen", testNotifyListen},
		{"NotifyInvalid", testNotifyInvalid},
		{"Replicas", testReplicas},
		{"Idempotent", testIdempotent},
		{"GetBreaker", testGetBreaker},
		{"MoveBreakers", testMoveBreakers},
		{"ToolPins", testToolPins},
		{"ToolPinRace", testToolPinRace},
		{"AccessOverrides", testAccessOverrides},
		{"Escalations", testEscalations},
		{"Approvals", testApprovals},
		{"OAuthClients", testOAuthClients},
		{"OAuthRequests", testOAuthRequests},
		{"OAuthCodesAndTokens", testOAuthCodesAndTokens},
		{"OAuthSigningKeys", testOAuthSigningKeys},
		{"UpstreamTokens", testUpstreamTokens},
		{"UpstreamTokenLease", testUpstreamTokenLease},
		{"UpstreamTokenLeaseRace", testUpstreamTokenLeaseRace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
}

// RunReopen runs the checks that close and reopen one database. dsn must
// return a DSN naming a new, empty database each time it is called; the
// suite opens it with [store.Open] as often as it needs.
func RunReopen(t *testing.T, dsn func(t *testing.T) string) {
	t.Run("DataSurvivesReopen", func(t *testing.T) { testDataSurvivesReopen(t, dsn(t)) })
	t.Run("ConcurrentOpen", func(t *testing.T) { testConcurrentOpen(t, dsn(t)) })
}

// mustCreate creates a server named name and returns it.
func mustCreate(t *testing.T, db *store.DB, name string) *store.Server {
	t.Helper()
	s := &store.Server{
		Name:        name,
		Source:      store.SourceConfig,
		Transport:   "stdio",
		Description: "the " + name + " server",
		Config:      json.RawMessage(`{"command":"` + name + `","args":["-v"]}`),
	}
	if err := db.CreateServer(t.Context(), s); err != nil {
		t.Fatalf("CreateServer(%q): %v", name, err)
	}
	return s
}

func mustTools(t *testing.T, db *store.DB, server string, names ...string) []*store.Tool {
	t.Helper()
	tools := make([]*store.Tool, len(names))
	for i, n := range names {
		tools[i] = &store.Tool{
			Name:         server + "." + n,
			OriginalName: n,
			Description:  "tool " + n,
			Definition:   json.RawMessage(`{"name":"` + n + `","inputSchema":{"type":"object"}}`),
			IsExternal:   true,
			Valid:        true,
		}
	}
	if err := db.ReplaceServerTools(t.Context(), server, tools); err != nil {
		t.Fatalf("ReplaceServerTools(%q): %v", server, err)
	}
	return tools
}

func mustEvent(t *testing.T, db *store.DB, e *store.ConnectionEvent) *store.ConnectionEvent {
	t.Helper()
	if err := db.AppendConnectionEvent(t.Context(), e); err != nil {
		t.Fatalf("AppendConnectionEvent(%+v): %v", e, err)
	}
	return e
}

func testServerCreateGetList(t *testing.T, db *store.DB) {
	ctx := t.Context()
	zeta := mustCreate(t, db, "zeta")
	alpha := mustCreate(t, db, "alpha")
	bare := &store.Server{Name: "bare", Source: store.SourceAPI, Transport: "http"}
	if err := db.CreateServer(ctx, bare); err != nil {
		t.Fatal(err)
	}
	given := &store.Server{
		ID: "fixed-id", Name: "given", Source: store.SourceAPI, Transport: "sse",
		CreatedAt: time.Date(2024, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600)),
		UpdatedAt: time.Date(2024, 1, 2, 3, 4, 5, 7, time.UTC),
	}
	if err := db.CreateServer(ctx, given); err != nil {
		t.Fatal(err)
	}

	for _, s := range []*store.Server{zeta, alpha, bare} {
		if s.ID == "" || s.CreatedAt.IsZero() || s.UpdatedAt.IsZero() {
			t.Errorf("CreateServer(%q) did not fill ID/CreatedAt/UpdatedAt: %+v", s.Name, s)
		}
	}
	if zeta.ID == alpha.ID {
		t.Errorf("two servers got the same ID %q", zeta.ID)
	}
	if given.ID != "fixed-id" {
		t.Errorf("CreateServer replaced a given ID with %q", given.ID)
	}
	if !given.CreatedAt.Equal(time.Date(2024, 1, 2, 2, 4, 5, 6, time.UTC)) {
		t.Errorf("CreateServer replaced a given CreatedAt with %v", given.CreatedAt)
	}

	for _, key := range []string{zeta.ID, zeta.Name} {
		got, err := db.GetServer(ctx, key)
		if err != nil {
			t.Fatalf("GetServer(%q): %v", key, err)
		}
		if diff := cmp.Diff(zeta, got); diff != "" {
			t.Errorf("GetServer(%q) mismatch (-want +got):\n%s", key, diff)
		}
	}
	got, err := db.GetServer(ctx, "bare")
	if err != nil {
		t.Fatal(err)
	}
	if got.Config != nil {
		t.Errorf("server created without config reads back Config %q, want nil", got.Config)
	}

	list, err := db.ListServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*store.Server{alpha, bare, given, zeta}, list); diff != "" {
		t.Errorf("ListServers mismatch (-want +got):\n%s", diff)
	}
}

func testServerConflict(t *testing.T, db *store.DB) {
	first := mustCreate(t, db, "demo")
	tests := []struct {
		name string
		s    *store.Server
	}{
		{"same name", &store.Server{Name: "demo", Source: store.SourceAPI, Transport: "http"}},
		{"same id", &store.Server{ID: first.ID, Name: "other", Source: store.SourceAPI, Transport: "http"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.CreateServer(t.Context(), tt.s)
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("CreateServer = %v, want an error wrapping ErrConflict", err)
			}
			if !strings.Contains(err.Error(), tt.s.Name) {
				t.Errorf("error %q does not name the server %q", err, tt.s.Name)
			}
		})
	}
	t.Run("upsert with an id of another server", func(t *testing.T) {
		err := db.UpsertServer(t.Context(), &store.Server{ID: first.ID, Name: "third", Transport: "http"})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("UpsertServer = %v, want an error wrapping ErrConflict", err)
		}
	})
	list, err := db.ListServers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*store.Server{first}, list); diff != "" {
		t.Errorf("failed creates changed the servers (-want +got):\n%s", diff)
	}
}

func testServerInvalid(t *testing.T, db *store.DB) {
	tests := []struct {
		name string
		s    *store.Server
	}{
		{"nil", nil},
		{"no name", &store.Server{Transport: "stdio"}},
		{"bad config", &store.Server{Name: "x", Config: json.RawMessage(`{"a":`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := db.CreateServer(t.Context(), tt.s); err == nil {
				t.Error("CreateServer succeeded, want an error")
			}
			if err := db.UpsertServer(t.Context(), tt.s); err == nil {
				t.Error("UpsertServer succeeded, want an error")
			}
		})
	}
	t.Run("bad tool definition", func(t *testing.T) {
		mustCreate(t, db, "s")
		err := db.ReplaceServerTools(t.Context(), "s", []*store.Tool{{Name: "s.a", Definition: json.RawMessage(`nope`)}})
		if err == nil {
			t.Error("ReplaceServerTools with invalid JSON succeeded, want an error")
		}
		err = db.ReplaceServerTools(t.Context(), "s", []*store.Tool{nil})
		if err == nil {
			t.Error("ReplaceServerTools with a nil tool succeeded, want an error")
		}
	})
	t.Run("event without server", func(t *testing.T) {
		if err := db.AppendConnectionEvent(t.Context(), &store.ConnectionEvent{ToStatus: "up"}); err == nil {
			t.Error("AppendConnectionEvent without server succeeded, want an error")
		}
	})
}

func testNotFound(t *testing.T, db *store.DB) {
	mustCreate(t, db, "present")
	tests := []struct {
		name string
		call func() error
	}{
		{"GetServer", func() error { _, err := db.GetServer(t.Context(), "missing"); return err }},
		{"DeleteServer", func() error { return db.DeleteServer(t.Context(), "missing") }},
		{"ReplaceServerTools", func() error {
			return db.ReplaceServerTools(t.Context(), "missing", []*store.Tool{{Name: "missing.a"}})
		}},
		{"AppendConnectionEvent by id", func() error {
			return db.AppendConnectionEvent(t.Context(), &store.ConnectionEvent{ServerID: "missing", ToStatus: "up"})
		}},
		{"AppendConnectionEvent by name", func() error {
			return db.AppendConnectionEvent(t.Context(), &store.ConnectionEvent{ServerName: "missing", ToStatus: "up"})
		}},
		{"ListConnectionEvents", func() error { _, err := db.ListConnectionEvents(t.Context(), "missing", 0); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("got %v, want an error wrapping ErrNotFound", err)
			}
			if !strings.Contains(err.Error(), `"missing"`) {
				t.Errorf("error %q does not name the server", err)
			}
		})
	}
	tools, err := db.ListTools(t.Context(), "missing")
	if err != nil || len(tools) != 0 {
		t.Errorf(`ListTools("missing") = %v, %v; want no tools and no error`, tools, err)
	}
}

func testUpsertServer(t *testing.T, db *store.DB) {
	ctx := t.Context()
	s := &store.Server{Name: "demo", Source: store.SourceConfig, Transport: "stdio", Config: json.RawMessage(`{"v":1}`)}
	if err := db.UpsertServer(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.ID == "" || s.CreatedAt.IsZero() || s.UpdatedAt.IsZero() {
		t.Fatalf("UpsertServer did not fill ID/CreatedAt/UpdatedAt: %+v", s)
	}
	first := *s

	// Simulates a restart: the config is loaded again, without an ID.
	again := &store.Server{Name: "demo", Source: store.SourceAPI, Transport: "http",
		Description: "changed", Config: json.RawMessage(`{"v":2}`)}
	if err := db.UpsertServer(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID {
		t.Errorf("UpsertServer of an existing name gave ID %q, want the existing %q", again.ID, first.ID)
	}
	if !again.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("UpsertServer changed CreatedAt from %v to %v", first.CreatedAt, again.CreatedAt)
	}
	if again.UpdatedAt.Before(first.UpdatedAt) {
		t.Errorf("UpsertServer moved UpdatedAt back from %v to %v", first.UpdatedAt, again.UpdatedAt)
	}

	// A different ID for the same name is ignored too: the row's identity wins.
	third := &store.Server{ID: "another-id", Name: "demo", Source: store.SourceAPI, Transport: "http", Description: "third"}
	if err := db.UpsertServer(ctx, third); err != nil {
		t.Fatal(err)
	}
	if third.ID != first.ID {
		t.Errorf("UpsertServer with a different ID gave ID %q, want the existing %q", third.ID, first.ID)
	}

	got, err := db.GetServer(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(third, got); diff != "" {
		t.Errorf("GetServer after upsert mismatch (-want +got):\n%s", diff)
	}
	if got.Config != nil {
		t.Errorf("upsert without config kept the old config %s", got.Config)
	}
	list, err := db.ListServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("ListServers after three upserts of one name has %d rows, want 1", len(list))
	}
}

// toolKeys is what ListTools orders by, to compare orders readably.
func toolKeys(tools []*store.Tool) []string {
	var out []string
	for _, tool := range tools {
		out = append(out, tool.ServerID+"/"+tool.Name)
	}
	return out
}

func testReplaceServerTools(t *testing.T, db *store.DB) {
	ctx := t.Context()
	b := mustCreate(t, db, "b")
	a := mustCreate(t, db, "a")

	bTools := mustTools(t, db, b.ID, "zz", "mm")
	for _, tool := range bTools {
		if tool.ServerID != b.ID || tool.DiscoveredAt.IsZero() {
			t.Errorf("ReplaceServerTools did not fill ServerID/DiscoveredAt of %q: %+v", tool.Name, tool)
		}
	}
	// By name, with a gateway-style invalid tool.
	aTools := []*store.Tool{
		{Name: "a.x", OriginalName: "x", Valid: false, RejectReason: "bad schema", IsExternal: true,
			DiscoveredAt: time.Date(2025, 5, 6, 7, 8, 9, 10, time.UTC)},
		{Name: "a.bare", OriginalName: "bare", Valid: true},
	}
	if err := db.ReplaceServerTools(ctx, "a", aTools); err != nil {
		t.Fatal(err)
	}

	all, err := db.ListTools(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []*store.Tool{aTools[1], aTools[0], bTools[1], bTools[0]}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("ListTools(\"\") mismatch (-want +got):\n%s", diff)
	}
	if all[1].Definition != nil {
		t.Errorf("tool without definition reads back %q, want nil", all[1].Definition)
	}

	// Replacing drops the old rows and leaves other servers alone.
	newB := mustTools(t, db, "b", "new")
	for _, key := range []string{b.ID, "b"} {
		got, err := db.ListTools(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(newB, got); diff != "" {
			t.Errorf("ListTools(%q) after replace mismatch (-want +got):\n%s", key, diff)
		}
	}
	got, err := db.ListTools(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{a.ID + "/a.bare", a.ID + "/a.x"}, toolKeys(got)); diff != "" {
		t.Errorf("replacing b's tools changed a's (-want +got):\n%s", diff)
	}

	// Replacing with nothing empties the server.
	if err := db.ReplaceServerTools(ctx, "b", nil); err != nil {
		t.Fatal(err)
	}
	got, err = db.ListTools(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("ListTools after replacing with nil = %v, want none", toolKeys(got))
	}
}

func testReplaceServerToolsAtomic(t *testing.T, db *store.DB) {
	ctx := t.Context()
	s := mustCreate(t, db, "demo")
	before := mustTools(t, db, "demo", "one", "two")

	dup := []*store.Tool{{Name: "demo.new"}, {Name: "demo.dup"}, {Name: "demo.dup"}}
	err := db.ReplaceServerTools(ctx, s.ID, dup)
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReplaceServerTools with duplicate names = %v, want an error wrapping ErrConflict", err)
	}
	for _, tool := range dup {
		if tool.ServerID != "" || !tool.DiscoveredAt.IsZero() {
			t.Errorf("failed ReplaceServerTools modified its input: %+v", tool)
		}
	}
	got, err := db.ListTools(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, got); diff != "" {
		t.Errorf("failed ReplaceServerTools changed the rows (-want +got):\n%s", diff)
	}
}

func testDeleteServerCascades(t *testing.T, db *store.DB) {
	ctx := t.Context()
	gone := mustCreate(t, db, "gone")
	kept := mustCreate(t, db, "kept")
	mustTools(t, db, "gone", "a", "b")
	keptTools := mustTools(t, db, "kept", "c")
	mustEvent(t, db, &store.ConnectionEvent{ServerID: gone.ID, FromStatus: "starting", ToStatus: "connected"})
	keptEvent := mustEvent(t, db, &store.ConnectionEvent{ServerID: kept.ID, FromStatus: "starting", ToStatus: "connected"})

	if err := db.DeleteServer(ctx, "gone"); err != nil {
		t.Fatalf("DeleteServer by name: %v", err)
	}
	if _, err := db.GetServer(ctx, gone.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetServer of deleted server = %v, want ErrNotFound", err)
	}
	if err := db.DeleteServer(ctx, "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second DeleteServer = %v, want ErrNotFound", err)
	}
	tools, err := db.ListTools(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(keptTools, tools); diff != "" {
		t.Errorf("tools after delete mismatch (-want +got):\n%s", diff)
	}
	events, err := db.ListConnectionEvents(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*store.ConnectionEvent{keptEvent}, events); diff != "" {
		t.Errorf("history after delete mismatch (-want +got):\n%s", diff)
	}

	if err := db.DeleteServer(ctx, kept.ID); err != nil {
		t.Fatalf("DeleteServer by id: %v", err)
	}
	servers, err := db.ListServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tools, err = db.ListTools(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	events, err = db.ListConnectionEvents(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(servers)+len(tools)+len(events) != 0 {
		t.Errorf("after deleting every server: %d servers, %d tools, %d events remain", len(servers), len(tools), len(events))
	}
}

func testConnectionEvents(t *testing.T, db *store.DB) {
	ctx := t.Context()
	demo := mustCreate(t, db, "demo")
	other := mustCreate(t, db, "other")
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	var want []*store.ConnectionEvent // oldest first
	statuses := []string{"stopped", "starting", "connected", "degraded", "reconnecting", "connected"}
	for i := 1; i < len(statuses); i++ {
		e := &store.ConnectionEvent{ServerName: "demo", FromStatus: statuses[i-1], ToStatus: statuses[i],
			At: base.Add(time.Duration(i) * time.Second)}
		if i == 3 {
			e.Error = "ping timed out"
		}
		want = append(want, mustEvent(t, db, e))
	}
	// Two events in the same instant: the later insert is the newer.
	tie1 := mustEvent(t, db, &store.ConnectionEvent{ServerID: demo.ID, FromStatus: "connected", ToStatus: "stopping", At: base.Add(time.Hour)})
	tie2 := mustEvent(t, db, &store.ConnectionEvent{ServerID: demo.ID, FromStatus: "stopping", ToStatus: "stopped", At: base.Add(time.Hour)})
	want = append(want, tie1, tie2)
	otherEvent := mustEvent(t, db, &store.ConnectionEvent{ServerID: other.ID, FromStatus: "stopped", ToStatus: "starting"})

	for _, e := range want {
		if e.ID == 0 || e.ServerID != demo.ID || e.ServerName != "demo" {
			t.Errorf("AppendConnectionEvent did not fill ID/ServerID/ServerName: %+v", e)
		}
	}
	if otherEvent.At.IsZero() {
		t.Errorf("AppendConnectionEvent did not fill a zero At")
	}

	newestFirst := slices.Clone(want)
	slices.Reverse(newestFirst)
	tests := []struct {
		key   string
		limit int
		want  []*store.ConnectionEvent
	}{
		{"demo", 0, newestFirst},
		{demo.ID, 3, newestFirst[:3]},
		{"demo", 1, newestFirst[:1]},
		{"demo", -1, newestFirst},
		{"demo", 100, newestFirst},
		{"other", 0, []*store.ConnectionEvent{otherEvent}},
		{"", 2, []*store.ConnectionEvent{otherEvent, tie2}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s limit %d", tt.key, tt.limit), func(t *testing.T) {
			got, err := db.ListConnectionEvents(ctx, tt.key, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListConnectionEvents(%q, %d) mismatch (-want +got):\n%s", tt.key, tt.limit, diff)
			}
		})
	}
}

var errRollback = errors.New("roll back, please")

func testTransact(t *testing.T, db *store.DB) {
	ctx := t.Context()
	t.Run("rollback on error", func(t *testing.T) {
		err := db.Transact(ctx, func(tx *store.DB) error {
			mustCreate(t, tx, "rolled")
			mustTools(t, tx, "rolled", "a")
			// The transaction sees its own writes.
			if _, err := tx.GetServer(ctx, "rolled"); err != nil {
				t.Errorf("GetServer inside the transaction: %v", err)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("Transact = %v, want fn's error", err)
		}
		if _, err := db.GetServer(ctx, "rolled"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetServer after rollback = %v, want ErrNotFound", err)
		}
		tools, err := db.ListTools(ctx, "")
		if err != nil || len(tools) != 0 {
			t.Errorf("ListTools after rollback = %v, %v; want none", toolKeys(tools), err)
		}
	})
	t.Run("commit on nil", func(t *testing.T) {
		var created *store.Server
		err := db.Transact(ctx, func(tx *store.DB) error {
			created = mustCreate(t, tx, "committed")
			mustEvent(t, tx, &store.ConnectionEvent{ServerName: "committed", ToStatus: "connected"})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.GetServer(ctx, "committed")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(created, got); diff != "" {
			t.Errorf("committed server mismatch (-want +got):\n%s", diff)
		}
		events, err := db.ListConnectionEvents(ctx, "committed", 0)
		if err != nil || len(events) != 1 {
			t.Errorf("committed events = %v, %v; want 1", events, err)
		}
	})
}

func testTransactNested(t *testing.T, db *store.DB) {
	ctx := t.Context()
	err := db.Transact(ctx, func(tx *store.DB) error {
		mustCreate(t, tx, "outer")
		inner := tx.Transact(ctx, func(tx *store.DB) error {
			mustCreate(t, tx, "inner")
			return errRollback
		})
		if !errors.Is(inner, errRollback) {
			t.Errorf("inner Transact = %v, want fn's error", inner)
		}
		if _, err := tx.GetServer(ctx, "inner"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("inner work visible after its rollback: %v", err)
		}
		// A failing store call inside a transaction (a savepoint of its own)
		// leaves the transaction usable.
		if err := tx.CreateServer(ctx, &store.Server{Name: "outer"}); !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate CreateServer in transaction = %v, want ErrConflict", err)
		}
		if err := tx.ReplaceServerTools(ctx, "outer", []*store.Tool{{Name: "d"}, {Name: "d"}}); !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate tools in transaction = %v, want ErrConflict", err)
		}
		return tx.Transact(ctx, func(tx *store.DB) error {
			mustCreate(t, tx, "inner2")
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	list, err := db.ListServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"inner2", "outer"}, names); diff != "" {
		t.Errorf("servers after nested transactions (-want +got):\n%s", diff)
	}
}

func testTransactPanic(t *testing.T, db *store.DB) {
	ctx := t.Context()
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the panic of fn", p)
			}
		}()
		_ = db.Transact(ctx, func(tx *store.DB) error {
			mustCreate(t, tx, "panicked")
			panic("boom")
		})
	}()
	if _, err := db.GetServer(ctx, "panicked"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetServer after panic = %v, want ErrNotFound", err)
	}
	// The write connection went back to the pool.
	mustCreate(t, db, "after")
}

func testConcurrentWriters(t *testing.T, db *store.DB) {
	ctx := t.Context()
	const writers = 20
	const eventsEach = 5
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	report := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for i := range writers {
		wg.Go(func() {
			name := fmt.Sprintf("srv%02d", i)
			s := &store.Server{Name: name, Source: store.SourceAPI, Transport: "http"}
			if err := db.CreateServer(ctx, s); err != nil {
				report(err)
				return
			}
			report(db.ReplaceServerTools(ctx, name, []*store.Tool{{Name: name + ".a"}, {Name: name + ".b"}}))
			for j := range eventsEach {
				report(db.AppendConnectionEvent(ctx, &store.ConnectionEvent{
					ServerID: s.ID, FromStatus: "s" + fmt.Sprint(j), ToStatus: "s" + fmt.Sprint(j+1)}))
			}
			s.Description = "updated"
			report(db.UpsertServer(ctx, s))
			report(db.Transact(ctx, func(tx *store.DB) error {
				if _, err := tx.GetServer(ctx, name); err != nil {
					return err
				}
				return tx.ReplaceServerTools(ctx, name, []*store.Tool{{Name: name + ".c"}})
			}))
			_, err := db.ListServers(ctx)
			report(err)
			_, err = db.ListTools(ctx, "")
			report(err)
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err) // "database is locked" would land here
	}

	servers, err := db.ListServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := db.ListTools(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	events, err := db.ListConnectionEvents(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != writers || len(tools) != writers || len(events) != writers*eventsEach {
		t.Errorf("got %d servers, %d tools, %d events; want %d, %d, %d",
			len(servers), len(tools), len(events), writers, writers, writers*eventsEach)
	}
	for _, s := range servers {
		if s.Description != "updated" {
			t.Errorf("server %q lost its update: %+v", s.Name, s)
		}
	}
}

func testDataSurvivesReopen(t *testing.T, dsn string) {
	ctx := t.Context()
	db, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := mustCreate(t, db, "demo")
	tools := mustTools(t, db, "demo", "echo")
	e := mustEvent(t, db, &store.ConnectionEvent{ServerID: s.ID, FromStatus: "starting", ToStatus: "connected"})
	migrations, err := db.AppliedMigrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(migrations) == 0 {
		t.Fatal("AppliedMigrations is empty after Open")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}

	for round := range 2 {
		db, err := store.Open(ctx, dsn, nil)
		if err != nil {
			t.Fatalf("reopen %d: %v", round, err)
		}
		got, err := db.GetServer(ctx, "demo")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s, got); diff != "" {
			t.Errorf("server after reopen (-want +got):\n%s", diff)
		}
		gotTools, err := db.ListTools(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tools, gotTools); diff != "" {
			t.Errorf("tools after reopen (-want +got):\n%s", diff)
		}
		gotEvents, err := db.ListConnectionEvents(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]*store.ConnectionEvent{e}, gotEvents); diff != "" {
			t.Errorf("history after reopen (-want +got):\n%s", diff)
		}
		// Same versions, same AppliedAt: nothing ran twice.
		gotMigrations, err := db.AppliedMigrations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(migrations, gotMigrations); diff != "" {
			t.Errorf("migrations after reopen (-want +got):\n%s", diff)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func testConcurrentOpen(t *testing.T, dsn string) {
	const openers = 4
	var wg sync.WaitGroup
	dbs := make([]*store.DB, openers)
	errs := make([]error, openers)
	for i := range openers {
		wg.Go(func() { dbs[i], errs[i] = store.Open(t.Context(), dsn, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		t.Cleanup(func() {
			if err := dbs[i].Close(); err != nil {
				t.Error(err)
			}
		})
	}
	if t.Failed() {
		return
	}
	// Every handle writes to and sees the one database.
	for i, db := range dbs {
		mustCreate(t, db, fmt.Sprintf("s%d", i))
	}
	for i, db := range dbs {
		list, err := db.ListServers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != openers {
			t.Errorf("handle %d sees %d servers, want %d", i, len(list), openers)
		}
		migrations, err := db.AppliedMigrations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		first, err := dbs[0].AppliedMigrations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, migrations); diff != "" {
			t.Errorf("handles disagree on migrations (-0 +%d):\n%s", i, diff)
		}
	}
}

func testRenameServer(t *testing.T, db *store.DB) {
	ctx := t.Context()
	a := mustCreate(t, db, "alpha")
	mustCreate(t, db, "beta")
	if err := db.AppendConnectionEvent(ctx, &store.ConnectionEvent{ServerID: a.ID, FromStatus: "DISCONNECTED", ToStatus: "CONNECTING"}); err != nil {
		t.Fatal(err)
	}
	if err := db.RenameServer(ctx, a.ID, "gamma", []byte(`{"renamed":true}`)); err != nil {
		t.Fatalf("RenameServer: %v", err)
	}
	got, err := db.GetServer(ctx, "gamma")
	if err != nil || got.ID != a.ID || string(got.Config) != `{"renamed":true}` {
		t.Fatalf("after rename: %+v, %v", got, err)
	}
	if _, err := db.GetServer(ctx, "alpha"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old name still found: %v", err)
	}
	if evs, err := db.ListConnectionEvents(ctx, a.ID, 10); err != nil || len(evs) != 1 {
		t.Errorf("history lost on rename: %v %v", evs, err)
	}
	if err := db.RenameServer(ctx, a.ID, "beta", nil); !errors.Is(err, store.ErrConflict) {
		t.Errorf("rename onto a taken name: %v, want ErrConflict", err)
	}
	if err := db.RenameServer(ctx, "no-such-id", "delta", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rename of an unknown id: %v, want ErrNotFound", err)
	}
}

// testSortOrder checks that names sort by their bytes, as Go sorts strings,
// whatever the database's locale would do ("B" before "a", "_" after both).
func testSortOrder(t *testing.T, db *store.DB) {
	ctx := t.Context()
	names := []string{"b", "B", "a", "A", "_z", "a-b", "ab", "a b", "\u00e9", "Z"}
	want := slices.Sorted(slices.Values(names))
	for _, n := range names {
		mustCreate(t, db, n)
		if err := db.SaveBreaker(ctx, store.BreakerState{Key: n, State: "CLOSED"}); err != nil {
			t.Fatal(err)
		}
	}
	mustTools(t, db, "a", names...)

	servers, err := db.ListServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range servers {
		got = append(got, s.Name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListServers order (-want +got):\n%s", diff)
	}

	tools, err := db.ListTools(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, tool := range tools {
		got = append(got, tool.OriginalName)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListTools order (-want +got):\n%s", diff)
	}

	breakers, err := db.ListBreakers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, b := range breakers {
		got = append(got, b.Key)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListBreakers order (-want +got):\n%s", diff)
	}
}
