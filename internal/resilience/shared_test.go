package resilience

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// TestMain shares one throwaway PostgreSQL server among the tests that
// need one, and stops it at the end.
func TestMain(m *testing.M) { os.Exit(storetest.PostgresMain(m)) }

// backends open two handles on one new store: two replicas sharing it.
var backends = []struct {
	name string
	open func(t *testing.T) (a, b *store.DB)
}{
	{"sqlite", func(t *testing.T) (*store.DB, *store.DB) {
		path := filepath.Join(t.TempDir(), "switchboard.db")
		return openDB(t, path), openDB(t, path)
	}},
	{"postgres", func(t *testing.T) (*store.DB, *store.DB) {
		dsn := storetest.StartPostgres(t)
		return openDB(t, dsn), openDB(t, dsn)
	}},
}

func openDB(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// textCodec stores strings as they are; "unreadable" cannot be read back.
var textCodec = Codec[string]{
	Encode: func(s string) ([]byte, error) { return []byte(s), nil },
	Decode: func(b []byte) (string, bool) { return string(b), string(b) != "unreadable" },
}

// replica is one gateway's shared idempotency cache, with its own memory.
func replica(db *store.DB) *SharedIdempotency[string] {
	return NewSharedIdempotency(NewIdempotency[string](time.Hour, 100, nil), db, textCodec, time.Hour, nil)
}

// counted returns fn's result and counts its runs.
func counted(n *atomic.Int32, result string, err error) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		n.Add(1)
		return result, err
	}
}

func TestSharedIdempotency(t *testing.T) {
	type outcome struct {
		v      string
		shared bool
		err    error // matched with errors.Is
		ran    int32 // runs of the second replica's fn
	}
	tests := []struct {
		name string
		// first runs on replica a (nil: nothing).
		first func(ctx context.Context, a *SharedIdempotency[string]) error
		// second runs on replica b, with fn counting its runs.
		fp   string
		want outcome
		// unpeekable: the store keeps a result nobody can read.
		unpeekable bool
	}{
		{
			name: "the second replica gets the first's result without running",
			first: func(ctx context.Context, a *SharedIdempotency[string]) error {
				_, _, err := a.DoFingerprint(ctx, "k", "fp", func(context.Context) (string, error) { return "first", nil })
				return err
			},
			fp:   "fp",
			want: outcome{v: "first", shared: true},
		},
		{
			name: "another call under the same key is a conflict",
			first: func(ctx context.Context, a *SharedIdempotency[string]) error {
				_, _, err := a.DoFingerprint(ctx, "k", "fp", func(context.Context) (string, error) { return "first", nil })
				return err
			},
			fp:   "other-fp",
			want: outcome{err: ErrIdempotencyConflict},
		},
		{
			name: "a failed call is not shared",
			first: func(ctx context.Context, a *SharedIdempotency[string]) error {
				_, _, err := a.DoFingerprint(ctx, "k", "fp", func(context.Context) (string, error) { return "", errors.New("boom") })
				if err == nil {
					return errors.New("the failing call succeeded")
				}
				return nil
			},
			fp:   "fp",
			want: outcome{v: "second", ran: 1},
		},
		{
			name: "a result the codec cannot read is run again",
			first: func(ctx context.Context, a *SharedIdempotency[string]) error {
				_, _, err := a.DoFingerprint(ctx, "k", "fp", func(context.Context) (string, error) { return "unreadable", nil })
				return err
			},
			fp:         "fp",
			want:       outcome{v: "second", ran: 1},
			unpeekable: true,
		},
		{
			name: "a key used only on another agent's behalf is another key",
			first: func(ctx context.Context, a *SharedIdempotency[string]) error {
				_, _, err := a.DoFingerprint(ctx, "k2", "fp", func(context.Context) (string, error) { return "first", nil })
				return err
			},
			fp:   "fp",
			want: outcome{v: "second", ran: 1},
		},
		{
			name:  "duplicates racing on two replicas both get the result stored first",
			first: func(context.Context, *SharedIdempotency[string]) error { return nil },
			fp:    "fp",
			want:  outcome{v: "from-a", shared: true, ran: 1},
		},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for i, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					ctx := t.Context()
					dbA, dbB := be.open(t)
					a, b := replica(dbA), replica(dbB)
					if err := tc.first(ctx, a); err != nil {
						t.Fatal(err)
					}
					var ran atomic.Int32
					fn := counted(&ran, "second", nil)
					if i == len(tests)-1 {
						// While b runs the call, a finishes the same one and
						// stores its result first.
						fn = func(ctx context.Context) (string, error) {
							ran.Add(1)
							if v, _, err := a.DoFingerprint(ctx, "k", "fp", func(context.Context) (string, error) { return "from-a", nil }); err != nil || v != "from-a" {
								t.Errorf("a: %q, %v", v, err)
							}
							return "from-b", nil
						}
					}
					v, shared, err := b.DoFingerprint(ctx, "k", tc.fp, fn)
					switch {
					case tc.want.err != nil && !errors.Is(err, tc.want.err):
						t.Fatalf("error %v, want %v", err, tc.want.err)
					case tc.want.err == nil && err != nil:
						t.Fatal(err)
					}
					got := outcome{v: v, shared: shared, err: tc.want.err, ran: ran.Load()}
					if got != tc.want {
						t.Errorf("got %+v, want %+v", got, tc.want)
					}
					if tc.want.err != nil {
						return
					}
					// A third replica peeks the same result; b's memory now
					// answers without the store.
					if pv, ok, err := replica(dbB).Peek(ctx, "k", "fp"); err != nil || ok == tc.unpeekable || (ok && pv != tc.want.v) {
						t.Errorf("Peek on a third replica: %q %v %v, want %q (unless unpeekable: %v)", pv, ok, err, tc.want.v, tc.unpeekable)
					}
					if _, _, err := replica(dbB).Peek(ctx, "k", "other-fp"); !errors.Is(err, ErrIdempotencyConflict) {
						t.Errorf("Peek with another fingerprint: %v, want a conflict", err)
					}
					v2, shared2, err := b.DoFingerprint(ctx, "k", "fp", counted(&ran, "third", nil))
					if err != nil || v2 != tc.want.v || !shared2 || ran.Load() != tc.want.ran {
						t.Errorf("b again: %q shared=%v %v after %d runs, want %q shared from memory", v2, shared2, err, ran.Load(), tc.want.v)
					}
				})
			}
		})
	}
}

// TestSharedIdempotencyKeyNotStored checks the client's key reaches the
// store only hashed.
func TestSharedIdempotencyKeyNotStored(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, filepath.Join(t.TempDir(), "switchboard.db"))
	const key = "agent\x00client-key-123"
	if _, _, err := replica(db).DoFingerprint(ctx, key, "fp", func(context.Context) (string, error) { return "r", nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetIdempotent(ctx, key, time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the key in clear finds %v, want not found", err)
	}
	row, err := db.GetIdempotent(ctx, storeKey(key), time.Now())
	if err != nil || string(row.Result) != "r" || row.Fingerprint != "fp" {
		t.Errorf("stored %+v, %v", row, err)
	}
}
