package search

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"
)

// Query is one search.
type Query struct {
	Text    string
	Servers []string // server filter; empty = all
	Skills  []string // skill filter: doc must have at least one
	Limit   int      // default 10, max 100
	// Allow is the caller's filter (availability, authorization); nil = all.
	// It is called under the index's read lock, once per document in scope,
	// so it must be quick and must not call back into the Index.
	Allow func(name string) bool
}

// Hit is one ranked tool. Score is in (0,1]: the best hit of a result scores
// 1 and the others in proportion to it (lexical mode: BM25F score / best
// BM25F score; hybrid mode: fused RRF score / best fused score). Lexical is
// the hit's normalized lexical score and Semantic its cosine similarity to
// the query; each is 0 when that ranking did not return the hit.
type Hit struct {
	Name              string
	Score             float64
	Lexical, Semantic float64
}

// Result is a ranked answer plus what the ranking covered, for the API's
// metadata.
type Result struct {
	Hits     []Hit
	Mode     string // "lexical" | "hybrid"
	Degraded string // why hybrid fell back to lexical, "" otherwise
	Searched int    // docs that passed Servers/Skills/Allow (total_tools_searched)
	Servers  int    // distinct servers among them (servers_searched)
}

// Ranking modes reported in [Result.Mode].
const (
	ModeLexical = "lexical"
	ModeHybrid  = "hybrid"
)

// qterm is one weighted query term.
type qterm struct {
	id    uint32
	w     float32
	group int // the query word it stands for
}

// cand is a scored document slot.
type cand struct {
	slot  uint32
	score float64
}

// scratch is per-search working memory, pooled so a search allocates little.
type scratch struct {
	acc     []float32 // lexical score per slot
	touched []uint32  // slots with acc != 0
	mark    []uint32  // slot passed the filters when mark == stamp
	stamp   uint32
	qterms  []qterm
	toks    []qtoken
	typos   []typoCand
	exp     []expansion
	grouped bool      // terms are grouped by query word
	group   int       // the group addTerm adds to
	gmax    []float32 // per slot: best score of the current group
	gtouch  []uint32  // slots with gmax != 0
	hinted  []string  // servers the query names
	top     []cand
	sem     []cand
	qvec    []float32 // the query's text vector
	qvec8   []int8    // the same ×127
	kth     []float32 // heap for scoreVectors' cut
}

type qtoken struct {
	raw, term string
	whole     bool
}

type typoCand struct {
	id   uint32
	dist int
	df   int
}

// Search ranks the documents that pass q's filters against q.Text. With an
// Embedder the query is embedded first (bounded by QueryTimeout, outside
// the index lock) and lexical and semantic rankings are fused; if that
// fails the result is lexical with Degraded saying why. An empty query
// matches nothing but still reports what would have been searched.
func (ix *Index) Search(ctx context.Context, q Query) Result {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	limit = min(limit, maxLimit)

	res := Result{Mode: ModeLexical}
	var qvec []float32
	if ix.emb != nil && strings.TrimSpace(q.Text) != "" {
		v, err := ix.embedQuery(ctx, q.Text)
		if err != nil {
			res.Degraded = "embeddings endpoint unavailable: " + err.Error()
		} else {
			qvec = v
			res.Mode = ModeHybrid
		}
	}

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	sc := ix.getScratch()
	defer func() {
		sc.reset()
		ix.scratchPool.Put(sc)
	}()

	filtered := len(q.Servers) > 0 || len(q.Skills) > 0 || q.Allow != nil
	if filtered {
		res.Searched, res.Servers = ix.applyFilters(sc, &q)
	} else {
		res.Searched, res.Servers = ix.live, len(ix.serverDocs)
	}
	if res.Searched == 0 {
		return res
	}

	ix.parseQuery(sc, q.Text)
	ix.scoreLexical(sc, filtered)
	if ix.lex != nil {
		ix.understand(sc)
	}
	depth := limit
	if qvec != nil {
		depth = max(limit, fuseDepth)
	}
	if ix.wv != nil {
		ix.scoreVectors(sc, depth)
	}
	sc.top = sc.top[:0]
	for _, slot := range sc.touched {
		sc.top = pushTop(sc.top, depth, cand{slot, float64(sc.acc[slot])}, ix.docs)
	}
	sortCands(sc.top, ix.docs)

	if qvec == nil {
		if len(sc.top) == 0 {
			return res
		}
		best := sc.top[0].score
		res.Hits = make([]Hit, len(sc.top))
		for i, c := range sc.top {
			s := c.score / best
			res.Hits[i] = Hit{Name: ix.docs[c.slot].name, Score: s, Lexical: s}
		}
		return res
	}

	sc.sem = sc.sem[:0]
	for slot := range ix.docs {
		e := &ix.docs[slot]
		if !e.live || len(e.vec) != len(qvec) || (filtered && sc.mark[slot] != sc.stamp) {
			continue
		}
		sc.sem = pushTop(sc.sem, depth, cand{uint32(slot), dot(qvec, e.vec)}, ix.docs)
	}
	sortCands(sc.sem, ix.docs)
	res.Hits = ix.fuse(sc.top, sc.sem, limit)
	return res
}

