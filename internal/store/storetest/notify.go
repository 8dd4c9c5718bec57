package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// The suite's cases for change notifications, replica heartbeats and the
// single-breaker read.

// NotifyTimeout is how long a test waits for a notification before failing.
// Generous: it bounds a failure, it is not a latency requirement.
const NotifyTimeout = 10 * time.Second

// Receive returns the next notification on ch, failing t after
// [NotifyTimeout] or when ch is closed.
func Receive(t testing.TB, ch <-chan store.Notification) store.Notification {
	t.Helper()
	timer := time.NewTimer(NotifyTimeout)
	defer timer.Stop()
	select {
	case n, ok := <-ch:
		if !ok {
			t.Fatal("notification channel closed, want a notification")
		}
		return n
	case <-timer.C:
		t.Fatalf("no notification within %v", NotifyTimeout)
	}
	return store.Notification{}
}

// ExpectClosed fails t unless ch is closed within [NotifyTimeout], having
// delivered nothing more.
func ExpectClosed(t testing.TB, ch <-chan store.Notification) {
	t.Helper()
	timer := time.NewTimer(NotifyTimeout)
	defer timer.Stop()
	select {
	case n, ok := <-ch:
		if ok {
			t.Fatalf("got %+v, want the channel closed", n)
		}
	case <-timer.C:
		t.Fatalf("channel not closed within %v", NotifyTimeout)
	}
}

// listen subscribes to channel until t ends.
func listen(t *testing.T, db *store.DB, channel string) <-chan store.Notification {
	t.Helper()
	ch, err := db.Listen(t.Context(), channel)
	if err != nil {
		t.Fatalf("Listen(%q): %v", channel, err)
	}
	return ch
}

