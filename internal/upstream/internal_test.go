package upstream

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChildEnv(t *testing.T) {
	gateway := map[string]string{"PATH": "/bin", "HOME": "/root", "SECRET": "s3cr3t", "TOKEN": "tok", "EMPTY": ""}
	getenv := func(k string) string { return gateway[k] }
	tests := []struct {
		name        string
		base        []string
		passthrough []string
		env         map[string]string
		want        []string
	}{
		{
			name: "only base names that are set",
			base: []string{"PATH", "HOME", "UNSET", "EMPTY"},
			want: []string{"HOME=/root", "PATH=/bin"},
		},
		{
			name:        "passthrough adds named vars",
			base:        []string{"PATH"},
			passthrough: []string{"TOKEN", "UNSET"},
			want:        []string{"PATH=/bin", "TOKEN=tok"},
		},
		{
			name:        "env wins over base and passthrough",
			base:        []string{"PATH"},
			passthrough: []string{"TOKEN"},
			env:         map[string]string{"PATH": "/opt/bin", "TOKEN": "mine", "EXTRA": "x"},
			want:        []string{"EXTRA=x", "PATH=/opt/bin", "TOKEN=mine"},
		},
		{
			name: "empty environment is empty, not inherited",
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := childEnv(getenv, tt.base, tt.passthrough, tt.env)
			if got == nil {
				t.Fatal("childEnv returned nil, which exec.Cmd reads as the whole gateway environment")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("childEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRedactor(t *testing.T) {
	raw := "https://alice:hunter2-pw@example.com/mcp?key=query-secret&mode=x"
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	r := newRedactor(u, raw, map[string]string{
		"Authorization": "Bearer tok-abcdef",
		"X-Api-Key":     "key-123456",
		"X-Flag":        "1", // too short to be worth redacting
	})
	tests := []struct {
		in, want string
	}{
		{`Post "` + raw + `": EOF`, `Post "https://example.com/mcp": EOF`},
		{`Get "https://alice:***@example.com/mcp?key=query-secret&mode=x": refused`, `Get "https://example.com/mcp?key=[REDACTED]&mode=x": refused`},
		{u.Redacted(), "https://example.com/mcp"},
		{"bad token tok-abcdef", "bad token [REDACTED]"},
		{"header Bearer tok-abcdef rejected", "header [REDACTED] rejected"},
		{"key-123456 and hunter2-pw", "[REDACTED] and [REDACTED]"},
		{"flag 1 stays", "flag 1 stays"},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var nilR *redactor
	if got := nilR.String("as is"); got != "as is" {
		t.Errorf("nil redactor changed its input: %q", got)
	}
	if got := nilR.Error(nil); got != "" {
		t.Errorf("nil error redacted to %q", got)
	}
}

func TestLineRing(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		first string
		last  string
		size  int
	}{
		{"empty", 0, "", "", 0},
		{"partial", 3, "line 0", "line 2", 3},
		{"full", stderrLines, "line 0", fmt.Sprintf("line %d", stderrLines-1), stderrLines},
		{"wrapped", stderrLines + 7, "line 7", fmt.Sprintf("line %d", stderrLines+6), stderrLines},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r lineRing
			for i := range tt.n {
				r.add(fmt.Sprintf("line %d", i))
			}
			got := r.snapshot()
			if len(got) != tt.size {
				t.Fatalf("snapshot has %d lines, want %d", len(got), tt.size)
			}
			if tt.size > 0 && (got[0] != tt.first || got[len(got)-1] != tt.last) {
				t.Errorf("snapshot runs %q..%q, want %q..%q", got[0], got[len(got)-1], tt.first, tt.last)
			}
			if r.last() != tt.last {
				t.Errorf("last() = %q, want %q", r.last(), tt.last)
			}
		})
	}
}

func TestReadLines(t *testing.T) {
	long := strings.Repeat("x", 3*maxStderrLine)
	in := "first\r\n" + long + "\nafter long\nunterminated"
	var r lineRing
	last := readLines(strings.NewReader(in), &r, nil, slog.New(slog.DiscardHandler))
	want := []string{"first", long[:maxStderrLine], "after long", "unterminated"}
	if diff := cmp.Diff(want, r.snapshot()); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if last != "unterminated" {
		t.Errorf("last = %q, want %q", last, "unterminated")
	}
}