// embedQuery embeds the query text within QueryTimeout and normalizes it.
func (ix *Index) embedQuery(ctx context.Context, text string) ([]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, ix.queryTimeout)
	defer cancel()
	vecs, err := ix.emb.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	if len(vecs) != 1 || len(vecs[0]) == 0 {
		return nil, errBadQueryVector
	}
	return normalize(vecs[0]), nil
}

type constError string

func (e constError) Error() string { return string(e) }

const errBadQueryVector = constError("embedder returned no vector for the query")

// fuse merges the lexical and semantic rankings by reciprocal rank fusion:
// each list contributes 1/(k+rank), so agreement between the two lifts a
// tool and neither score scale dominates.
func (ix *Index) fuse(lex, sem []cand, limit int) []Hit {
	type acc struct {
		fused, lex, sem float64
	}
	m := make(map[uint32]*acc, len(lex)+len(sem))
	get := func(slot uint32) *acc {
		a := m[slot]
		if a == nil {
			a = &acc{}
			m[slot] = a
		}
		return a
	}
	if len(lex) > 0 {
		best := lex[0].score
		for r, c := range lex {
			a := get(c.slot)
			a.fused += 1 / (ix.rrfK + float64(r+1))
			a.lex = c.score / best
		}
	}
	for r, c := range sem {
		a := get(c.slot)
		a.fused += 1 / (ix.rrfK + float64(r+1))
		a.sem = c.score
	}
	out := make([]Hit, 0, len(m))
	for slot, a := range m {
		out = append(out, Hit{Name: ix.docs[slot].name, Score: a.fused, Lexical: a.lex, Semantic: a.sem})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > limit {
		out = out[:limit]
	}
	if len(out) > 0 {
		best := out[0].Score
		for i := range out {
			out[i].Score /= best
		}
	}
	return out
}

func dot(a, b []float32) float64 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return float64(s)
}

// getScratch returns pooled scratch sized for the current document table.
// ix.mu must be held.
func (ix *Index) getScratch() *scratch {
	sc, _ := ix.scratchPool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	if n := len(ix.docs); len(sc.acc) < n {
		sc.acc = make([]float32, n+n/4)
		sc.gmax = make([]float32, n+n/4)
		sc.mark = make([]uint32, n+n/4)
		sc.stamp = 0
	}
	return sc
}

// applyFilters stamps the slots passing q's filters and counts them and
// their servers.
func (ix *Index) applyFilters(sc *scratch, q *Query) (docs, servers int) {
	sc.stamp++
	if sc.stamp == 0 {
		clear(sc.mark)
		sc.stamp = 1
	}
	check := func(sd map[uint32]struct{}) {
		passed := false
		for slot := range sd {
			e := &ix.docs[slot]
			if len(q.Skills) > 0 && !hasAny(e.skills, q.Skills) {
				continue
			}
			if q.Allow != nil && !q.Allow(e.name) {
				continue
			}
			sc.mark[slot] = sc.stamp
			docs++
			passed = true
		}
		if passed {
			servers++
		}
	}
	if len(q.Servers) > 0 {
		for i, s := range q.Servers {
			if dup(q.Servers[:i], s) {
				continue
			}
			check(ix.serverDocs[s])
		}
		return docs, servers
	}
	for _, sd := range ix.serverDocs {
		check(sd)
	}
	return docs, servers
}

func hasAny(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}

func dup(prev []string, s string) bool {
	for _, p := range prev {
		if p == s {
			return true
		}
	}
	return false
}