func testNotifyListen(t *testing.T, db *store.DB) {
	ctx := t.Context()
	a, b := listen(t, db, "servers"), listen(t, db, "grants")
	a2 := listen(t, db, "servers") // a second listener of the same channel

	// Sent in order on one channel, each arrives once, in order, intact;
	// the other channel sees only its own.
	payloads := []string{"created github", "", strings.Repeat("é", store.MaxNotifyPayload/2), `{"id":"x"}`}
	for _, p := range payloads {
		if err := db.Notify(ctx, "servers", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Notify(ctx, "grants", "g1"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan store.Notification{a, a2} {
		for _, p := range payloads {
			want := store.Notification{Channel: "servers", Payload: p, Self: true}
			if diff := cmp.Diff(want, Receive(t, ch)); diff != "" {
				t.Errorf("notification (-want +got):\n%s", diff)
			}
		}
	}
	if diff := cmp.Diff(store.Notification{Channel: "grants", Payload: "g1", Self: true}, Receive(t, b)); diff != "" {
		t.Errorf("notification on grants (-want +got):\n%s", diff)
	}

	// A rolled-back transaction's notifications vanish, a savepoint's
	// with it; a committed one's arrive (after the marker shows the
	// rolled-back ones would have been ahead of it).
	boom := errors.New("boom")
	err := db.Transact(ctx, func(tx *store.DB) error {
		if err := tx.Notify(ctx, "servers", "rolled back"); err != nil {
			t.Fatal(err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Transact = %v, want boom", err)
	}
	err = db.Transact(ctx, func(tx *store.DB) error {
		if err := tx.Notify(ctx, "servers", "committed"); err != nil {
			return err
		}
		inner := tx.Transact(ctx, func(sp *store.DB) error {
			if err := sp.Notify(ctx, "servers", "savepoint rolled back"); err != nil {
				t.Fatal(err)
			}
			return boom
		})
		if !errors.Is(inner, boom) {
			t.Fatalf("nested Transact = %v, want boom", inner)
		}
		return tx.Transact(ctx, func(sp *store.DB) error {
			return sp.Notify(ctx, "servers", "savepoint committed")
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"committed", "savepoint committed"} {
		if got := Receive(t, a); got.Payload != p {
			t.Errorf("after the transactions got %+v, want payload %q", got, p)
		}
	}

	// Cancelling a listener's ctx closes its channel and only its own.
	lctx, cancel := context.WithCancel(ctx)
	c, err := db.Listen(lctx, "servers")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	ExpectClosed(t, c)
	if err := db.Notify(ctx, "servers", "still here"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"committed", "savepoint committed", "still here"} {
		if got := Receive(t, a2); got.Payload != p {
			t.Errorf("the other listener got %+v, want payload %q", got, p)
		}
	}
}

func testNotifyInvalid(t *testing.T, db *store.DB) {
	ctx := t.Context()
	tests := []struct {
		name, channel, payload string
	}{
		{"empty channel", "", "x"},
		{"long channel", strings.Repeat("c", 64), "x"},
		{"long payload", "c", strings.Repeat("p", store.MaxNotifyPayload+1)},
		{"NUL in payload", "c", "a\x00b"},
		{"invalid UTF-8", "c", "\xff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := db.Notify(ctx, tt.channel, tt.payload); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("Notify = %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := db.Listen(ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Listen on an empty channel = %v, want ErrInvalid", err)
	}
	// The largest payload passes, on a channel of the longest name.
	long := strings.Repeat("c", 63)
	ch := listen(t, db, long)
	largest := strings.Repeat("p", store.MaxNotifyPayload)
	if err := db.Notify(ctx, long, largest); err != nil {
		t.Fatal(err)
	}
	if got := Receive(t, ch); got.Payload != largest || got.Channel != long {
		t.Errorf("largest notification arrived as channel %q, %d bytes", got.Channel, len(got.Payload))
	}
}

func testReplicas(t *testing.T, db *store.DB) {
	ctx := t.Context()
	list := func(since time.Time) []store.Replica {
		t.Helper()
		got, err := db.Replicas(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(time.Time{}); len(got) != 0 {
		t.Fatalf("Replicas on an empty store = %+v", got)
	}
	a := store.Replica{ID: "a", Host: "h1", PID: 101, Version: "v1", Address: "10.0.0.1:8080",
		StartedAt: oddTime, HeartbeatAt: oddTime.Add(10 * time.Second)}
	b := store.Replica{ID: "b", Host: "h2", PID: 202, Version: "v1", Address: "10.0.0.2:8080",
		StartedAt: oddTime.Add(-time.Hour), HeartbeatAt: oddTime.Add(20 * time.Second)}
	// c started with a: the id breaks the tie.
	c := store.Replica{ID: "c", Host: "h3", StartedAt: oddTime, HeartbeatAt: oddTime.Add(5 * time.Second)}
	for _, r := range []store.Replica{c, a, b} {
		if err := db.Heartbeat(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		since time.Time
		want  []store.Replica
	}{
		{"all", time.Time{}, []store.Replica{b, a, c}},
		{"since is inclusive", oddTime.Add(10 * time.Second), []store.Replica{b, a}},
		{"alive", oddTime.Add(11 * time.Second), []store.Replica{b}},
		{"none", oddTime.Add(time.Minute), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, list(tt.since)); diff != "" {
				t.Errorf("Replicas(%v) (-want +got):\n%s", tt.since, diff)
			}
		})
	}

	// A later heartbeat updates the row; a zero StartedAt keeps the stored
	// one and a zero HeartbeatAt means now.
	before := time.Now()
	a2 := store.Replica{ID: "a", Host: "h1", PID: 102, Version: "v2", Address: "10.0.0.1:9090"}
	if err := db.Heartbeat(ctx, a2); err != nil {
		t.Fatal(err)
	}
	got := list(before.Add(-time.Second))
	if len(got) != 1 {
		t.Fatalf("after a fresh heartbeat Replicas = %+v, want a alone", got)
	}
	if got[0].HeartbeatAt.Before(before.Add(-time.Second)) {
		t.Errorf("zero HeartbeatAt stored as %v, want about now", got[0].HeartbeatAt)
	}
	a2.StartedAt, a2.HeartbeatAt = a.StartedAt, got[0].HeartbeatAt
	if diff := cmp.Diff([]store.Replica{a2}, got); diff != "" {
		t.Errorf("updated replica (-want +got):\n%s", diff)
	}

	// A first heartbeat without StartedAt starts at the heartbeat.
	d := store.Replica{ID: "d", HeartbeatAt: oddTime.Add(time.Hour)}
	if err := db.Heartbeat(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.StartedAt = d.HeartbeatAt
	var gotD []store.Replica
	for _, r := range list(time.Time{}) {
		if r.ID == "d" {
			gotD = append(gotD, r)
		}
	}
	if diff := cmp.Diff([]store.Replica{d}, gotD); diff != "" {
		t.Errorf("replica without StartedAt (-want +got):\n%s", diff)
	}

	for _, id := range []string{"b", "c", "d", "never-seen"} {
		if err := db.DeleteReplica(ctx, id); err != nil {
			t.Errorf("DeleteReplica(%q) = %v", id, err)
		}
	}
	if diff := cmp.Diff([]store.Replica{a2}, list(time.Time{})); diff != "" {
		t.Errorf("replicas after delete (-want +got):\n%s", diff)
	}
	if err := db.Heartbeat(ctx, store.Replica{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Heartbeat without an id = %v, want ErrInvalid", err)
	}
}

func testGetBreaker(t *testing.T, db *store.DB) {
	ctx := t.Context()
	want := store.BreakerState{Key: "github:search", State: "OPEN", Failures: 3, LastFailureAt: oddTime,
		OpenedAt: oddTime, Generation: 1<<63 + 1, UpdatedAt: oddTime.Add(time.Second)}
	for _, b := range []store.BreakerState{want, {Key: "other", State: "CLOSED", UpdatedAt: oddTime}} {
		if err := db.SaveBreaker(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.GetBreaker(ctx, want.Key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetBreaker (-want +got):\n%s", diff)
	}
	if _, err := db.GetBreaker(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetBreaker of a missing key = %v, want ErrNotFound", err)
	}
	// Inside a transaction it sees the transaction's own write.
	err = db.Transact(ctx, func(tx *store.DB) error {
		if err := tx.SaveBreaker(ctx, store.BreakerState{Key: "new", State: "HALF_OPEN", UpdatedAt: oddTime}); err != nil {
			return err
		}
		b, err := tx.GetBreaker(ctx, "new")
		if err != nil {
			return err
		}
		if b.State != "HALF_OPEN" {
			t.Errorf("GetBreaker in the transaction = %+v", b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testMoveBreakers: a rename moves "old:tool" and "old" rows to the new
// name with their state, leaves other servers (including one whose name
// starts like the old one) alone, and replaces a row already under a new key.
func testMoveBreakers(t *testing.T, db *store.DB) {
	ctx := t.Context()
	rows := []store.BreakerState{
		{Key: "gh:search", State: "OPEN", Failures: 5, OpenedAt: oddTime, LastFailureAt: oddTime, Generation: 7},
		{Key: "gh:issues", State: "CLOSED", Failures: 2, Generation: 3},
		{Key: "gh", State: "OPEN", Failures: 1, Generation: 1},
		{Key: "ghost:search", State: "OPEN", Failures: 9, Generation: 4},
		{Key: "hub:search", State: "CLOSED", Generation: 1}, // stale, replaced
	}
	for _, b := range rows {
		if err := db.SaveBreaker(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	moved, err := db.MoveBreakers(ctx, "gh", "hub")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"hub", "hub:issues", "hub:search"}, moved); diff != "" {
		t.Errorf("moved keys (-want +got):\n%s", diff)
	}
	all, err := db.ListBreakers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.BreakerState{}
	for _, b := range all {
		b.UpdatedAt = time.Time{}
		got[b.Key] = b
	}
	want := map[string]store.BreakerState{
		"hub:search":   {Key: "hub:search", State: "OPEN", Failures: 5, OpenedAt: oddTime, LastFailureAt: oddTime, Generation: 7},
		"hub:issues":   {Key: "hub:issues", State: "CLOSED", Failures: 2, Generation: 3},
		"hub":          {Key: "hub", State: "OPEN", Failures: 1, Generation: 1},
		"ghost:search": {Key: "ghost:search", State: "OPEN", Failures: 9, Generation: 4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("breakers after the move (-want +got):\n%s", diff)
	}
	if moved, err := db.MoveBreakers(ctx, "absent", "other"); err != nil || len(moved) != 0 {
		t.Errorf("moving a server without breakers = %v, %v", moved, err)
	}
}
