package store

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDSN(t *testing.T) {
	tests := []struct {
		dsn  string
		want sqliteTarget
	}{
		{"./switchboard.db", sqliteTarget{path: "switchboard.db", base: "file:switchboard.db", query: url.Values{}}},
		{"/var/lib/sb/x.db", sqliteTarget{path: "/var/lib/sb/x.db", base: "file:/var/lib/sb/x.db", query: url.Values{}}},
		{"/tmp/a b#c?.db", sqliteTarget{path: "/tmp/a b#c", base: "file:/tmp/a%20b%23c", query: url.Values{".db": {""}}}},
		{"x.db?_pragma=cache_size(-2000)", sqliteTarget{path: "x.db", base: "file:x.db",
			query: url.Values{"_pragma": {"cache_size(-2000)"}}}},
		{"sqlite:x.db", sqliteTarget{path: "x.db", base: "file:x.db", query: url.Values{}}},
		{"SQLite:///abs/x.db", sqliteTarget{path: "/abs/x.db", base: "file:/abs/x.db", query: url.Values{}}},
		{"sqlite://rel/x.db", sqliteTarget{path: "rel/x.db", base: "file:rel/x.db", query: url.Values{}}},
		{"sqlite:file:x.db?mode=rwc", sqliteTarget{path: "x.db", base: "file:x.db", query: url.Values{"mode": {"rwc"}}}},
		{"file:x.db", sqliteTarget{path: "x.db", base: "file:x.db", query: url.Values{}}},
		{"file:///abs/a%20b.db?cache=shared#frag", sqliteTarget{path: "/abs/a b.db", base: "file:///abs/a%20b.db",
			query: url.Values{"cache": {"shared"}}}},
		{"file://localhost/abs/x.db", sqliteTarget{path: "/abs/x.db", base: "file://localhost/abs/x.db", query: url.Values{}}},
		{":memory:", sqliteTarget{path: ":memory:", base: "file::memory:", query: url.Values{}, memory: true}},
		{"file::memory:", sqliteTarget{path: ":memory:", base: "file::memory:", query: url.Values{}, memory: true}},
		{"file:db1?mode=memory&cache=shared", sqliteTarget{path: ":memory:", base: "file:db1",
			query: url.Values{"mode": {"memory"}, "cache": {"shared"}}, memory: true}},
	}
	for _, tt := range tests {
		t.Run(tt.dsn, func(t *testing.T) {
			got, err := parseDSN(tt.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(sqliteTarget{})); diff != "" {
				t.Errorf("parseDSN(%q) mismatch (-want +got):\n%s", tt.dsn, diff)
			}
		})
	}
}

func TestTargetDSN(t *testing.T) {
	target := sqliteTarget{base: "file:x.db", query: url.Values{"_pragma": {"cache_size(-2000)"}, "mode": {"rwc"}}}
	got := target.dsn(url.Values{"_pragma": {"busy_timeout(5000)"}, "_txlock": {"immediate"}})
	want := "file:x.db?_pragma=cache_size%28-2000%29&_pragma=busy_timeout%285000%29&_txlock=immediate&mode=rwc"
	if got != want {
		t.Errorf("dsn = %q, want %q", got, want)
	}
	if len(target.query["_pragma"]) != 1 {
		t.Errorf("dsn modified the target's own parameters: %v", target.query)
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://sb:hunter2@db:5432/sb":              "postgres://sb:***@db:5432/sb",
		"postgres://db/sb?user=sb&password=hunter2&x=1": "postgres://db/sb?user=sb&password=***&x=1",
		"postgresql://sb:p%40ss%3Aword@db/sb":           "postgresql://sb:***@db/sb",
		"./switchboard.db":                              "./switchboard.db",
	} {
		if got := RedactDSN(in); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}
