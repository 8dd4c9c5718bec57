package authz

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "fs.read_file", true},
		{"", "", true},
		{"", "a", false},
		{"fs", "fs", true},
		{"fs", "FS", false},
		{"fs", "fsx", false},
		{"fs.*", "fs.read_file", true},
		{"fs.*", "fs.", true},
		{"fs.*", "fs", false},
		{"fs.*", "gfs.read", false},
		{"*.read_*", "fs.read_file", true},
		{"*.read_*", "fs.write_file", false},
		{"fs.*", "fs.a/b.c", true},
		{"a/*", "a/b/c", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"**", "x", true},
		{"read_?", "read_x", false},
		{"[a]", "a", false},
		{"è*", "école", false},
		{"é*", "étude", true},
	}
	for _, tc := range tests {
		if got := match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("match(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

// refMatch is the obvious but slow matcher: the pattern as an anchored regexp.
func refMatch(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*") + `\z`).MatchString(name)
}

func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"*", ""}, {"fs.*", "fs.read"}, {"a*b*c", "aXbXc"}, {"*x*", "yyy"}, {"", "a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		got := match(pattern, name) // must not panic
		if !match("*", name) {
			t.Errorf("match(*, %q) = false", name)
		}
		if !match(name, name) {
			t.Errorf("match(%q, itself) = false", name)
		}
		if utf8.ValidString(pattern) && utf8.ValidString(name) {
			if want := refMatch(pattern, name); got != want {
				t.Errorf("match(%q, %q) = %v, reference says %v", pattern, name, got, want)
			}
		}
	})
}

func TestHighRisk(t *testing.T) {
	tests := []struct {
		name        string
		highRisk    []string
		tool        string
		destructive bool
		want        bool
	}{
		{"default write", nil, "write_file", false, true},
		{"default camelCase", nil, "createIssue", false, true},
		{"default PascalCase", nil, "DeleteRepo", false, true},
		{"default acronym", nil, "HTTPUpdate", false, true},
		{"default kebab", nil, "file-modify", false, true},
		{"default upper", nil, "WRITE_FILE", false, true},
		{"default with digits", nil, "v2delete", false, true},
		{"default read", nil, "read_file", false, false},
		{"default overwrite", nil, "overwrite", false, false},
		{"default updated_at", nil, "get_updated_at", false, false},
		{"destructive", nil, "read_file", true, true},
		{"disabled", []string{}, "write_file", false, false},
		{"disabled but destructive", []string{}, "read_file", true, true},
		{"custom word", []string{"drop"}, "drop_table", false, true},
		{"custom multi-token word", []string{"drop_table"}, "sql_DROP_TABLE_now", false, true},
		{"glob on namespaced name", []string{"db.*"}, "select", false, true},
		{"other server vs glob", []string{"db.*"}, "write_file", false, false},
		{"dot entry is a glob", []string{"fs.exec"}, "exec", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, Policy{HighRisk: tc.highRisk}, nil)
			name := "fs." + tc.tool
			if strings.HasPrefix(tc.name, "glob") {
				name = "db." + tc.tool
			}
			w.e.mu.RLock()
			got := w.e.highRiskLocked(tc.tool, name, tc.destructive)
			w.e.mu.RUnlock()
			if got != tc.want {
				t.Errorf("high-risk(%q, %q, destructive=%v) = %v, want %v", tc.tool, name, tc.destructive, got, tc.want)
			}
		})
	}
}
