package catalog

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCollisions(t *testing.T) {
	tests := []struct {
		name     string
		opts     *Options
		existing []Entry
		next     Entry
		want     *RegistrationError // nil: no collision
	}{
		{
			name:     "two unprefixed servers with the same tool",
			existing: []Entry{{Server: "a", Prefix: ptr(""), Tools: tools("x", "y")}},
			next:     Entry{Server: "b", Prefix: ptr(""), Tools: tools("x", "z")},
			want:     &RegistrationError{Server: "b", Other: "a", Names: []string{"x"}},
		},
		{
			name:     "unprefixed name equal to another server's namespaced name",
			existing: []Entry{{Server: "a", Tools: tools("b")}},
			next:     Entry{Server: "c", Prefix: ptr(""), Tools: tools("a.b")},
			want:     &RegistrationError{Server: "c", Other: "a", Names: []string{"a.b"}},
		},
		{
			name:     "the same, registered the other way round",
			existing: []Entry{{Server: "c", Prefix: ptr(""), Tools: tools("a.b")}},
			next:     Entry{Server: "a", Tools: tools("b")},
			want:     &RegistrationError{Server: "a", Other: "c", Names: []string{"a.b"}},
		},
		{
			name:     "unprefixed name equal to the other separator form",
			existing: []Entry{{Server: "a", Tools: tools("b")}},
			next:     Entry{Server: "c", Prefix: ptr(""), Tools: tools("a__b")},
			want:     &RegistrationError{Server: "c", Other: "a", Names: []string{"a__b"}},
		},
		{
			name:     "shared prefix, same tool",
			existing: []Entry{{Server: "a", Prefix: ptr("tools"), Tools: tools("t", "u")}},
			next:     Entry{Server: "b", Prefix: ptr("tools"), Tools: tools("t", "v")},
			want:     &RegistrationError{Server: "b", Other: "a", Names: []string{"tools.t"}},
		},
		{
			name:     "shared prefix, distinct tools",
			existing: []Entry{{Server: "a", Prefix: ptr("tools"), Tools: tools("t")}},
			next:     Entry{Server: "b", Prefix: ptr("tools"), Tools: tools("u")},
		},
		{
			name: "names only the first of two clashing servers",
			existing: []Entry{
				{Server: "z", Prefix: ptr(""), Tools: tools("x")},
				{Server: "m", Prefix: ptr(""), Tools: tools("y")},
			},
			next: Entry{Server: "b", Prefix: ptr(""), Tools: tools("x", "y")},
			want: &RegistrationError{Server: "b", Other: "m", Names: []string{"y"}},
		},
		{
			name:     "prompts collide like tools",
			existing: []Entry{{Server: "a", Prefix: ptr(""), Prompts: []*mcp.Prompt{{Name: "greet"}}}},
			next:     Entry{Server: "b", Prefix: ptr(""), Prompts: []*mcp.Prompt{{Name: "greet"}}},
			want:     &RegistrationError{Server: "b", Other: "a", Names: []string{"greet"}},
		},
		{
			name:     "a tool and a prompt do not collide",
			existing: []Entry{{Server: "a", Prefix: ptr(""), Tools: tools("x")}},
			next:     Entry{Server: "b", Prefix: ptr(""), Prompts: []*mcp.Prompt{{Name: "x"}}},
		},
		{
			name:     "resource URIs and templates collide",
			existing: []Entry{{Server: "a", Prefix: ptr(""), Resources: []*mcp.Resource{{URI: "file:///x"}}, Templates: []*mcp.ResourceTemplate{{URITemplate: "file:///{p}"}}}},
			next:     Entry{Server: "b", Prefix: ptr(""), Resources: []*mcp.Resource{{URI: "file:///x"}}, Templates: []*mcp.ResourceTemplate{{URITemplate: "file:///{p}"}}},
			want:     &RegistrationError{Server: "b", Other: "a", Names: []string{"file:///x", "file:///{p}"}},
		},
		{
			name:     "prefixed resources never collide",
			existing: []Entry{{Server: "a", Resources: []*mcp.Resource{{URI: "file:///x"}}}},
			next:     Entry{Server: "b", Resources: []*mcp.Resource{{URI: "file:///x"}}},
		},
		{
			name:     "a server does not collide with its own previous entry",
			existing: []Entry{{Server: "a", Prefix: ptr(""), Tools: tools("x")}},
			next:     Entry{Server: "a", Prefix: ptr(""), Tools: tools("x", "y")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.opts)
			for _, e := range tt.existing {
				mustSet(t, c, e)
			}
			before := c.Snapshot()
			rej, err := c.Set(tt.next)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Set: unexpected error %v", err)
				}
				if len(rej) > 0 {
					t.Fatalf("Set rejected %v", rej)
				}
				return
			}
			if !errors.Is(err, ErrCollision) {
				t.Fatalf("Set error = %v, want one matching ErrCollision", err)
			}
			var re *RegistrationError
			if !errors.As(err, &re) {
				t.Fatalf("Set error %T is not a *RegistrationError", err)
			}
			if diff := cmp.Diff(tt.want, re); diff != "" {
				t.Errorf("RegistrationError (-want +got):\n%s", diff)
			}
			if rej != nil {
				t.Errorf("rejected = %v, want nil with a collision", rej)
			}
			if after := c.Snapshot(); after != before {
				t.Errorf("catalog changed: version %d → %d", before.Version(), after.Version())
			}
		})
	}
}

func TestCollisionKeepsPreviousEntry(t *testing.T) {
	c := New(nil)
	mustSet(t, c, Entry{Server: "a", Prefix: ptr(""), Tools: tools("x")})
	mustSet(t, c, Entry{Server: "b", Prefix: ptr(""), Tools: tools("old")})
	_, err := c.Set(Entry{Server: "b", Prefix: ptr(""), Tools: tools("x", "new")})
	if !errors.Is(err, ErrCollision) {
		t.Fatalf("Set error = %v, want ErrCollision", err)
	}
	want := "registering server \"b\": name collision with server \"a\": x"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	snap := c.Snapshot()
	if diff := cmp.Diff([]string{"x", "old"}, toolNamesOf(snap.Tools())); diff != "" {
		t.Errorf("tools after a refused Set (-want +got):\n%s", diff)
	}
	if tool, _ := snap.Tool("x"); tool.Server != "a" {
		t.Errorf("x belongs to %q, want a", tool.Server)
	}
}

func TestInvalidEntry(t *testing.T) {
	for _, e := range []Entry{
		{Server: ""},
		{Server: "Upper"},
		{Server: "_lead"},
		{Server: "has.dot"},
		{Server: "ok", Prefix: ptr("a+b")},
		{Server: "ok", Prefix: ptr("-lead")},
		{Server: "ok", Prefix: ptr("sp ace")},
	} {
		c := New(nil)
		if _, err := c.Set(e); err == nil {
			t.Errorf("Set(server %q, prefix %v) succeeded, want an error", e.Server, e.Prefix)
		}
		if v := c.Snapshot().Version(); v != 0 {
			t.Errorf("invalid entry changed the catalog to version %d", v)
		}
	}
}
