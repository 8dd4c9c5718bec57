package storetest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// The suite's cases for the audit log (mcp_invocations).

// auditRows is a small audit log with one row per interesting shape, all at
// distinct instants from base on, oldest first.
func auditRows(base time.Time) []store.Invocation {
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	return []store.Invocation{
		{ID: "r0", Kind: "invocation", CorrelationID: "c0", AgentID: "bob", Server: "github", Tool: "search",
			ParamsHash: "ph0", Success: true, ResultSummary: "3 results", Attempts: 1, LatencyMS: 10.5,
			PolicyDecision: "ALLOW", PolicyRule: "grant:g1", PolicyRevision: 1<<63 + 3, CachedDecision: true,
			IdempotencyKey: "idem", TicketID: "tk", TaskID: "task", ServedBy: "github.search", Replica: "rep-1",
			InvokedAt: at(0)},
		{ID: "r1", Kind: "invocation", CorrelationID: "c1", AgentID: "bob", Server: "github", Tool: "search",
			Success: true, Attempts: 3, LatencyMS: 30.25, PolicyDecision: "ALLOW", InvokedAt: at(1)},
		{ID: "r2", Kind: "invocation", CorrelationID: "c2", AgentID: "bob", Server: "github", Tool: "search",
			Success: false, Error: "denied", ErrorCode: "forbidden", Attempts: 0, LatencyMS: 0,
			PolicyDecision: "DENY", PolicyRule: "default-deny", InvokedAt: at(2)},
		{ID: "r3", Kind: "invocation", CorrelationID: "c3", AgentID: "alice", Server: "github", Tool: "create_issue",
			Success: false, Error: "upstream 500", Attempts: 2, LatencyMS: 100, PolicyDecision: "ALLOW", InvokedAt: at(3)},
		{ID: "r4", Kind: "invocation", CorrelationID: "c4", AgentID: "alice", Server: "fs", Tool: "read",
			Success: true, Attempts: 1, LatencyMS: 1, PolicyDecision: "ALLOW", InvokedAt: at(4)},
		{ID: "r5", Kind: "operation", CorrelationID: "c5", AgentID: "admin", Server: "github", Tool: "search",
			Success: true, Operation: "policy.grant", InvokedAt: at(5)},
	}
}

