package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// entry is one FOLDOC entry: its headwords and its text after them.
type entry struct {
	heads []string
	body  string
}

const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// decode64 reads dictd's base-64 numbers.
func decode64(s string) (int, error) {
	n := 0
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(b64, s[i])
		if d < 0 || n > 1<<40 {
			return 0, fmt.Errorf("bad number %q", s)
		}
		n = n*64 + d
	}
	return n, nil
}

// readDict reads a dictd index and its data: the entries, each with the
// headwords that point at it, in the order of the data.
func readDict(indexPath, dictPath string) ([]entry, error) {
	data, err := readData(dictPath)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(indexPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type span struct{ off, n int }
	heads := map[span][]string{}
	var order []span
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		p := strings.Split(sc.Text(), "\t")
		if len(p) < 3 {
			return nil, fmt.Errorf("%s:%d: want headword, offset and length", indexPath, line)
		}
		off, err1 := decode64(p[1])
		n, err2 := decode64(p[2])
		if err := errors.Join(err1, err2); err != nil || off+n > len(data) {
			return nil, fmt.Errorf("%s:%d: bad offset or length", indexPath, line)
		}
		s := span{off, n}
		if _, ok := heads[s]; !ok {
			order = append(order, s)
		}
		heads[s] = append(heads[s], p[0])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(order, func(i, j int) bool { return order[i].off < order[j].off })
	var out []entry
	for _, s := range order {
		text := string(data[s.off : s.off+s.n])
		// The entry repeats its headwords, one a line, then a blank line.
		body := text
		if i := strings.Index(text, "\n\n"); i >= 0 {
			body = text[i+2:]
		}
		out = append(out, entry{heads: heads[s], body: body})
	}
	return out, nil
}

// readData reads the dictionary's data, decompressing a dictzip (gzip) file.
func readData(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return io.ReadAll(zr)
	}
	return b, nil
}

// Classes of related terms, strongest first.
const (
	classAlias = 'a' // another headword of the entry, or what "See" points to
	classXref  = 'x' // cross-referenced in the first paragraph
)

// maxRelated bounds the related terms kept per headword.
const maxRelated = 24

var (
	xrefRE = regexp.MustCompile(`\{([^{}]+)\}`)
	seeRE  = regexp.MustCompile(`^\s*(?:<[^>]*>\s*)?(?:\d\.\s*)?See\s`)
)

// firstParagraph is an entry's first paragraph of its first sense,
// unwrapped.
func firstParagraph(body string) string {
	body = strings.TrimLeft(body, "\n")
	if i := strings.Index(body, "\n\n"); i >= 0 {
		body = body[:i]
	}
	return strings.Join(strings.Fields(body), " ")
}

type table struct {
	keys []string
	rel  map[string][]related
}

type related struct {
	class byte
	term  string
}

func normalize(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// usable reports whether a headword or term is kept: letters, digits,
// spaces and hyphens, at most three words, starting with a letter.
func usable(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || strings.Count(s, " ") > 2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == ' ' || c == '-') {
			return false
		}
	}
	return true
}

// build relates each headword to its entry's other headwords and
// cross-references. Definition words are left out: measured on the search
// relevance sets, they matched more wrong tools than right ones.
func build(entries []entry) *table {
	t := &table{rel: map[string][]related{}}
	for _, e := range entries {
		p := firstParagraph(e.body)
		var rel []related
		have := map[string]bool{}
		addRel := func(class byte, term string) {
			term = normalize(term)
			if !usable(term) || have[term] || len(rel) >= maxRelated {
				return
			}
			have[term] = true
			rel = append(rel, related{class, term})
		}
		for _, h := range e.heads {
			addRel(classAlias, h)
		}
		see := seeRE.MatchString(p)
		for _, m := range xrefRE.FindAllStringSubmatch(p, -1) {
			if see {
				addRel(classAlias, m[1])
			} else {
				addRel(classXref, m[1])
			}
		}
		for _, h := range e.heads {
			k := normalize(h)
			if !usable(k) {
				continue
			}
			var own []related
			for _, r := range rel {
				if r.term != k {
					own = append(own, r)
				}
			}
			if len(own) == 0 {
				continue
			}
			if _, dup := t.rel[k]; dup {
				// A headword of several entries ("fork" the system call
				// and ...) keeps the first entry's terms, then the others'
				// aliases.
				for _, r := range own {
					if r.class == classAlias && len(t.rel[k]) < maxRelated {
						t.rel[k] = append(t.rel[k], r)
					}
				}
				continue
			}
			t.rel[k] = own
			t.keys = append(t.keys, k)
		}
	}
	sort.Strings(t.keys)
	return t
}

// encode writes the table as text, one headword a line, sorted:
//
//	# source
//	headword TAB class term ; class term ; ...
//
// with class a (alias) or x (cross-reference).
func (t *table) encode(source string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n", source)
	for _, k := range t.keys {
		b.WriteString(k)
		b.WriteByte('\t')
		for i, r := range t.rel[k] {
			if i > 0 {
				b.WriteByte(';')
			}
			b.WriteByte(r.class)
			b.WriteString(r.term)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}
