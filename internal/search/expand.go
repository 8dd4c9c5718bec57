package search

import (
	"sort"
	"sync"
)

// The semantic layer: a query word also looks for the words WordNet relates
// to it, each weighted below the word itself so that a tool that says what
// the user typed still ranks first.
const (
	// expandWeight scales every expansion against an exact match (1);
	// unknownWeight replaces it for a word no tool uses, whose relatives are
	// then all there is to go by.
	expandWeight  = 0.25
	unknownWeight = 0.6
	// maxSenses is how many meanings of a query word are followed, most
	// frequent first; senseDecay discounts each further one.
	maxSenses  = 4
	senseDecay = 0.75
	// compoundWeight discounts the link between a word and a compound lemma
	// it heads ("wipe" and "wipe out", "file" of "computer file").
	compoundWeight = 0.6
	// glossWeight is for a word of the definition of one of the senses
	// ("ticket": "a commercial document showing that the holder is entitled
	// to something"...; "site": "... a series of web pages").
	glossWeight = 0.4
	// commonExpansion: a related word found in more than this fraction of
	// the tools (and more than 20) is too common to tell them apart, and
	// would cost a long postings list for nothing.
	commonExpansion = 0.05
	// maxExpansions bounds the index terms one query word adds.
	maxExpansions = 16
)

// relWeight is how much a word reached through each relation counts,
// relative to a synonym (1): a shared root across parts of speech
// ("deletion", "delete") is nearly as good; a more general word less, a
// more specific one less again.
var relWeight = [numRelations]float32{
	relHypernym:   0.6,
	relHyponym:    0.5,
	relDerivation: 0.8,
	relSimilar:    0.7,
	relAttribute:  0.6,
	relPertainym:  0.7,
	relEntailment: 0.5,
}

// defaultLexicon is the embedded WordNet table, parsed once (the header
// only: the table itself is read in place).
var defaultLexicon = sync.OnceValues(func() (*lexicon, error) { return parseLexicon(wordnetTable) })

// related calls emit for each word WordNet relates to w (lower case, as
// typed): the synonyms of its first senses, and the words of the senses
// linked to them, with a weight in (0, 1]. A word may be emitted several
// times; the caller keeps the best weight.
func (lx *lexicon) related(w string, emit func(word int, weight float32)) {
	lx.baseForms(w, func(base int) {
		lx.senses(base, func(syn, rank int, compound bool) bool {
			if lx.computing(syn) {
				rank = 0 // tools are software: the computing sense comes first
			}
			if rank >= maxSenses || compound && rank > 0 {
				return true
			}
			sw := float32(1)
			for range rank {
				sw *= senseDecay
			}
			if compound {
				sw *= compoundWeight
			}
			lemmas := func(scale float32) func(int, bool) {
				return func(word int, c bool) {
					x := scale
					if c {
						x *= compoundWeight
					}
					emit(word, x)
				}
			}
			gw := sw * glossWeight
			lx.synset(syn, lemmas(sw), func(word int) { emit(word, gw) }, func(to, rel int) {
				lx.synset(to, lemmas(sw*relWeight[rel]), nil, nil)
			})
			return true
		})
	})
}

// expansion is one index term a query word was expanded to.
type expansion struct {
	id uint32
	w  float32
}

// expandTo adds index term t to sc.exp at weight w, or raises the weight
// it has there to w. A term the index lacks, or one in more than
// commonDocs documents (too common to help), is left out.
func (ix *Index) expandTo(sc *scratch, t string, w float32, commonDocs int) {
	id, ok := ix.termIDs[t]
	if !ok || len(ix.terms[id].postings) > commonDocs {
		return
	}
	for i := range sc.exp {
		if sc.exp[i].id == id {
			sc.exp[i].w = max(sc.exp[i].w, w)
			return
		}
	}
	sc.exp = append(sc.exp, expansion{id, w})
}

// expandToken adds to sc the index terms WordNet relates to one query
// word, at most maxExpansions of them, best first, each weighted below an
// exact match. term is the word's own index term, never added again; known
// is whether it is in the index.
func (ix *Index) expandToken(sc *scratch, raw, term string, known bool) {
	lx := ix.lex
	sc.exp = sc.exp[:0]
	commonDocs := max(int(commonExpansion*float64(ix.live)), 20)
	lx.related(raw, func(word int, w float32) {
		if t := Stem(lx.word(word)); t != term {
			ix.expandTo(sc, t, w, commonDocs)
		}
	})
	sort.Slice(sc.exp, func(i, j int) bool {
		a, b := sc.exp[i], sc.exp[j]
		if a.w != b.w {
			return a.w > b.w
		}
		return ix.terms[a.id].text < ix.terms[b.id].text
	})
	for i, e := range sc.exp {
		if i == maxExpansions {
			break
		}
		scale := float32(expandWeight)
		if !known {
			scale = unknownWeight
		}
		sc.addTerm(e.id, scale*e.w)
	}
}
