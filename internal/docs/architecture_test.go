package docs

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// archPage is the page whose package table must name every package of the
// module, in an order where imports point down the table.
const archPage = "docs/architecture.md"

// packagesHeading opens the section of archPage that holds the package
// table (one table or several); the section ends at the next "## " heading.
const packagesHeading = "## Packages"

// rowRE is a table row whose first cell is a package path in a code span,
// linked or not: | `internal/x` | ... or | [`internal/x`](../internal/x) | ...
var rowRE = regexp.MustCompile("^\\|\\s*\\[?`([A-Za-z0-9_./-]+)`")

// tableRow is one package row of archPage's table.
type tableRow struct {
	line int
	pkg  string // directory relative to the module root, slash-separated
}

// packageRows returns the package rows under packagesHeading, in order,
// skipping fenced code blocks.
func packageRows(text string) []tableRow {
	var rows []tableRow
	in, inFence := false, false
	for i, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == packagesHeading
			continue
		}
		if !in {
			continue
		}
		if m := rowRE.FindStringSubmatch(line); m != nil {
			rows = append(rows, tableRow{line: i + 1, pkg: m[1]})
		}
	}
	return rows
}

// packageDirs returns the module's package directories under root
// (relative, slash-separated, sorted): every directory holding a .go file,
// test-only ones included, skipping testdata and the names the go command
// ignores (starting with "." or "_").
func packageDirs(root string) ([]string, error) {
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		if rel != "." {
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing packages under %s: %w", root, err)
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs, nil
}

// checkTable reports the packages the table lacks, the rows that name no
// package, and the packages listed twice.
func checkTable(page string, rows []tableRow, pkgs []string) []string {
	var problems []string
	listed := map[string]int{}
	for _, r := range rows {
		if first, dup := listed[r.pkg]; dup {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: listed twice (first at line %d)", page, r.line, r.pkg, first))
			continue
		}
		listed[r.pkg] = r.line
		if !slices.Contains(pkgs, r.pkg) {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: no such package", page, r.line, r.pkg))
		}
	}
	for _, p := range pkgs {
		if _, ok := listed[p]; !ok {
			problems = append(problems, fmt.Sprintf("%s: %s: no row in the package table (%q)", page, p, packagesHeading))
		}
	}
	return problems
}

// modulePath is the module path go.mod under root declares.
func modulePath(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if mod, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(mod), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
}

// moduleImports returns, for each package directory, the directories of
// the module's packages its non-test files import.
func moduleImports(root, module string, pkgs []string) (map[string][]string, error) {
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, pkg := range pkgs {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pkg), "*.go"))
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
			if err != nil {
				return nil, fmt.Errorf("reading the imports of %s: %w", file, err)
			}
			for _, imp := range f.Imports {
				ip := strings.Trim(imp.Path.Value, `"`)
				dir, ok := strings.CutPrefix(ip, module+"/")
				if ok && !slices.Contains(out[pkg], dir) {
					out[pkg] = append(out[pkg], dir)
				}
			}
		}
		slices.Sort(out[pkg])
	}
	return out, nil
}

// checkOrder reports every import of a listed package that does not point
// down the table: the imported package must have a row below the
// importer's. Unlisted packages are checkTable's business.
func checkOrder(page string, rows []tableRow, imports map[string][]string) []string {
	pos := map[string]int{}
	for i, r := range rows {
		if _, ok := pos[r.pkg]; !ok {
			pos[r.pkg] = i
		}
	}
	var problems []string
	for i, r := range rows {
		if pos[r.pkg] != i {
			continue // a duplicate row
		}
		for _, dep := range imports[r.pkg] {
			j, ok := pos[dep]
			if ok && j <= i {
				problems = append(problems, fmt.Sprintf("%s:%d: %s imports %s, whose row (line %d) is not below it",
					page, r.line, r.pkg, dep, rows[j].line))
			}
		}
	}
	return problems
}

// archRows reads the package rows of the repository's archPage.
func archRows(t *testing.T, root string) []tableRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(archPage)))
	if err != nil {
		t.Fatal(err)
	}
	rows := packageRows(string(data))
	if len(rows) == 0 {
		t.Fatalf("%s: no package rows under %q", archPage, packagesHeading)
	}
	return rows
}

