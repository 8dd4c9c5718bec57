package resilience

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// announcements records what a persister announces.
type announcements struct {
	mu   sync.Mutex
	keys []string
}

func (a *announcements) add(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys = append(a.keys, key)
}

func (a *announcements) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.keys
	a.keys = nil
	return k
}

func sqliteDB(t *testing.T) *store.DB {
	return openDB(t, filepath.Join(t.TempDir(), "switchboard.db"))
}

// stored is the persisted breakers as "key state failures gen".
func stored(t *testing.T, db *store.DB) []string {
	t.Helper()
	rows, err := db.ListBreakers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Key+" "+r.State+" "+strconv.Itoa(r.Failures)+" g"+strconv.FormatUint(r.Generation, 10))
	}
	return out
}

// TestBreakerPersisterFlush checks what a flush writes and announces:
// the newest snapshot per key, and an announcement only when a key's
// state changed since it was last persisted (or was never persisted).
func TestBreakerPersisterFlush(t *testing.T) {
	snap := func(key string, st State, failures int, gen uint64) BreakerSnapshot {
		return BreakerSnapshot{Key: key, State: st, Failures: failures, Generation: gen}
	}
	steps := []struct {
		name      string
		saves     []BreakerSnapshot
		wantRows  []string
		announced []string
	}{
		{"first state of a key is announced", []BreakerSnapshot{snap("s:t", Closed, 1, 0)},
			[]string{"s:t CLOSED 1 g0"}, []string{"s:t"}},
		{"a new count in the same state is written, not announced", []BreakerSnapshot{snap("s:t", Closed, 2, 0)},
			[]string{"s:t CLOSED 2 g0"}, nil},
		{"an older generation queued after a newer one is dropped", []BreakerSnapshot{snap("s:t", Open, 3, 1), snap("s:t", Closed, 2, 0)},
			[]string{"s:t OPEN 3 g1"}, []string{"s:t"}},
		{"the last of one generation wins", []BreakerSnapshot{snap("s:t", HalfOpen, 0, 2), snap("s:t", HalfOpen, 1, 2)},
			[]string{"s:t HALF_OPEN 1 g2"}, []string{"s:t"}},
		{"keys are independent", []BreakerSnapshot{snap("s:u", Closed, 1, 0), snap("s:t", HalfOpen, 0, 2)},
			[]string{"s:t HALF_OPEN 0 g2", "s:u CLOSED 1 g0"}, []string{"s:u"}},
		{"nothing queued writes nothing", nil,
			[]string{"s:t HALF_OPEN 0 g2", "s:u CLOSED 1 g0"}, nil},
	}
	db := sqliteDB(t)
	var ann announcements
	p := NewBreakerPersister(db, ann.add, nil)
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			for _, s := range st.saves {
				p.Save(s)
			}
			p.Flush(t.Context())
			if diff := cmp.Diff(st.wantRows, stored(t, db)); diff != "" {
				t.Errorf("stored (-want +got):\n%s", diff)
			}
			got := ann.take()
			slices.Sort(got)
			if diff := cmp.Diff(st.announced, got); diff != "" {
				t.Errorf("announced (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBreakerPersisterStoreFailure checks a snapshot the store refused is
// not announced, and a later one of the same state is.
func TestBreakerPersisterStoreFailure(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "switchboard.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ann announcements
	failing := NewBreakerPersister(db, ann.add, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	failing.Save(BreakerSnapshot{Key: "s:t", State: Open, Generation: 1})
	failing.Flush(t.Context())
	if got := ann.take(); len(got) != 0 {
		t.Errorf("announced %v after the store refused the write", got)
	}
}

// TestBreakerPersisterRun checks Run writes what is saved while it runs,
// and what is still pending when it stops.
func TestBreakerPersisterRun(t *testing.T) {
	db := sqliteDB(t)
	var ann announcements
	p := NewBreakerPersister(db, ann.add, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	p.Save(BreakerSnapshot{Key: "s:t", State: Open, Failures: 5, Generation: 1})
	deadline := time.Now().Add(30 * time.Second)
	for len(stored(t, db)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not write the saved snapshot within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Saved while nothing runs (its wake-up already taken, as when Run
	// is about to see ctx end): the stopping Run writes it.
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	p.Save(BreakerSnapshot{Key: "s:u", State: Closed, Failures: 1, Generation: 0})
	<-p.wake
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"s:t OPEN 5 g1", "s:u CLOSED 1 g0"}, stored(t, db)); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"s:t", "s:u"}, ann.take()); diff != "" {
		t.Errorf("announced (-want +got):\n%s", diff)
	}
}

// TestBreakerPersisterMoveServer checks a renamed server's breakers move,
// in the store (rows this replica never loaded too) and in memory, and a
// server whose name merely starts the same way keeps its own.
func TestBreakerPersisterMoveServer(t *testing.T) {
	ctx := t.Context()
	db := sqliteDB(t)
	p := NewBreakerPersister(db, nil, nil)
	bs := NewBreakers(BreakerSettings{FailureThreshold: 1, OnChange: p.Save})
	for _, key := range []string{"old:tool", "older:tool"} {
		done, err := bs.Get(key).Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(false) // opens it
	}
	p.Flush(ctx)
	// Saved by another replica: this one never loaded it.
	if err := db.SaveBreaker(ctx, store.BreakerState{Key: "old:other", State: "OPEN", Failures: 4, Generation: 9}); err != nil {
		t.Fatal(err)
	}

	p.MoveServer(ctx, bs, "old", "new")
	p.Flush(ctx)

	rows, err := db.ListBreakers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range rows {
		keys = append(keys, r.Key+" "+r.State)
	}
	if diff := cmp.Diff([]string{"new:other OPEN", "new:tool OPEN", "older:tool OPEN"}, keys); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	var mem []string
	for _, s := range bs.All() {
		mem = append(mem, s.Key+" "+s.State.String())
	}
	if diff := cmp.Diff([]string{"new:tool OPEN", "older:tool OPEN"}, mem); diff != "" {
		t.Errorf("in memory (-want +got):\n%s", diff)
	}
	if _, err := bs.Get("new:tool").Allow(); !errors.Is(err, ErrOpen) {
		t.Errorf("the moved breaker admits a call: %v", err)
	}
}

func TestRestoreBreaker(t *testing.T) {
	opened := time.Now().Add(-time.Second)
	tests := []struct {
		name string
		row  store.BreakerState
		ok   bool
		// want is the state RestoreBreaker returns; then is the breaker's
		// state right after, "" when no breaker may have been created.
		want State
		then string
	}{
		{"open", store.BreakerState{Key: "s:t", State: "OPEN", Failures: 5, OpenedAt: opened, Generation: 3}, true, Open, "OPEN"},
		{"closed", store.BreakerState{Key: "s:t", State: "CLOSED", Failures: 2}, true, Closed, "CLOSED"},
		{"lower case", store.BreakerState{Key: "s:t", State: "open", OpenedAt: opened}, true, Open, "OPEN"},
		// Open with its cooldown over: the next call starts a fresh trial round.
		{"half open starts a fresh trial round", store.BreakerState{Key: "s:t", State: "HALF_OPEN", OpenedAt: opened}, true, HalfOpen, "HALF_OPEN"},
		{"unknown state", store.BreakerState{Key: "s:t", State: "AJAR"}, false, Closed, ""},
		{"empty state", store.BreakerState{Key: "s:t"}, false, Closed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bs := NewBreakers(BreakerSettings{Cooldown: time.Hour})
			st, ok := RestoreBreaker(bs, tc.row)
			if ok != tc.ok || (ok && st != tc.want) {
				t.Fatalf("RestoreBreaker = %v, %v; want %v, %v", st, ok, tc.want, tc.ok)
			}
			all := bs.All()
			if tc.then == "" {
				if len(all) != 0 {
					t.Errorf("a bad row created breakers: %+v", all)
				}
				return
			}
			if len(all) != 1 || all[0].Key != tc.row.Key || all[0].State.String() != tc.then || all[0].Failures != tc.row.Failures {
				t.Errorf("breakers after the restore %+v, want %s %s with %d failures", all, tc.row.Key, tc.then, tc.row.Failures)
			}
		})
	}
}