func testInvocationsInsertQuery(t *testing.T, db *store.DB) {
	ctx := t.Context()
	base := oddTime
	rows := auditRows(base)
	if err := db.InsertInvocations(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := db.InsertInvocations(ctx, nil); err != nil {
		t.Errorf("InsertInvocations(nil) = %v", err)
	}

	got, next, err := db.QueryInvocations(ctx, store.InvocationFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if next != "" {
		t.Errorf("one page of everything has next cursor %q, want none", next)
	}
	want := make([]store.Invocation, len(rows))
	for i, r := range rows {
		want[len(rows)-1-i] = r
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("QueryInvocations round trip (-want +got):\n%s", diff)
	}

	yes, no := true, false
	tests := []struct {
		name string
		f    store.InvocationFilter
		want []string
	}{
		{"kind", store.InvocationFilter{Kind: "operation"}, []string{"r5"}},
		{"agent", store.InvocationFilter{AgentID: "alice"}, []string{"r4", "r3"}},
		{"server", store.InvocationFilter{Server: "github"}, []string{"r5", "r3", "r2", "r1", "r0"}},
		{"tool", store.InvocationFilter{Tool: "search"}, []string{"r5", "r2", "r1", "r0"}},
		{"server and tool", store.InvocationFilter{Server: "fs", Tool: "read"}, []string{"r4"}},
		{"decision", store.InvocationFilter{Decision: "DENY"}, []string{"r2"}},
		{"success", store.InvocationFilter{Success: &yes}, []string{"r5", "r4", "r1", "r0"}},
		{"failure", store.InvocationFilter{Success: &no}, []string{"r3", "r2"}},
		{"since is inclusive", store.InvocationFilter{Since: base.Add(4 * time.Second)}, []string{"r5", "r4"}},
		{"until is exclusive", store.InvocationFilter{Until: base.Add(1 * time.Second)}, []string{"r0"}},
		{"window", store.InvocationFilter{Since: base.Add(time.Second), Until: base.Add(3 * time.Second)}, []string{"r2", "r1"}},
		{"everything at once", store.InvocationFilter{Kind: "invocation", AgentID: "bob", Server: "github",
			Tool: "search", Decision: "ALLOW", Success: &yes, Since: base, Until: base.Add(time.Hour)}, []string{"r1", "r0"}},
		{"no match", store.InvocationFilter{AgentID: "nobody"}, nil},
		{"limit", store.InvocationFilter{Limit: 2}, []string{"r5", "r4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := db.QueryInvocations(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, invocationIDs(got)); diff != "" {
				t.Errorf("QueryInvocations(%+v) ids (-want +got):\n%s", tt.f, diff)
			}
			// Count agrees, whatever the page size.
			n, err := db.CountInvocations(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			wantN := int64(len(tt.want))
			if tt.f.Limit > 0 {
				wantN = int64(len(rows))
			}
			if n != wantN {
				t.Errorf("CountInvocations(%+v) = %d, want %d", tt.f, n, wantN)
			}
		})
	}
}

func testInvocationsFillAndConflict(t *testing.T, db *store.DB) {
	ctx := t.Context()
	rows := []store.Invocation{{Kind: "invocation", Tool: "a"}, {ID: "given", Kind: "operation", InvokedAt: oddTime}}
	if err := db.InsertInvocations(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if rows[0].ID == "" || rows[0].InvokedAt.IsZero() {
		t.Errorf("InsertInvocations did not fill ID and InvokedAt: %+v", rows[0])
	}
	if rows[1].ID != "given" || !rows[1].InvokedAt.Equal(oddTime) {
		t.Errorf("InsertInvocations changed a given ID or time: %+v", rows[1])
	}

	tests := []struct {
		name string
		rows []store.Invocation
	}{
		{"stored id", []store.Invocation{{ID: "fresh", Kind: "invocation"}, {ID: "given", Kind: "invocation"}}},
		{"repeated id", []store.Invocation{{ID: "dup", Kind: "invocation"}, {ID: "dup", Kind: "invocation"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := db.InsertInvocations(ctx, tt.rows); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("InsertInvocations = %v, want ErrConflict", err)
			}
			n, err := db.CountInvocations(ctx, store.InvocationFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if n != 2 {
				t.Errorf("after a failed batch the log has %d rows, want the 2 from before", n)
			}
		})
	}

	// A conflict inside a transaction leaves it usable.
	err := db.Transact(ctx, func(tx *store.DB) error {
		if err := tx.InsertInvocations(ctx, []store.Invocation{{ID: "given"}}); !errors.Is(err, store.ErrConflict) {
			t.Errorf("InsertInvocations in a transaction = %v, want ErrConflict", err)
		}
		return tx.InsertInvocations(ctx, []store.Invocation{{ID: "in-tx", Kind: "invocation"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := db.CountInvocations(ctx, store.InvocationFilter{}); err != nil || n != 3 {
		t.Errorf("CountInvocations after the transaction = %d, %v; want 3", n, err)
	}
}

func testInvocationsPaging(t *testing.T, db *store.DB) {
	ctx := t.Context()
	const total = 250
	rows := make([]store.Invocation, total)
	for i := range rows {
		// Runs of up to 7 rows share an instant, and ids do not follow
		// insertion order, so ties are broken by id across page boundaries.
		rows[i] = store.Invocation{
			ID:        fmt.Sprintf("id-%03d", (i*37)%total),
			Kind:      "invocation",
			AgentID:   []string{"bob", "alice"}[i%2],
			InvokedAt: oddTime.Add(time.Duration(i/7) * time.Millisecond),
		}
	}
	// Inserted in several batches, so multi-statement batches are covered by
	// the paging below too.
	for start := 0; start < total; start += 120 {
		if err := db.InsertInvocations(ctx, rows[start:min(start+120, total)]); err != nil {
			t.Fatal(err)
		}
	}
	want := sortedIDs(rows)

	for _, limit := range []int{1, 7, 40, 100, 249, 250} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			var got []string
			cursor, pages := "", 0
			for {
				page, next, err := db.QueryInvocations(ctx, store.InvocationFilter{Limit: limit, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if len(page) > limit {
					t.Fatalf("page %d has %d rows, limit %d", pages, len(page), limit)
				}
				got = append(got, invocationIDs(page)...)
				if next == "" {
					break
				}
				if pages > total {
					t.Fatal("paging does not end")
				}
				cursor = next
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pages joined (-want +got):\n%s", diff)
			}
			if wantPages := (total + limit - 1) / limit; pages != wantPages {
				t.Errorf("%d pages of %d, want %d", pages, limit, wantPages)
			}
		})
	}

	t.Run("filtered", func(t *testing.T) {
		var bob []store.Invocation
		for _, r := range rows {
			if r.AgentID == "bob" {
				bob = append(bob, r)
			}
		}
		f := store.InvocationFilter{AgentID: "bob", Limit: 30}
		var got []string
		for {
			page, next, err := db.QueryInvocations(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, invocationIDs(page)...)
			if next == "" {
				break
			}
			f.Cursor = next
		}
		if diff := cmp.Diff(sortedIDs(bob), got); diff != "" {
			t.Errorf("filtered pages joined (-want +got):\n%s", diff)
		}
		n, err := db.CountInvocations(ctx, f) // the cursor does not narrow the count
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(len(bob)) {
			t.Errorf("CountInvocations = %d, want %d", n, len(bob))
		}
	})

	t.Run("limits", func(t *testing.T) {
		for _, tt := range []struct{ limit, want int }{{0, 100}, {-5, 100}, {5000, total}} {
			page, next, err := db.QueryInvocations(ctx, store.InvocationFilter{Limit: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) != tt.want || (next == "") != (tt.want == total) {
				t.Errorf("Limit %d gave %d rows and next %q, want %d rows", tt.limit, len(page), next, tt.want)
			}
		}
	})

	t.Run("bad cursor", func(t *testing.T) {
		enc := base64.RawURLEncoding.EncodeToString
		for _, c := range []string{"!!!", enc([]byte("no-colon")), enc([]byte("abc:id")), enc([]byte("123:"))} {
			_, _, err := db.QueryInvocations(ctx, store.InvocationFilter{Cursor: c})
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("QueryInvocations(cursor %q) = %v, want ErrInvalid", c, err)
			}
		}
	})
}

func testInvocationStats(t *testing.T, db *store.DB) {
	ctx := t.Context()
	base := oddTime
	rows := auditRows(base)
	// Another agent's call of bob's tool, to tell the agent filter works.
	rows = append(rows, store.Invocation{ID: "r6", Kind: "invocation", AgentID: "carol", Server: "github",
		Tool: "search", Success: true, Attempts: 1, LatencyMS: 2, PolicyDecision: "ALLOW", InvokedAt: base.Add(6 * time.Second)})
	if err := db.InsertInvocations(ctx, rows); err != nil {
		t.Fatal(err)
	}
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }

	// r0..r2: bob's github.search calls; r5 (an operation) never counts.
	bobSearch := store.InvocationStats{Server: "github", Tool: "search", Calls: 3, Successes: 2, Failures: 1,
		Denied: 1, AvgLatencyMS: (10.5 + 30.25 + 0) / 3, MaxLatencyMS: 30.25, Retries: 2, First: at(0), Last: at(2)}
	allSearch := store.InvocationStats{Server: "github", Tool: "search", Calls: 4, Successes: 3, Failures: 1,
		Denied: 1, AvgLatencyMS: (10.5 + 30.25 + 0 + 2) / 4, MaxLatencyMS: 30.25, Retries: 2, First: at(0), Last: at(6)}
	createIssue := store.InvocationStats{Server: "github", Tool: "create_issue", Calls: 1, Failures: 1,
		AvgLatencyMS: 100, MaxLatencyMS: 100, Retries: 1, First: at(3), Last: at(3)}
	fsRead := store.InvocationStats{Server: "fs", Tool: "read", Calls: 1, Successes: 1,
		AvgLatencyMS: 1, MaxLatencyMS: 1, First: at(4), Last: at(4)}

	tests := []struct {
		name string
		f    store.InvocationFilter
		want []store.InvocationStats
	}{
		{"all", store.InvocationFilter{}, []store.InvocationStats{fsRead, createIssue, allSearch}},
		{"agent", store.InvocationFilter{AgentID: "bob"}, []store.InvocationStats{bobSearch}},
		{"server", store.InvocationFilter{Server: "github"}, []store.InvocationStats{createIssue, allSearch}},
		{"tool", store.InvocationFilter{Tool: "read"}, []store.InvocationStats{fsRead}},
		{"window", store.InvocationFilter{Since: at(3), Until: at(6)}, []store.InvocationStats{fsRead, createIssue}},
		{"kind and outcome fields are ignored", store.InvocationFilter{Kind: "operation", Decision: "DENY", AgentID: "bob"},
			[]store.InvocationStats{bobSearch}},
		{"nothing", store.InvocationFilter{AgentID: "nobody"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.InvocationStatsByTool(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("InvocationStatsByTool(%+v) (-want +got):\n%s", tt.f, diff)
			}
		})
	}
}
