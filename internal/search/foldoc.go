package search

import (
	_ "embed"
	"errors"
	"sort"
	"strings"
	"sync"
)

// foldocTable is FOLDOC, the Free On-line Dictionary of Computing, compiled
// by ./foldoc (see its doc for how to regenerate it): per computing term,
// one line of the terms its entry relates it to. It is read in place;
// only the lines' offsets are on the heap.
//
//go:embed foldoc.txt
var foldocTable string

// computingDict reads a table in the format ./foldoc writes.
type computingDict struct {
	data   string
	source string
	lines  []uint32 // start of each headword line, in order
}

var errComputingDict = errors.New("malformed FOLDOC table")

var defaultComputingDict = sync.OnceValues(func() (*computingDict, error) { return parseComputingDict(foldocTable) })

func parseComputingDict(data string) (*computingDict, error) {
	if !strings.HasPrefix(data, "# ") {
		return nil, errComputingDict
	}
	nl := strings.IndexByte(data, '\n')
	if nl < 0 || !strings.HasSuffix(data, "\n") {
		return nil, errComputingDict
	}
	cd := &computingDict{data: data, source: data[2:nl]}
	prev := ""
	for p := nl + 1; p < len(data); {
		end := p + strings.IndexByte(data[p:], '\n')
		tab := strings.IndexByte(data[p:end], '\t')
		if tab <= 0 {
			return nil, errComputingDict
		}
		key := data[p : p+tab]
		if key <= prev {
			return nil, errComputingDict // not sorted: binary search would miss
		}
		prev = key
		cd.lines = append(cd.lines, uint32(p))
		p = end + 1
	}
	return cd, nil
}

// lookup returns the related terms of a headword, "" if there is none.
func (cd *computingDict) lookup(key string) string {
	line := func(i int) (string, string) {
		p := int(cd.lines[i])
		end := p + strings.IndexByte(cd.data[p:], '\n')
		tab := strings.IndexByte(cd.data[p:end], '\t')
		return cd.data[p : p+tab], cd.data[p+tab+1 : end]
	}
	i := sort.Search(len(cd.lines), func(i int) bool { k, _ := line(i); return k >= key })
	if i < len(cd.lines) {
		if k, rel := line(i); k == key {
			return rel
		}
	}
	return ""
}

// How much each class of related term counts against an exact match: an
// alias is a synonym in computing ("folder" for "directory"), a
// cross-reference a related concept ("URL" for "website"). FOLDOC's
// aliases weigh more than WordNet's general relatives (see expandWeight):
// the dictionary is about software, as tools are. Each is scaled by
// foldocKnown when some tool uses the query word, by foldocUnknown when
// none does.
const (
	foldocAlias   = 1
	foldocXref    = 0.4
	foldocKnown   = 0.5
	foldocUnknown = 0.8
	// foldocPhrase discounts each word of a related term of several words
	// ("file system").
	foldocPhrase = 0.7
)

// related calls emit for each term the entry of key relates to it.
func (cd *computingDict) related(key string, emit func(term string, w float32)) {
	rel := cd.lookup(key)
	for rel != "" {
		var item string
		item, rel, _ = strings.Cut(rel, ";")
		if len(item) < 2 {
			continue
		}
		var w float32
		switch item[0] {
		case 'a':
			w = foldocAlias
		case 'x':
			w = foldocXref
		default:
			continue
		}
		emit(item[1:], w)
	}
}

// expandComputing adds to sc the index terms FOLDOC relates to a query word
// (as typed or by its base form) or to the phrase it starts with the next
// word ("chat room"), in the word's group, like WordNet's relatives.
func (ix *Index) expandComputing(sc *scratch, i int, known bool) {
	cd := ix.cd
	tk := sc.toks[i]
	sc.exp = sc.exp[:0]
	commonDocs := max(int(commonExpansion*float64(ix.live)), 20)
	emit := func(term string, w float32) {
		words := 0
		scanTokens(term, func(_, _ string, whole bool) {
			if !whole {
				words++
			}
		})
		if words > 1 {
			w *= float32(foldocPhrase)
		}
		scanTokens(term, func(_, t string, whole bool) {
			if !whole && t != tk.term {
				ix.expandTo(sc, t, w, commonDocs)
			}
		})
	}
	if key, ok := ix.computingKey(tk.raw); ok {
		cd.related(key, emit)
	}
	if i+1 < len(sc.toks) && !sc.toks[i+1].whole {
		if key, ok := ix.computingKey(tk.raw + " " + sc.toks[i+1].raw); ok {
			cd.related(key, emit)
		}
	}
	sort.Slice(sc.exp, func(a, b int) bool {
		x, y := sc.exp[a], sc.exp[b]
		if x.w != y.w {
			return x.w > y.w
		}
		return ix.terms[x.id].text < ix.terms[y.id].text
	})
	scale := float32(foldocKnown)
	if !known {
		scale = foldocUnknown
	}
	for j, e := range sc.exp {
		if j == maxExpansions {
			break
		}
		sc.addTerm(e.id, scale*e.w)
	}
}

// computingKey finds the headword a word or phrase is in FOLDOC under: as
// typed, or with its last word in a base form (WordNet's, or without a
// plural's "s", "es", "ies": "chat rooms" is under "chat room").
func (ix *Index) computingKey(w string) (string, bool) {
	cd := ix.cd
	if cd.lookup(w) != "" {
		return w, true
	}
	head, last := "", w
	if i := strings.LastIndexByte(w, ' '); i >= 0 {
		head, last = w[:i+1], w[i+1:]
	}
	var cands [6]string
	n := 0
	if ix.lex != nil {
		ix.lex.baseForms(last, func(base int) {
			if n < 3 {
				cands[n] = ix.lex.word(base)
				n++
			}
		})
	}
	if strings.HasSuffix(last, "ies") {
		cands[n] = last[:len(last)-3] + "y"
		n++
	}
	if strings.HasSuffix(last, "es") {
		cands[n] = last[:len(last)-2]
		n++
	}
	if strings.HasSuffix(last, "s") {
		cands[n] = last[:len(last)-1]
		n++
	}
	for _, c := range cands[:n] {
		if c != last && cd.lookup(head+c) != "" {
			return head + c, true
		}
	}
	return "", false
}