// TestArchitecturePackages checks that docs/architecture.md's package
// table has one row for every package of the module, and none for a
// package that is gone.
func TestArchitecturePackages(t *testing.T) {
	root := testdeps.RepoRoot()
	pkgs, err := packageDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pkgs, "internal/docs") {
		t.Fatalf("package list %q lacks this very package: the walk is wrong", pkgs)
	}
	for _, p := range checkTable(archPage, archRows(t, root), pkgs) {
		t.Error(p)
	}
}

// TestArchitectureImportsPointDown checks the table's claim that a package
// imports only packages listed below it.
func TestArchitectureImportsPointDown(t *testing.T) {
	root := testdeps.RepoRoot()
	module, err := modulePath(root)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := packageDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	imports, err := moduleImports(root, module, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(imports["internal/app"]) == 0 {
		t.Fatalf("no module imports found for internal/app: the import scan is wrong")
	}
	for _, p := range checkOrder(archPage, archRows(t, root), imports) {
		t.Error(p)
	}
}

// TestCheckTable shows the table checks catch what they are for, on pages
// of their own.
func TestCheckTable(t *testing.T) {
	pkgs := []string{"cmd/x", "internal/a", "internal/b"}
	tests := []struct {
		name string
		page string
		want []string // substrings of the problems, in order
	}{
		{"every package listed", "## Packages\n| package | provides |\n|---|---|\n| `cmd/x` | x |\n| [`internal/a`](../internal/a) | a |\n| `internal/b` | b |\n", nil},
		{"rows in several tables of the section", "## Packages\n### One\n| `cmd/x` | x |\n### Two\n| `internal/a` | a |\n| `internal/b` | b |\n", nil},
		{"a package without a row", "## Packages\n| `cmd/x` | x |\n| `internal/a` | a |\n", []string{"internal/b: no row"}},
		{"a row without a package", "## Packages\n| `cmd/x` | x |\n| `internal/a` | a |\n| `internal/b` | b |\n| `internal/gone` | g |\n", []string{"page.md:5: internal/gone: no such package"}},
		{"a package listed twice", "## Packages\n| `cmd/x` | x |\n| `internal/a` | a |\n| `internal/b` | b |\n| `internal/a` | again |\n", []string{"page.md:5: internal/a: listed twice (first at line 3)"}},
		{"rows outside the section do not count", "## Other\n| `internal/b` | b |\n## Packages\n| `cmd/x` | x |\n| `internal/a` | a |\n## After\n| `internal/b` | b |\n", []string{"internal/b: no row"}},
		{"a row in a code block does not count", "## Packages\n| `cmd/x` | x |\n| `internal/a` | a |\n```\n| `internal/b` | b |\n```\n", []string{"internal/b: no row"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkTable("page.md", packageRows(tt.page), pkgs)
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

// TestCheckOrder shows the layering check catches an import that points
// up the table.
func TestCheckOrder(t *testing.T) {
	imports := map[string][]string{"internal/app": {"internal/core", "internal/unlisted"}, "internal/core": nil}
	tests := []struct {
		name string
		page string
		want []string
	}{
		{"imports point down", "## Packages\n| `internal/app` | |\n| `internal/core` | |\n", nil},
		{"an import points up", "## Packages\n| `internal/core` | |\n| `internal/app` | |\n", []string{"page.md:3: internal/app imports internal/core, whose row (line 2) is not below it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkOrder("page.md", packageRows(tt.page), imports)
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

// TestPackageDirs shows which directories count as packages.
func TestPackageDirs(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{
		"go.mod", "main.go", // the root itself is not listed
		"cmd/x/main.go",
		"internal/a/a.go",
		"internal/a/sub/sub.go",
		"internal/onlytests/x_test.go",
		"internal/a/testdata/fixture/f.go",
		"internal/_scratch/s.go",
		"internal/.hidden/h.go",
		"internal/assets/style.css",
	} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := packageDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cmd/x", "internal/a", "internal/a/sub", "internal/onlytests"}
	if !slices.Equal(got, want) {
		t.Errorf("packageDirs = %q, want %q", got, want)
	}
}
