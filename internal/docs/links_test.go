// Package docs holds only tests: it checks that the README and the pages
// under docs/ link to files and headings that exist, since the README's
// reference material was split into docs/ and moved text keeps its links;
// and that docs/architecture.md's package table lists every package, in
// an order where imports point down (architecture_test.go).
package docs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

var (
	// fenceRE opens or closes a fenced code block; links and headings inside
	// one are code, not Markdown (a "# comment" in a bash block is no heading).
	fenceRE = regexp.MustCompile("^\\s*(```|~~~)")
	// codeSpanRE is an inline code span; a link inside one is not a link, but
	// a link's text may be a code span, so spans are emptied, not dropped.
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	// linkRE is an inline link or image: [text](target "title").
	linkRE    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// inlineLinkRE keeps only the text of a link in a heading, as rendered.
	inlineLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// mdLink is one relative link found in a Markdown file.
type mdLink struct {
	line   int
	target string
}

// scan returns the relative links of a Markdown text and the anchors of its
// headings, skipping fenced code blocks.
func scan(text string) (links []mdLink, anchors map[string]bool) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			slug := slugify(m[1])
			// GitHub numbers repeated headings: foo, foo-1, foo-2.
			if n := seen[slug]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, "``"), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links = append(links, mdLink{line: i + 1, target: target})
		}
	}
	return links, anchors
}

// slugify is GitHub's heading anchor: the rendered text lower-cased, every
// character but letters, digits, spaces, '-' and '_' removed, spaces as '-'.
func slugify(heading string) string {
	heading = inlineLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLinks reports every relative link of the given Markdown files (paths
// relative to root) whose file does not exist or, for a #fragment, whose
// target Markdown file has no heading with that anchor.
func checkLinks(root string, files []string) ([]string, error) {
	anchorsOf := map[string]map[string]bool{}
	readAnchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		_, a := scan(string(data))
		anchorsOf[path] = a
		return a, nil
	}
	var problems []string
	for _, rel := range files {
		src := filepath.Join(root, rel)
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", rel, err)
		}
		links, _ := scan(string(data))
		for _, l := range links {
			pathPart, frag, _ := strings.Cut(l.target, "#")
			dst := src
			if pathPart != "" {
				dst = filepath.Join(filepath.Dir(src), filepath.FromSlash(pathPart))
				if _, err := os.Stat(dst); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", rel, l.line, l.target))
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dst, ".md") {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: anchor on a file that is not Markdown", rel, l.line, l.target))
				continue
			}
			anchors, err := readAnchors(dst)
			if err != nil {
				return nil, err
			}
			if !anchors[frag] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no heading with anchor #%s", rel, l.line, l.target, frag))
			}
		}
	}
	return problems, nil
}

// TestDocLinks checks every relative link of README.md and docs/*.md.
func TestDocLinks(t *testing.T) {
	root := testdeps.RepoRoot()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatalf("no docs/*.md under %s", root)
	}
	files := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	sort.Strings(files)
	problems, err := checkLinks(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckLinks shows the checker catches what it is for, on files of its own.
func TestCheckLinks(t *testing.T) {
	tests := []struct {
		name string
		page string
		want []string // substrings of the problems, in order
	}{
		{"file and anchor exist", "[a](other.md#second-part) [b](other.md) [c](#here)\n# Here\n", nil},
		{"anchor of a heading with code and punctuation", "[a](other.md#upstreams-protocol_version)\n", nil},
		{"repeated heading", "[a](other.md#dup-1)\n", nil},
		{"external links are not checked", "[a](https://example.com/x.md#nope)\n", nil},
		{"missing file", "[a](gone.md)\n", []string{"page.md:1: gone.md: no such file"}},
		{"missing anchor", "\n[a](other.md#third)\n", []string{"page.md:2: other.md#third: no heading with anchor #third"}},
		{"missing anchor in the same file", "[a](#nowhere)\n# Somewhere\n", []string{"#nowhere: no heading"}},
		{"heading inside a code block is no anchor", "[a](other.md#comment)\n", []string{"no heading with anchor #comment"}},
		{"link inside a code span is not a link", "`[a](gone.md)`\n", nil},
		{"link inside a code block is not a link", "```\n[a](gone.md)\n```\n", nil},
		{"anchor on a file that is not Markdown", "[a](data.txt#x)\n", []string{"not Markdown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			other := "# Other\n## Second part\n## Upstreams: `protocol_version`\n## Dup\n## Dup\n```bash\n# comment\n```\n"
			for name, text := range map[string]string{"page.md": tt.page, "other.md": other, "data.txt": "x"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := checkLinks(dir, []string{"page.md"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems = %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestCheckLinksUnreadable makes a missing source file an error, not a pass.
func TestCheckLinksUnreadable(t *testing.T) {
	_, err := checkLinks(t.TempDir(), []string{"absent.md"})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want one wrapping os.ErrNotExist", err)
	}
}
