package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

func testToolPins(t *testing.T, db *store.DB) {
	ctx := t.Context()
	srv := mustCreate(t, db, "pinned")
	other := mustCreate(t, db, "other")
	at := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	first := store.ToolPin{ServerID: srv.ID, OriginalName: "echo", Hash: "h1", Definition: json.RawMessage(`{"description":"one"}`), PinnedAt: at}

	if _, err := db.ToolPin(ctx, srv.ID, "echo"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ToolPin before pinning: %v, want ErrNotFound", err)
	}
	got, err := db.PinTool(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("PinTool (-want +got):\n%s", diff)
	}
	// The first pin wins: a second replica pinning another definition gets
	// the stored one back.
	got, err = db.PinTool(ctx, store.ToolPin{ServerID: srv.ID, OriginalName: "echo", Hash: "h2", Definition: json.RawMessage(`{}`)})
	if err != nil || got.Hash != "h1" {
		t.Errorf("second PinTool = %+v, %v; want the first pin kept", got, err)
	}
	// By server name too; a zero time becomes now.
	byName, err := db.PinTool(ctx, store.ToolPin{ServerID: "pinned", OriginalName: "add", Hash: "a1", Definition: json.RawMessage(`{}`)})
	if err != nil || byName.ServerID != srv.ID || byName.PinnedAt.IsZero() {
		t.Errorf("PinTool by server name = %+v, %v", byName, err)
	}
	if _, err := db.PinTool(ctx, store.ToolPin{ServerID: other.ID, OriginalName: "echo", Hash: "o1", Definition: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}

	// A change is news once, whichever replica notes it.
	changedAt := at.Add(time.Hour)
	if news, err := db.NoteToolChange(ctx, srv.ID, "echo", "h2", json.RawMessage(`{"description":"two"}`), changedAt); err != nil || !news {
		t.Fatalf("NoteToolChange = %v, %v; want news", news, err)
	}
	if news, err := db.NoteToolChange(ctx, srv.ID, "echo", "h2", json.RawMessage(`{"description":"two"}`), changedAt.Add(time.Minute)); err != nil || news {
		t.Errorf("noting the same change again = %v, %v; want no news", news, err)
	}
	if news, err := db.NoteToolChange(ctx, srv.ID, "echo", "h1", json.RawMessage(`{}`), changedAt); err != nil || news {
		t.Errorf("noting the pinned definition as a change = %v, %v; want no news", news, err)
	}
	if news, err := db.NoteToolChange(ctx, srv.ID, "nope", "h2", json.RawMessage(`{}`), changedAt); err != nil || news {
		t.Errorf("noting a change of an unpinned tool = %v, %v; want no news", news, err)
	}
	got, err = db.ToolPin(ctx, srv.ID, "echo")
	want := first
	want.ChangedHash, want.ChangedDefinition, want.ChangedAt = "h2", json.RawMessage(`{"description":"two"}`), changedAt
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pin after a change (-want +got):\n%s", diff)
	}
	if !got.Changed() {
		t.Error("Changed() = false after a change")
	}
	// Another change of the same tool is news again.
	if news, err := db.NoteToolChange(ctx, srv.ID, "echo", "h3", json.RawMessage(`{"description":"three"}`), changedAt); err != nil || !news {
		t.Errorf("a second, different change = %v, %v; want news", news, err)
	}

	// Back to the pinned definition: cleared once.
	if cleared, err := db.ClearToolChange(ctx, srv.ID, "echo"); err != nil || !cleared {
		t.Errorf("ClearToolChange = %v, %v; want cleared", cleared, err)
	}
	if cleared, err := db.ClearToolChange(ctx, srv.ID, "echo"); err != nil || cleared {
		t.Errorf("second ClearToolChange = %v, %v; want nothing to clear", cleared, err)
	}
	if got, _ := db.ToolPin(ctx, srv.ID, "echo"); got.Changed() || got.ChangedDefinition != nil || !got.ChangedAt.IsZero() {
		t.Errorf("pin after clearing: %+v", got)
	}

	// Approval re-pins and forgets the change.
	if _, err := db.NoteToolChange(ctx, srv.ID, "echo", "h2", json.RawMessage(`{"description":"two"}`), changedAt); err != nil {
		t.Fatal(err)
	}
	approvedAt := at.Add(2 * time.Hour)
	approved, err := db.ApproveToolPin(ctx, store.ToolPin{ServerID: srv.ID, OriginalName: "echo", Hash: "h2",
		Definition: json.RawMessage(`{"description":"two"}`), PinnedAt: approvedAt, ApprovedBy: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	wantApproved := store.ToolPin{ServerID: srv.ID, OriginalName: "echo", Hash: "h2", Definition: json.RawMessage(`{"description":"two"}`),
		PinnedAt: approvedAt, ApprovedBy: "alice"}
	if diff := cmp.Diff(wantApproved, approved); diff != "" {
		t.Errorf("ApproveToolPin (-want +got):\n%s", diff)
	}
	// Approving a tool never pinned pins it.
	if p, err := db.ApproveToolPin(ctx, store.ToolPin{ServerID: "pinned", OriginalName: "new", Hash: "n1", Definition: json.RawMessage(`{}`), ApprovedBy: "bob"}); err != nil || p.ApprovedBy != "bob" {
		t.Errorf("approving an unpinned tool = %+v, %v", p, err)
	}

	pins, err := db.ToolPins(ctx, srv.ID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pins {
		names = append(names, p.OriginalName)
	}
	if diff := cmp.Diff([]string{"add", "echo", "new"}, names); diff != "" {
		t.Errorf("ToolPins names (-want +got):\n%s", diff)
	}

	// Errors.
	for name, p := range map[string]store.ToolPin{
		"no hash":      {ServerID: srv.ID, OriginalName: "x", Definition: json.RawMessage(`{}`)},
		"no name":      {ServerID: srv.ID, Hash: "x", Definition: json.RawMessage(`{}`)},
		"invalid JSON": {ServerID: srv.ID, OriginalName: "x", Hash: "x", Definition: json.RawMessage(`{`)},
	} {
		if _, err := db.PinTool(ctx, p); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PinTool %s: %v, want ErrInvalid", name, err)
		}
		if _, err := db.ApproveToolPin(ctx, p); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ApproveToolPin %s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := db.PinTool(ctx, store.ToolPin{ServerID: "ghost", OriginalName: "x", Hash: "x", Definition: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PinTool of an unknown server: %v, want ErrNotFound", err)
	}
	if _, err := db.ApproveToolPin(ctx, store.ToolPin{ServerID: "ghost", OriginalName: "x", Hash: "x", Definition: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ApproveToolPin of an unknown server: %v, want ErrNotFound", err)
	}
	if _, err := db.NoteToolChange(ctx, srv.ID, "echo", "", nil, at); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("NoteToolChange without a hash: %v, want ErrInvalid", err)
	}

	// Pins go with their server.
	if err := db.DeleteServer(ctx, srv.ID); err != nil {
		t.Fatal(err)
	}
	if pins, err := db.ToolPins(ctx, srv.ID); err != nil || len(pins) != 0 {
		t.Errorf("pins of a deleted server: %v, %v", pins, err)
	}
	if pins, err := db.ToolPins(ctx, other.ID); err != nil || len(pins) != 1 {
		t.Errorf("pins of the other server: %v, %v", pins, err)
	}
}

// testToolPinRace has replicas pin one tool and note one change at once:
// one pin is stored, and exactly one of them hears of the change as news.
func testToolPinRace(t *testing.T, db *store.DB) {
	ctx := t.Context()
	srv := mustCreate(t, db, "raced")
	const n = 8
	var wg sync.WaitGroup
	pins := make([]store.ToolPin, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			pins[i], errs[i] = db.PinTool(ctx, store.ToolPin{ServerID: srv.ID, OriginalName: "t",
				Hash: string(rune('a' + i)), Definition: json.RawMessage(`{}`)})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || pins[i].Hash != pins[0].Hash {
			t.Errorf("replica %d: %+v, %v; want every replica to get the one stored pin %q", i, pins[i], errs[i], pins[0].Hash)
		}
	}
	news := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			news[i], errs[i] = db.NoteToolChange(ctx, srv.ID, "t", "changed", json.RawMessage(`{}`), time.Now())
		})
	}
	wg.Wait()
	count := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("replica %d: %v", i, errs[i])
		}
		if news[i] {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%d replicas got the change as news, want 1", count)
	}
}
