package search

import (
	_ "embed"
	"errors"
	"fmt"
	"github.com/switchboard-mcp/switchboard/internal/textnorm"
	"strings"
)

// wordnetTable is WordNet compiled by ./wordnet (see its doc for how to
// regenerate it): words, their senses, and the links between senses. It is
// read in place; nothing of it is copied to the heap.
//
//go:embed wordnet.bin
var wordnetTable string

// Relations between synsets, as ./wordnet stores them.
const (
	relHypernym = iota
	relHyponym
	relDerivation
	relSimilar
	relAttribute
	relPertainym
	relEntailment
	numRelations
)

// lexicon reads a table in the format ./wordnet writes (see its format.go).
type lexicon struct {
	data              string
	source            string
	words, synsets    int
	wordOffs, wordDat int // positions of the tables in data
	senseOffs, sensed int
	synOffs, synDat   int
}

var errLexicon = errors.New("malformed WordNet table")

// parseLexicon checks the header and locates the tables.
func parseLexicon(data string) (*lexicon, error) {
	source, words, synsets, p, err := readTableHeader(data, "SBWN", errLexicon)
	if err != nil {
		return nil, err
	}
	lx := &lexicon{data: data, source: source, words: words, synsets: synsets}
	table := func(count int) (offs, dat int, ok bool) {
		offs = p
		p += 4 * (count + 1)
		if p > len(data) {
			return 0, 0, false
		}
		dat = p
		p += int(lx.u32(offs + 4*count))
		return offs, dat, p <= len(data)
	}
	var ok1, ok2, ok3 bool
	lx.wordOffs, lx.wordDat, ok1 = table(lx.words)
	lx.senseOffs, lx.sensed, ok2 = table(lx.words)
	lx.synOffs, lx.synDat, ok3 = table(lx.synsets)
	if !ok1 || !ok2 || !ok3 || p != len(data) {
		return nil, fmt.Errorf("%w: tables do not add up", errLexicon)
	}
	return lx, nil
}

func (lx *lexicon) u32(at int) uint32 {
	d := lx.data
	return uint32(d[at]) | uint32(d[at+1])<<8 | uint32(d[at+2])<<16 | uint32(d[at+3])<<24
}

// word is the i-th word of the table.
func (lx *lexicon) word(i int) string {
	return lx.data[lx.wordDat+int(lx.u32(lx.wordOffs+4*i)) : lx.wordDat+int(lx.u32(lx.wordOffs+4*i+4))]
}

// find binary-searches the words.
func (lx *lexicon) find(w string) (int, bool) {
	lo, hi := 0, lx.words
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if lx.word(m) < w {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < lx.words && lx.word(lo) == w
}

// computing reports whether synset i is a computer-science sense.
func (lx *lexicon) computing(i int) bool {
	return lx.data[lx.synDat+int(lx.u32(lx.synOffs+4*i))]&0x80 != 0
}

// has reports whether w or a base form of it is a word of the table.
func (lx *lexicon) has(w string) bool {
	found := false
	lx.baseForms(w, func(int) { found = true })
	return found
}

// uvarint decodes at *p within [*p, end).
func (lx *lexicon) uvarint(p *int, end int) uint64 {
	var v uint64
	for shift := 0; *p < end && shift < 64; shift += 7 {
		c := lx.data[*p]
		*p++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return v
}

// senses calls fn for each sense of word i, most frequent first (direct
// senses before the phrasal verbs the word heads), until fn returns false.
func (lx *lexicon) senses(i int, fn func(synset, rank int, compound bool) bool) {
	p := lx.sensed + int(lx.u32(lx.senseOffs+4*i))
	end := lx.sensed + int(lx.u32(lx.senseOffs+4*i+4))
	for p < end {
		v := lx.uvarint(&p, end)
		if !fn(int(v>>5), int(v>>1&15), v&1 == 1) {
			return
		}
	}
}

// synset decodes synset i: lemmas gets each word (and whether it heads a
// compound lemma), gloss each content word of its definition, links each
// related synset with its relation. Any may be nil.
func (lx *lexicon) synset(i int, lemmas func(word int, compound bool), gloss func(word int), links func(to, rel int)) {
	p := lx.synDat + int(lx.u32(lx.synOffs+4*i))
	end := lx.synDat + int(lx.u32(lx.synOffs+4*i+4))
	p++ // part of speech and computing flag: see computing
	n := int(lx.uvarint(&p, end))
	for range n {
		v := lx.uvarint(&p, end)
		if lemmas != nil {
			lemmas(int(v>>1), v&1 == 1)
		}
	}
	n = int(lx.uvarint(&p, end))
	for range n {
		v := lx.uvarint(&p, end)
		if gloss != nil {
			gloss(int(v))
		}
	}
	if links == nil {
		return
	}
	for p < end {
		v := lx.uvarint(&p, end)
		links(int(v>>3), int(v&7))
	}
}

// baseForms calls fn with w if it is a word of the table, else with each
// base form WordNet's morphology rules give for it ("files" → "file",
// "stopped" → "stop", "bigger" → "big") that is one, each once. A word the
// table has is taken as it is: "folder" is not "fold" + "er".
func (lx *lexicon) baseForms(w string, fn func(word int)) {
	var seen [8]int
	n := 0
	try := func(c string) {
		if n == len(seen) || len(c) < 2 {
			return
		}
		i, ok := lx.find(c)
		if !ok {
			return
		}
		for _, s := range seen[:n] {
			if s == i {
				return
			}
		}
		seen[n] = i
		n++
		fn(i)
	}
	if i, ok := lx.find(w); ok {
		fn(i)
		return
	}
	for _, r := range morphRules {
		if !strings.HasSuffix(w, r.suffix) {
			continue
		}
		stem := w[:len(w)-len(r.suffix)]
		try(stem + r.repl)
		// "stopped", "running": WordNet lists these as exceptions; undoubling
		// the final consonant covers them.
		if r.repl == "" && len(stem) >= 3 && stem[len(stem)-1] == stem[len(stem)-2] && !textnorm.IsVowel(stem[len(stem)-1]) {
			try(stem[:len(stem)-1])
		}
	}
}

// morphRules are WordNet's detachment rules (morphy(7WN)) for nouns, verbs
// and adjectives, merged.
var morphRules = []struct{ suffix, repl string }{
	{"s", ""}, {"ses", "s"}, {"xes", "x"}, {"zes", "z"}, {"ches", "ch"}, {"shes", "sh"},
	{"men", "man"}, {"ies", "y"}, {"es", "e"}, {"es", ""}, {"ed", "e"}, {"ed", ""},
	{"ing", "e"}, {"ing", ""}, {"er", ""}, {"est", ""}, {"er", "e"}, {"est", "e"},
}