// parseQuery turns the query text into weighted vocabulary terms: exact
// terms at weight 1; for short queries (≤ 3 terms), misspelt terms of 4+
// letters expanded to vocabulary terms within edit distance 1 (2 from 8
// letters) at a discount; and the last term completed as a prefix (the
// caller may still be typing) at a discount.
//
// With the semantic layer each query word also brings the terms WordNet
// relates to it (see expandToken), and the terms of one word form a group:
// a document scores a word by its best term, not by the sum of them, so a
// word with many relatives does not outweigh the others. Without it every
// term counts on its own, as before the layer existed.
func (ix *Index) parseQuery(sc *scratch, text string) {
	sc.qterms = sc.qterms[:0]
	sc.toks = sc.toks[:0]
	sc.grouped = ix.lex != nil
	scanTokens(text, func(raw, t string, whole bool) {
		sc.toks = append(sc.toks, qtoken{raw, t, whole})
	})
	parts, last := 0, -1
	for i, tk := range sc.toks {
		if !tk.whole {
			parts++
			last = i
		}
	}
	var vocab *vocabView
	for i, tk := range sc.toks {
		sc.group = i
		if sc.grouped && repeated(sc.toks[:i], tk.term) {
			continue
		}
		id, ok := ix.termIDs[tk.term]
		if ok {
			sc.addTerm(id, 1)
		}
		if sc.grouped && !tk.whole && i < maxExpandedTokens {
			ix.expandToken(sc, tk.raw, tk.term, ok)
			if ix.cd != nil {
				ix.expandComputing(sc, i, ok)
			}
			if isAcronym(tk.raw) {
				if id, ok := ix.termIDs[acronymMark+tk.raw]; ok {
					sc.addTerm(id, acronymWeight)
				}
			}
			// An unknown word that no dictionary has may be a truncation
			// ("repo", "config", "env"): complete it as a prefix.
			if !ok && i != last && len(tk.term) >= 3 && !ix.lex.has(tk.raw) {
				if vocab == nil {
					vocab = ix.vocabulary()
				}
				ix.expandPrefix(sc, vocab, tk.term)
			}
		}
		if ok || tk.whole || parts > 3 || len(tk.term) < 4 {
			continue
		}
		if vocab == nil {
			vocab = ix.vocabulary()
		}
		ix.expandTypo(sc, vocab, tk.term)
	}
	if last >= 0 && len(sc.toks[last].term) >= 3 {
		if vocab == nil {
			vocab = ix.vocabulary()
		}
		sc.group = last
		ix.expandPrefix(sc, vocab, sc.toks[last].term)
	}
}

// maxExpandedTokens bounds the query tokens the semantic layer expands: a
// question is a few words, and a pasted page must not cost a walk of
// WordNet per word.
const maxExpandedTokens = 32

// repeated reports whether an earlier token has the same term.
func repeated(toks []qtoken, term string) bool {
	for _, tk := range toks {
		if tk.term == term {
			return true
		}
	}
	return false
}

// addTerm adds a query term to the current group, keeping the better
// weight of a term already there. Ungrouped, every distinct term is a
// group of its own.
func (sc *scratch) addTerm(id uint32, w float32) {
	for i := range sc.qterms {
		q := &sc.qterms[i]
		if q.id == id && (!sc.grouped || q.group == sc.group) {
			q.w = max(q.w, w)
			return
		}
	}
	g := sc.group
	if !sc.grouped {
		g = len(sc.qterms)
	}
	sc.qterms = append(sc.qterms, qterm{id, w, g})
}

func (ix *Index) expandTypo(sc *scratch, v *vocabView, t string) {
	maxd := 1
	if len(t) >= 8 {
		maxd = 2
	}
	sc.typos = sc.typos[:0]
	for l := len(t) - maxd; l <= len(t)+maxd; l++ {
		if l < 0 || l >= len(v.byLen) {
			continue
		}
		for _, id := range v.byLen[l] {
			tt := &ix.terms[id]
			if d := editDistance(t, tt.text, maxd); d <= maxd {
				sc.typos = append(sc.typos, typoCand{id, d, len(tt.postings)})
			}
		}
	}
	sort.Slice(sc.typos, func(i, j int) bool {
		a, b := sc.typos[i], sc.typos[j]
		if a.dist != b.dist {
			return a.dist < b.dist
		}
		if a.df != b.df {
			return a.df > b.df
		}
		return ix.terms[a.id].text < ix.terms[b.id].text
	})
	for i, c := range sc.typos {
		if i == maxTypoTerms {
			break
		}
		w := float32(typo1Weight)
		if c.dist > 1 {
			w = typo2Weight
		}
		sc.addTerm(c.id, w)
	}
}

