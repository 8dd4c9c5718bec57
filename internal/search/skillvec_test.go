package search

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// axisEmbedder puts a text on one axis per topic word it contains, so a
// skill's centroid is predictable: files on axis 0, issues on 1, mail on 2.
type axisEmbedder struct{}

func (axisEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 4)
		t = strings.ToLower(t)
		for axis, word := range []string{"file", "issue", "mail"} {
			if strings.Contains(t, word) {
				v[axis] = 1
			}
		}
		v[3] = 0.01 // never the zero vector
		out[i] = v
	}
	return out, nil
}

// skillTools is SkillVectors as skill → tool count, and each vector's
// dominant axis.
func skillTools(ix *Index) (map[string]int, map[string]int) {
	tools, axis := map[string]int{}, map[string]int{}
	for _, sv := range ix.SkillVectors() {
		tools[sv.Skill] = sv.Tools
		best := 0
		for j, x := range sv.Vector {
			if x > sv.Vector[best] {
				best = j
			}
		}
		axis[sv.Skill] = best
	}
	return tools, axis
}

// TestSkillVectors follows the per-skill embeddings through a discovery, a
// re-classification and a server's removal (seed 004 AG-US3 AC5, AG-US8 AC7).
func TestSkillVectors(t *testing.T) {
	ctx := t.Context()
	ix := NewIndex(&Options{Embedder: axisEmbedder{}})
	t.Cleanup(ix.Close)
	flush := func() {
		t.Helper()
		if err := ix.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ix.ReplaceServer("fs", []Doc{
		{Name: "fs.read_file", Description: "Read a file", Skills: []string{"file_system"}},
		{Name: "fs.write_file", Description: "Write a file", Skills: []string{"file_system", "documents"}},
	})
	ix.ReplaceServer("gh", []Doc{{Name: "gh.create_issue", Description: "Open an issue", Skills: []string{"issue_tracking"}}})
	ix.ReplaceServer("mail", []Doc{{Name: "mail.send", Description: "Send mail", Skills: []string{"email"}}})
	flush()

	steps := []struct {
		name      string
		change    func()
		wantTools map[string]int
		wantAxis  map[string]int
	}{
		{"discovered", func() {},
			map[string]int{"file_system": 2, "documents": 1, "issue_tracking": 1, "email": 1},
			map[string]int{"file_system": 0, "documents": 0, "issue_tracking": 1, "email": 2}},
		{"re-classified", func() {
			ix.ReplaceServer("gh", []Doc{{Name: "gh.create_issue", Description: "Open an issue", Skills: []string{"email"}}})
		},
			map[string]int{"file_system": 2, "documents": 1, "email": 2},
			map[string]int{"file_system": 0, "documents": 0, "email": 1}}, // ties go to the lower axis
		{"server gone", func() { ix.ReplaceServer("mail", nil) },
			map[string]int{"file_system": 2, "documents": 1, "email": 1},
			map[string]int{"file_system": 0, "documents": 0, "email": 1}},
	}
	for _, st := range steps {
		st.change()
		flush()
		tools, axis := skillTools(ix)
		if diff := cmp.Diff(st.wantTools, tools); diff != "" {
			t.Errorf("%s: tools per skill (-want +got):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(st.wantAxis, axis); diff != "" {
			t.Errorf("%s: dominant axis per skill (-want +got):\n%s", st.name, diff)
		}
	}

	ranked, err := ix.RankSkills(ctx, "which file", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranked) != 2 || ranked[0].Skill != "documents" && ranked[0].Skill != "file_system" || ranked[0].Score < 0.9 {
		t.Errorf("RankSkills(which file) = %v, want a file skill first", ranked)
	}

	plain := NewIndex(nil)
	t.Cleanup(plain.Close)
	plain.ReplaceServer("fs", []Doc{{Name: "fs.read_file", Skills: []string{"file_system"}}})
	if sv := plain.SkillVectors(); len(sv) != 0 {
		t.Errorf("without an embedder: %v", sv)
	}
	if r, err := plain.RankSkills(ctx, "file", 0); r != nil || err != nil {
		t.Errorf("RankSkills without an embedder = %v, %v", r, err)
	}
}
