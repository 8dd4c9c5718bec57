package skills

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestSuggestFor(t *testing.T) {
	o := NewOffline(Default())
	tests := []struct {
		name   string
		tool   Tool
		c      Classification
		ok     bool
		want   Suggestion
		reason string
	}{
		{
			name: "unclassified tool named after its name",
			tool: Tool{Name: "toggle-subscriber-updates", Server: "everything", Description: "Toggles simulated resource subscription updates on or off."},
			ok:   true,
			want: Suggestion{Tool: "toggle-subscriber-updates", Server: "everything", ProposedName: "subscriber",
				Description: "Toggles simulated resource subscription updates on or off."},
			reason: "no skill fits well",
		},
		{
			name:   "nothing matched, name of stop words only",
			tool:   Tool{Name: "get", Description: "Frobnicates frobnicated quux", Server: "x"},
			ok:     true,
			want:   Suggestion{Tool: "get", Server: "x", ProposedName: "frobnicates_quux", Description: "Frobnicates frobnicated quux"},
			reason: "no skill matched at all",
		},
		{
			name: "classified tool needs no suggestion",
			tool: Tool{Name: "send_email", Server: "gmail", Description: "Sends a new email"},
			ok:   false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := o.Classify(tc.tool)
			got, ok := SuggestFor(tc.tool, c)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (classification %+v)", ok, tc.ok, c)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Suggestion{}, "ID", "CreatedAt", "Reason")); diff != "" {
				t.Errorf("SuggestFor (-want +got):\n%s", diff)
			}
			if !strings.Contains(got.Reason, tc.reason) || got.ID == "" || got.CreatedAt.IsZero() {
				t.Errorf("Reason %q (want %q), ID %q, CreatedAt %v", got.Reason, tc.reason, got.ID, got.CreatedAt)
			}
		})
	}
}

func TestSuggestForReasonNamesBestSkill(t *testing.T) {
	c := Classification{Skills: []Assignment{{"communication", 0.362}}, Method: MethodOffline}
	sg, ok := SuggestFor(Tool{Name: "get-annotated-message"}, c)
	if !ok || !strings.Contains(sg.Reason, "communication at 0.36") {
		t.Errorf("SuggestFor = %+v, %v; want the reason to name communication at 0.36", sg, ok)
	}
}

func TestSuggestions(t *testing.T) {
	at := func(i int) time.Time { return time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC) }
	sg := func(server, tool string, i int) Suggestion {
		return Suggestion{Server: server, Tool: tool, ProposedName: "p_" + tool, CreatedAt: at(i)}
	}
	type step struct {
		add    *Suggestion
		forget string
		server string
		want   bool // Add's result
	}
	add := func(s Suggestion, want bool) step { return step{add: &s, want: want} }
	tests := []struct {
		name  string
		limit int
		steps []step
		want  []string // server/tool, newest first
	}{
		{"newest first", 10, []step{add(sg("a", "t1", 1), true), add(sg("a", "t2", 2), true)}, []string{"a/t2", "a/t1"}},
		{"duplicate tool rejected", 10, []step{add(sg("a", "t1", 1), true), add(sg("a", "t1", 2), false), add(sg("b", "t1", 3), true)},
			[]string{"b/t1", "a/t1"}},
		{"full drops oldest", 2, []step{add(sg("a", "t1", 1), true), add(sg("a", "t2", 2), true), add(sg("a", "t3", 3), true)},
			[]string{"a/t3", "a/t2"}},
		{"forget tool", 10, []step{add(sg("a", "t1", 1), true), add(sg("b", "t1", 2), true), add(sg("a", "t2", 3), true), {forget: "t1"}},
			[]string{"a/t2"}},
		{"forget server", 10, []step{add(sg("a", "t1", 1), true), add(sg("b", "t2", 2), true), {server: "a"}},
			[]string{"b/t2"}},
		{"re-add after forget", 10, []step{add(sg("a", "t1", 1), true), {forget: "t1"}, add(sg("a", "t1", 2), true)},
			[]string{"a/t1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := NewSuggestions(tc.limit)
			for i, s := range tc.steps {
				switch {
				case s.add != nil:
					if got := q.Add(*s.add); got != s.want {
						t.Errorf("step %d: Add = %v, want %v", i, got, s.want)
					}
				case s.forget != "":
					q.Forget(s.forget)
				case s.server != "":
					q.ForgetServer(s.server)
				}
			}
			var got []string
			for _, s := range q.List() {
				got = append(got, s.Server+"/"+s.Tool)
				if s.ID == "" {
					t.Errorf("%s/%s has no ID", s.Server, s.Tool)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSuggestionsDefaultsAndDelete(t *testing.T) {
	q := NewSuggestions(0)
	for i := range DefaultMaxSuggestions + 5 {
		q.Add(Suggestion{Server: "s", Tool: fmt.Sprint(i)})
	}
	if q.Len() != DefaultMaxSuggestions {
		t.Errorf("Len = %d, want %d", q.Len(), DefaultMaxSuggestions)
	}
	first := q.List()[0]
	if first.Tool != fmt.Sprint(DefaultMaxSuggestions+4) || first.CreatedAt.IsZero() {
		t.Errorf("newest = %+v", first)
	}
	if !q.Delete(first.ID) || q.Delete(first.ID) || q.Len() != DefaultMaxSuggestions-1 {
		t.Errorf("Delete did not remove exactly once")
	}
}

func TestSuggestionsConcurrent(t *testing.T) {
	q := NewSuggestions(50)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 100 {
				q.Add(Suggestion{Server: fmt.Sprint(g), Tool: fmt.Sprint(i)})
				_ = q.List()
				if i%10 == 0 {
					q.Forget(fmt.Sprint(i - 5))
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	if n := q.Len(); n > 50 {
		t.Errorf("Len = %d, above the bound", n)
	}
}