func (ix *Index) expandPrefix(sc *scratch, v *vocabView, p string) {
	i := sort.Search(len(v.byText), func(i int) bool { return ix.terms[v.byText[i]].text >= p })
	for n := 0; i < len(v.byText) && n < maxPrefix; i++ {
		id := v.byText[i]
		t := ix.terms[id].text
		if !strings.HasPrefix(t, p) {
			break
		}
		if t == p {
			continue
		}
		sc.addTerm(id, prefixWeight)
		n++
	}
}

// scoreLexical accumulates BM25F scores into sc.acc for the documents the
// query terms' postings reach (and, when filtered, that passed the filters):
// per document, each field's term frequency is weighted and length-normalized
// (tf·w / (1 − b + b·len/avglen)), summed, saturated by k1 and scaled by the
// term's idf and query weight. A group of terms adds its best term's score.
func (ix *Index) scoreLexical(sc *scratch, filtered bool) {
	sc.touched = sc.touched[:0]
	if len(sc.qterms) == 0 || ix.live == 0 {
		return
	}
	n := float64(ix.live)
	var oneMinusB, bOverAvg [numFields]float32
	for f := range numFields {
		avg := float64(ix.fieldTotal[f]) / n
		if avg <= 0 {
			avg = 1
		}
		oneMinusB[f] = 1 - fieldB[f]
		bOverAvg[f] = float32(float64(fieldB[f]) / avg)
	}
	slices.SortStableFunc(sc.qterms, func(a, b qterm) int { return a.group - b.group })
	for start := 0; start < len(sc.qterms); {
		end := start + 1
		for end < len(sc.qterms) && sc.qterms[end].group == sc.qterms[start].group {
			end++
		}
		single := end-start == 1
		for _, qt := range sc.qterms[start:end] {
			ps := ix.terms[qt.id].postings
			df := float64(len(ps))
			idf := float32(math.Log(1+(n-df+0.5)/(df+0.5))) * qt.w
			for i := range ps {
				p := &ps[i]
				if filtered && sc.mark[p.doc] != sc.stamp {
					continue
				}
				fl := &ix.docs[p.doc].flen
				var tfw float32
				for f := range numFields {
					if tf := p.tf[f]; tf != 0 {
						tfw += fieldWeight[f] * float32(tf) / (oneMinusB[f] + bOverAvg[f]*float32(fl[f]))
					}
				}
				s := idf * tfw / (bm25K1 + tfw)
				if single {
					sc.add(p.doc, s)
					continue
				}
				if sc.gmax[p.doc] == 0 {
					sc.gtouch = append(sc.gtouch, p.doc)
				}
				sc.gmax[p.doc] = max(sc.gmax[p.doc], s)
			}
		}
		for _, slot := range sc.gtouch {
			sc.add(slot, sc.gmax[slot])
			sc.gmax[slot] = 0
		}
		sc.gtouch = sc.gtouch[:0]
		start = end
	}
}

// add adds s to a document's score.
func (sc *scratch) add(slot uint32, s float32) {
	if sc.acc[slot] == 0 {
		sc.touched = append(sc.touched, slot)
	}
	sc.acc[slot] += s
}

// better reports whether a ranks above b: higher score, then name.
func better(a, b cand, docs []docEntry) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return docs[a.slot].name < docs[b.slot].name
}

// pushTop keeps the k best candidates in h, a min-heap (worst at h[0]).
func pushTop(h []cand, k int, c cand, docs []docEntry) []cand {
	if len(h) < k {
		h = append(h, c)
		// Sift up.
		for i := len(h) - 1; i > 0; {
			parent := (i - 1) / 2
			if !better(h[parent], h[i], docs) {
				break
			}
			h[parent], h[i] = h[i], h[parent]
			i = parent
		}
		return h
	}
	if !better(c, h[0], docs) {
		return h
	}
	h[0] = c
	// Sift down.
	for i := 0; ; {
		l, r, worst := 2*i+1, 2*i+2, i
		if l < len(h) && better(h[worst], h[l], docs) {
			worst = l
		}
		if r < len(h) && better(h[worst], h[r], docs) {
			worst = r
		}
		if worst == i {
			break
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
	return h
}

// sortCands orders candidates best first.
func sortCands(cs []cand, docs []docEntry) {
	slices.SortFunc(cs, func(a, b cand) int {
		if better(a, b, docs) {
			return -1
		}
		if better(b, a, docs) {
			return 1
		}
		return 0
	})
}

// reset zeroes the accumulator entries a search touched.
func (sc *scratch) reset() {
	for _, slot := range sc.touched {
		sc.acc[slot] = 0
	}
	sc.touched = sc.touched[:0]
}
