package front

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSessionsLRU drives the session table through scripts: each step opens,
// uses, releases or ends sessions, and says which sessions the step must
// evict (in order) or which cap must refuse it.
func TestSessionsLRU(t *testing.T) {
	type step struct {
		op      string // open, slot (reserve only), hold, let, end, drop (release a slot)
		who     string // identity (open, slot, hold)
		id      string // session (or slot) name
		evicted []string
		refused string // LimitIdentity or LimitTotal
	}
	open := func(who, id string, evicted ...string) step {
		return step{op: "open", who: who, id: id, evicted: evicted}
	}
	tests := []struct {
		name       string
		max, per   int
		steps      []step
		wantLive   int
		wantIdle   []string // least recently used first
		identities int      // identities still counted
	}{
		{
			name: "under the caps nothing is evicted",
			max:  3, per: 3,
			steps:    []step{open("a", "s1"), open("a", "s2"), open("b", "s3")},
			wantLive: 3, wantIdle: []string{"s1", "s2", "s3"}, identities: 2,
		},
		{
			name: "per-identity cap evicts that identity's least recently used",
			max:  10, per: 2,
			steps: []step{open("a", "a1"), open("b", "b1"), open("a", "a2"), open("b", "b2"),
				open("a", "a3", "a1"), open("a", "a4", "a2")},
			wantLive: 4, wantIdle: []string{"b1", "b2", "a3", "a4"}, identities: 2,
		},
		{
			name: "total cap evicts anyone's least recently used",
			max:  3, per: 3,
			steps:    []step{open("a", "a1"), open("b", "b1"), open("a", "a2"), open("c", "c1", "a1"), open("c", "c2", "b1")},
			wantLive: 3, wantIdle: []string{"a2", "c1", "c2"}, identities: 2,
		},
		{
			name: "a use makes a session the most recently used",
			max:  2, per: 2,
			steps: []step{open("a", "s1"), open("a", "s2"),
				{op: "hold", who: "a", id: "s1"}, {op: "let", id: "s1"},
				open("a", "s3", "s2")},
			wantLive: 2, wantIdle: []string{"s1", "s3"}, identities: 1,
		},
		{
			name: "a busy session is skipped",
			max:  10, per: 2,
			steps: []step{open("a", "s1"), open("a", "s2"), {op: "hold", who: "a", id: "s1"},
				open("a", "s3", "s2")},
			wantLive: 2, wantIdle: []string{"s3"}, identities: 1,
		},
		{
			name: "all busy: per-identity refusal, and another identity is not affected",
			max:  10, per: 2,
			steps: []step{open("a", "s1"), open("a", "s2"),
				{op: "hold", who: "a", id: "s1"}, {op: "hold", who: "a", id: "s2"},
				{op: "open", who: "a", id: "s3", refused: LimitIdentity},
				open("b", "b1"), open("b", "b2")},
			wantLive: 4, wantIdle: []string{"b1", "b2"}, identities: 2,
		},
		{
			name: "all busy: total refusal",
			max:  2, per: 5,
			steps: []step{open("a", "s1"), {op: "hold", who: "a", id: "s1"},
				{op: "slot", who: "b", id: "sse"},
				{op: "open", who: "c", id: "c1", refused: LimitTotal}},
			wantLive: 2, wantIdle: nil, identities: 2,
		},
		{
			name: "refusal first checks the identity cap",
			max:  2, per: 1,
			steps: []step{open("a", "s1"), {op: "hold", who: "a", id: "s1"},
				{op: "slot", who: "b", id: "sse"},
				{op: "open", who: "a", id: "s2", refused: LimitIdentity}},
			wantLive: 2, identities: 2,
		},
		{
			name: "an identity eviction also makes room in the total",
			max:  2, per: 1,
			steps:    []step{open("a", "a1"), open("b", "b1"), open("a", "a2", "a1")},
			wantLive: 2, wantIdle: []string{"b1", "a2"}, identities: 2,
		},
		{
			name: "a use by another identity neither counts nor reorders",
			max:  2, per: 2,
			steps: []step{open("a", "s1"), open("a", "s2"), {op: "hold", who: "mallory", id: "s1"},
				open("a", "s3", "s1")},
			wantLive: 2, wantIdle: []string{"s2", "s3"}, identities: 1,
		},
		{
			name: "ended sessions are forgotten, and their identity with them",
			max:  2, per: 2,
			steps: []step{open("a", "s1"), open("b", "s2"), {op: "end", id: "s1"}, {op: "end", id: "s1"},
				open("c", "s3")},
			wantLive: 2, wantIdle: []string{"s2", "s3"}, identities: 2,
		},
		{
			name: "a session ended while in use is forgotten, its release is a no-op",
			max:  3, per: 3,
			steps: []step{open("a", "s1"), {op: "hold", who: "a", id: "s1"}, {op: "end", id: "s1"},
				{op: "let", id: "s1"}},
			wantLive: 0, identities: 0,
		},
		{
			name: "a slot never bound (no session started) stops counting on release",
			max:  1, per: 1,
			steps: []step{{op: "slot", who: "a", id: "x"}, {op: "open", who: "a", id: "s1", refused: LimitIdentity},
				{op: "drop", id: "x"}, open("a", "s1")},
			wantLive: 1, wantIdle: []string{"s1"}, identities: 1,
		},
		{
			name: "unknown sessions are not found",
			max:  1, per: 1,
			steps: []step{{op: "hold", who: "a", id: "nope"}, {op: "end", id: "nope"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSessions(&SessionOptions{MaxSessions: tt.max, MaxSessionsPerIdentity: tt.per})
			var evicted []string
			releases := map[string]func(){}
			slots := map[string]*sessionEntry{}
			for i, st := range tt.steps {
				evicted = nil
				switch st.op {
				case "open", "slot":
					e, err := s.reserve(st.who)
					var ce *capError
					switch {
					case st.refused != "":
						if !errors.As(err, &ce) || ce.limit != st.refused {
							t.Fatalf("step %d: reserve = %v, want refusal by the %s cap", i, err, st.refused)
						}
						continue
					case err != nil:
						t.Fatalf("step %d: reserve: %v", i, err)
					}
					if st.op == "slot" {
						slots[st.id] = e
						break
					}
					id := st.id
					s.bind(e, id, func() { evicted = append(evicted, id) })
					s.release(e)
				case "drop":
					s.release(slots[st.id])
				case "hold":
					release, ok := s.use(st.id, st.who)
					if ok != (s.byID[st.id] != nil) {
						t.Fatalf("step %d: use ok = %v", i, ok)
					}
					if !ok {
						if st.id != "nope" {
							t.Fatalf("step %d: %s not found", i, st.id)
						}
						continue
					}
					releases[st.id] = release
				case "let":
					releases[st.id]()
				case "end":
					s.forget(st.id)
				}
				if d := cmp.Diff(st.evicted, evicted); d != "" {
					t.Fatalf("step %d (%s %s): evicted (-want +got):\n%s", i, st.op, st.id, d)
				}
			}
			if got := s.Live(); got != tt.wantLive {
				t.Errorf("Live = %d, want %d", got, tt.wantLive)
			}
			var idle []string
			for el := s.idle.Front(); el != nil; el = el.Next() {
				idle = append(idle, el.Value.(*sessionEntry).id)
			}
			if d := cmp.Diff(tt.wantIdle, idle); d != "" {
				t.Errorf("idle, least recently used first (-want +got):\n%s", d)
			}
			if len(s.ids) != tt.identities {
				t.Errorf("identities counted = %d, want %d", len(s.ids), tt.identities)
			}
			// The per-identity lists hold the global one's entries.
			var own []string
			for _, is := range s.ids {
				for el := is.idle.Front(); el != nil; el = el.Next() {
					own = append(own, el.Value.(*sessionEntry).id)
				}
			}
			slices.Sort(own)
			slices.Sort(idle)
			if d := cmp.Diff(idle, own); d != "" {
				t.Errorf("per-identity idle lists differ from the global one (-global +own):\n%s", d)
			}
		})
	}
}

// TestSessionsDefaults: nil options give the documented caps, and the hooks
// see every change.
func TestSessionsDefaults(t *testing.T) {
	s := NewSessions(nil)
	if s.max != DefaultMaxSessions || s.perIdentity != DefaultMaxSessionsPerIdentity {
		t.Fatalf("caps = %d/%d, want %d/%d", s.max, s.perIdentity, DefaultMaxSessions, DefaultMaxSessionsPerIdentity)
	}
	var live []int
	var evicted, refused []string
	s = NewSessions(&SessionOptions{MaxSessions: 1, MaxSessionsPerIdentity: 1,
		OnLive:   func(n int) { live = append(live, n) },
		OnEvict:  func(l string) { evicted = append(evicted, l) },
		OnRefuse: func(l string) { refused = append(refused, l) },
	})
	e, _ := s.reserve("a")
	s.bind(e, "s1", func() {})
	s.release(e)
	e, _ = s.reserve("a") // evicts s1
	s.bind(e, "s2", func() {})
	if _, err := s.reserve("b"); err == nil {
		t.Fatal("reserve over a busy total succeeded")
	}
	s.release(e)
	s.forget("s2")
	if d := cmp.Diff([]int{1, 0, 1, 0}, live); d != "" {
		t.Errorf("OnLive (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{LimitIdentity}, evicted); d != "" {
		t.Errorf("OnEvict (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{LimitTotal}, refused); d != "" {
		t.Errorf("OnRefuse (-want +got):\n%s", d)
	}
}
