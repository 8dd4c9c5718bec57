package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// testAccessOverrides: a server's default_access override is set (by id or
// name), replaced, read, cleared, and goes with its server.
func testAccessOverrides(t *testing.T, db *store.DB) {
	ctx := t.Context()
	a, b := mustCreate(t, db, "a"), mustCreate(t, db, "b")
	set := func(o store.AccessOverride) store.AccessOverride {
		t.Helper()
		got, err := db.SetAccessOverride(ctx, o)
		if err != nil {
			t.Fatalf("SetAccessOverride(%+v): %v", o, err)
		}
		return got
	}
	first := set(store.AccessOverride{ServerID: "a", DefaultAccess: "deny", SetAt: oddTime, SetBy: "ops"})
	want := store.AccessOverride{ServerID: a.ID, DefaultAccess: "deny", SetAt: oddTime.UTC(), SetBy: "ops"}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("SetAccessOverride by name (-want +got):\n%s", diff)
	}
	again := set(store.AccessOverride{ServerID: a.ID, DefaultAccess: "allow", SetAt: oddTime.Add(time.Minute), SetBy: "root"})
	want = store.AccessOverride{ServerID: a.ID, DefaultAccess: "allow", SetAt: oddTime.Add(time.Minute).UTC(), SetBy: "root"}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("SetAccessOverride again (-want +got):\n%s", diff)
	}
	if got, err := db.AccessOverride(ctx, a.ID); err != nil || !cmp.Equal(want, got) {
		t.Errorf("AccessOverride = %+v, %v; want %+v", got, err, want)
	}
	if _, err := db.AccessOverride(ctx, b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AccessOverride of a server without one = %v, want ErrNotFound", err)
	}
	bo := set(store.AccessOverride{ServerID: b.ID, DefaultAccess: "deny"})
	if bo.SetAt.IsZero() {
		t.Errorf("a zero SetAt was stored as %v, want now", bo.SetAt)
	}
	all, err := db.AccessOverrides(ctx)
	if err != nil || len(all) != 2 || all[a.ID].DefaultAccess != "allow" || all[b.ID].DefaultAccess != "deny" {
		t.Errorf("AccessOverrides = %v, %v", all, err)
	}
	if _, err := db.SetAccessOverride(ctx, store.AccessOverride{ServerID: "missing", DefaultAccess: "deny"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("override of an unknown server = %v, want ErrNotFound", err)
	}
	if _, err := db.SetAccessOverride(ctx, store.AccessOverride{ServerID: a.ID}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("override without a value = %v, want ErrInvalid", err)
	}
	if had, err := db.ClearAccessOverride(ctx, a.ID); err != nil || !had {
		t.Errorf("ClearAccessOverride = %v, %v; want true", had, err)
	}
	if had, err := db.ClearAccessOverride(ctx, a.ID); err != nil || had {
		t.Errorf("second ClearAccessOverride = %v, %v; want false", had, err)
	}
	if err := db.DeleteServer(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if all, err := db.AccessOverrides(ctx); err != nil || len(all) != 0 {
		t.Errorf("overrides after clearing a and deleting b: %v, %v", all, err)
	}
}
