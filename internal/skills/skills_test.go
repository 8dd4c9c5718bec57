package skills

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefault(t *testing.T) {
	d := Default()
	if err := Validate(d); err != nil {
		t.Fatalf("Validate(Default()): %v", err)
	}
	if n := len(d); n < 15 || n > 25 {
		t.Errorf("Default() has %d skills, want 15–25", n)
	}
	required := []string{"code_management", "issue_tracking", "file_system", "database", "web_search",
		"browser_automation", "communication", "documents", "calendar", "cloud_infrastructure", "monitoring",
		"memory_knowledge", "data_analysis"}
	have := map[string]bool{}
	for _, s := range d {
		have[s.ID] = true
		if n := len(s.Examples); n < 4 || n > 8 {
			t.Errorf("skill %s has %d examples, want 4–8", s.ID, n)
		}
	}
	for _, id := range required {
		if !have[id] {
			t.Errorf("Default() lacks skill %s", id)
		}
	}
	d[0].Examples[0] = "mutated"
	if Default()[0].Examples[0] == "mutated" {
		t.Error("Default() returns shared slices")
	}
}

func TestValidate(t *testing.T) {
	ok := Skill{ID: "ok_skill", Name: "OK", Description: "fine"}
	tests := []struct {
		name   string
		skills []Skill
		want   []string // substrings, one per reported problem
	}{
		{"valid", []Skill{ok}, nil},
		{"empty", nil, []string{"no skills defined"}},
		{"all problems at once", []Skill{
			ok,
			{ID: "", Name: "", Description: " "},
			{ID: "Bad-Id", Name: "x", Description: "y"},
			{ID: "ok_skill", Name: "dup", Description: "d"},
			{ID: "trailing_", Name: "x", Description: "y"},
		}, []string{
			"skills[1]: id is empty",
			"skills[1]: name is empty",
			"skills[1]: description is empty",
			`skills[2] (Bad-Id): id "Bad-Id" is not snake_case`,
			`skills[3] (ok_skill): id "ok_skill" already used by skills[0]`,
			`skills[4] (trailing_): id "trailing_" is not snake_case`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.skills)
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Validate() = %v, want %d problems: %q", err, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string // stems
	}{
		{"getTinyImage", []string{"tiny", "imag"}},
		{"get-tiny-image", []string{"tiny", "imag"}},
		{"read_text_file", []string{"read", "text", "file"}},
		{"github.create_issue", []string{"github", "issu"}},
		{"Create a new issue in a GitHub repository", []string{"issu", "github", "repository"}},
		{"HTTPServer sampleLLM", []string{"http", "sampl", "llm"}}, // "server" is a stop word
		{"list_directory_with_sizes", []string{"directory", "size"}},
		{"Searches files; running queries", []string{"search", "file", "run", "query"}},
		{"k8s_pods repo", []string{"kubernet", "pod", "repository"}},
		{"", nil},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var got []string
			for _, tk := range tokenize(tc.in) {
				got = append(got, tk.stem)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tokenize(%q) stems (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestOfflineContract(t *testing.T) {
	o := NewOffline(Default())
	tests := []struct {
		name string
		tool Tool
		want Classification
	}{
		{"nothing fits at all", Tool{Name: "frobnicate", Description: "Zorps the quux"},
			Classification{Skills: []Assignment{}, Method: MethodOffline}},
		{"empty tool", Tool{}, Classification{Skills: []Assignment{}, Method: MethodOffline}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, o.Classify(tc.tool)); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("clear case is classified with a secondary skill", func(t *testing.T) {
		c := o.Classify(Tool{Name: "create_issue", Server: "github", Description: "Create a new issue in a GitHub repository"})
		if c.Primary != "issue_tracking" || !c.Classified || c.Skills[0].Confidence < PrimaryThreshold {
			t.Fatalf("Classify = %+v, want primary issue_tracking ≥ 0.5", c)
		}
		if len(c.Skills) < 2 || c.Skills[1].SkillID != "code_management" {
			t.Errorf("Skills = %v, want code_management second", c.Skills)
		}
	})
	t.Run("empty taxonomy files nothing", func(t *testing.T) {
		c := NewOffline(nil).Classify(Tool{Name: "create_issue"})
		if diff := cmp.Diff(Classification{Skills: []Assignment{}, Method: MethodOffline}, c); diff != "" {
			t.Errorf("Classify (-want +got):\n%s", diff)
		}
	})
	t.Run("Skills is a copy", func(t *testing.T) {
		s := o.Skills()
		s[0].ID = "changed"
		if o.Skills()[0].ID == "changed" {
			t.Error("Skills() exposes the classifier's taxonomy")
		}
	})
	t.Run("ClassifyBatch keeps order", func(t *testing.T) {
		tools := []Tool{{Name: "send_email"}, {Name: "list_directory"}, {Name: "frobnicate"}}
		var got []string
		for _, c := range o.ClassifyBatch(t.Context(), tools) {
			got = append(got, c.Primary)
		}
		if diff := cmp.Diff([]string{"email", "file_system", ""}, got); diff != "" {
			t.Errorf("primaries (-want +got):\n%s", diff)
		}
	})
}

// FuzzClassify checks the Classification contract on arbitrary text.
func FuzzClassify(f *testing.F) {
	f.Add("create_issue", "Create a new issue in a GitHub repository", "github", "repo")
	f.Add("getTinyImage", "Returns the MCP_TINY_IMAGE", "everything", "")
	f.Add("", "", "", "")
	f.Add("ÀÉ_ñ-ẞ.日本", "\xff\xfe", "a.b", "x y")
	o := NewOffline(Default())
	f.Fuzz(func(t *testing.T, name, desc, server, param string) {
		c := o.Classify(Tool{Name: name, Description: desc, Server: server, Params: []string{param}})
		if len(c.Skills) > 3 {
			t.Fatalf("%d skills", len(c.Skills))
		}
		for i, a := range c.Skills {
			if a.Confidence < 0 || a.Confidence > 1 || a.Confidence != a.Confidence {
				t.Fatalf("confidence %v outside [0,1]", a.Confidence)
			}
			if i > 0 && a.Confidence > c.Skills[i-1].Confidence {
				t.Fatalf("skills not sorted: %v", c.Skills)
			}
		}
		wantPrimary := ""
		if len(c.Skills) > 0 && c.Skills[0].Confidence >= PrimaryThreshold {
			wantPrimary = c.Skills[0].SkillID
		}
		if c.Primary != wantPrimary || c.Classified != (wantPrimary != "") || c.Method != MethodOffline {
			t.Fatalf("inconsistent classification %+v", c)
		}
	})
}
