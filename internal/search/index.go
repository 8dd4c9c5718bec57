// Package search is the gateway's tool index: it finds the right tool among
// thousands by what a caller types, lexically (BM25F over the tool's name,
// description, parameters, server and skills, with identifier-aware
// tokenization, stemming and typo tolerance), through an offline semantic
// layer compiled into the binary (WordNet and FOLDOC relatives of the
// query's words, GloVe word vectors that re-rank the matches) and, when an
// embeddings endpoint is configured, semantically too, fusing both rankings.
package search

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Fields of a document, each with its own BM25F weight and length
// normalization.
const (
	fName       = iota // original name, plus what the namespaced name adds
	fDesc              // description
	fParamName         // parameter names
	fParamDesc         // parameter descriptions
	fServer            // server name
	fServerDesc        // server description
	fSkill             // skill ids
	numFields
)

// fieldWeight ranks a match in the name highest: a tool's name is a summary
// its author chose. Server fields weigh enough to pick "the github one" among
// same-named tools, and descriptions carry the synonyms.
var fieldWeight = [numFields]float32{
	fName: 4, fDesc: 1.5, fParamName: 0.8, fParamDesc: 0.4,
	fServer: 2, fServerDesc: 0.5, fSkill: 1,
}

// fieldB is BM25's length normalization per field: long descriptions are
// damped, names and server names barely (they are short and all meaningful).
var fieldB = [numFields]float32{
	fName: 0.5, fDesc: 0.75, fParamName: 0.5, fParamDesc: 0.75,
	fServer: 0.2, fServerDesc: 0.75, fSkill: 0.2,
}

const (
	bm25K1 = 1.2
	// Discounts for query terms the user did not type exactly.
	typo1Weight  = 0.6 // within edit distance 1
	typo2Weight  = 0.4 // within edit distance 2 (terms of 8+ letters)
	prefixWeight = 0.4 // completion of the last term
	maxTypoTerms = 8   // expansions per misspelt term
	maxPrefix    = 24  // expansions of the last term
	defaultLimit = 10  // hits when Query.Limit is 0
	maxLimit     = 100 // cap on Query.Limit
	fuseDepth    = 100 // ranks of each list fed to fusion
	embedBatch   = 256 // documents per background Embed call
	maxBackoff   = time.Minute
)

// Options tune an [Index]. The zero value (or nil) ranks by BM25F with the
// offline semantic layer (WordNet and FOLDOC expansion, GloVe word
// vectors); an Embedder adds semantic ranking.
type Options struct {
	Embedder Embedder // nil = no embeddings
	// LexicalOnly turns the semantic layer off: exact terms (and typo and
	// prefix completions) only, as before it existed. For comparisons.
	LexicalOnly  bool
	Logger       *slog.Logger  // nil = discard
	QueryTimeout time.Duration // embedding the query at search time; default 2s
	RRFK         int           // reciprocal rank fusion constant, default 60
}

// posting records the term frequency of one term in one document, per field.
type posting struct {
	doc uint32
	tf  [numFields]uint8
}

// term is one vocabulary entry and its postings sorted by document slot.
type term struct {
	text     string
	postings []posting
}

// docEntry is what the index keeps of a document: enough to filter, rank,
// remove and re-embed it, not the whole Doc.
type docEntry struct {
	name      string
	server    string
	skills    []string
	live      bool
	flags     uint8 // docReadOnly, docDestructive
	flen      [numFields]uint16
	terms     []uint32 // distinct term ids, for removal
	embedText string   // only with an Embedder
	vec       []float32
}

// vocabView is a read-only view of the vocabulary for prefix and typo
// expansion, rebuilt lazily after the vocabulary changes.
type vocabView struct {
	byText []uint32   // term ids sorted by text
	byLen  [][]uint32 // term ids by text length
}

// Index is an in-memory, incrementally updated tool index. It is safe for
// concurrent use: searches share a read lock, updates take the write lock
// briefly and never rebuild the whole index.
type Index struct {
	emb          Embedder
	lex          *lexicon       // nil = no semantic layer
	wv           *wordVectors   // nil = no semantic layer
	cd           *computingDict // nil = no semantic layer
	log          *slog.Logger
	queryTimeout time.Duration
	rrfK         float64

	mu       sync.RWMutex
	docs     []docEntry
	freeDocs []uint32
	byName   map[string]uint32
	// dvec holds each slot's text vector (wv.dims bytes per slot, a unit
	// vector ×127) when the slot's docHasVec flag is set.
	dvec        []int8
	termIDs     map[string]uint32
	terms       []term
	freeTerms   []uint32
	fieldTotal  [numFields]int64
	live        int
	serverDocs  map[string]map[uint32]struct{}
	serverKeys  map[string][]string // serverKey → servers, for query hints
	pending     map[string]struct{} // names waiting for a vector
	idle        chan struct{}       // closed while pending is empty
	vocab       atomic.Pointer[vocabView]
	vocabMu     sync.Mutex // serializes lazy vocabView rebuilds
	scratchPool sync.Pool
	// gen counts changes to documents, their skills or vectors; the skill
	// vectors are recomputed when it has moved (see skillvec.go).
	gen       atomic.Uint64
	skillVecs atomic.Pointer[skillVectors]
	skillMu   sync.Mutex // serializes skill vector rebuilds

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once
}

// NewIndex returns an empty index; with an Embedder it starts the goroutine
// that embeds documents in the background, which [Index.Close] stops.
func NewIndex(opts *Options) *Index {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 2 * time.Second
	}
	if o.RRFK <= 0 {
		o.RRFK = 60
	}
	ix := &Index{
		emb:          o.Embedder,
		log:          o.Logger,
		queryTimeout: o.QueryTimeout,
		rrfK:         float64(o.RRFK),
		byName:       make(map[string]uint32),
		termIDs:      make(map[string]uint32),
		serverDocs:   make(map[string]map[uint32]struct{}),
		serverKeys:   make(map[string][]string),
		pending:      make(map[string]struct{}),
		idle:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	close(ix.idle)
	if !o.LexicalOnly {
		lx, err := defaultLexicon()
		if err != nil {
			// Only a broken build gets here; search still works, lexically.
			o.Logger.Error("search: WordNet table unusable; ranking lexically", "err", err)
		}
		ix.lex = lx
		wv, err := defaultWordVectors()
		if err != nil {
			o.Logger.Error("search: word vector table unusable; ranking without it", "err", err)
		}
		ix.wv = wv
		cd, err := defaultComputingDict()
		if err != nil {
			o.Logger.Error("search: FOLDOC table unusable; ranking without it", "err", err)
		}
		ix.cd = cd
	}
	if ix.emb == nil {
		close(ix.done)
		ix.cancel = func() {}
		return ix
	}
	ctx, cancel := context.WithCancel(context.Background())
	ix.cancel = cancel
	ix.wake = make(chan struct{}, 1)
	go ix.embedLoop(ctx)
	return ix
}

// Close stops the background embedder goroutine and waits for it. The index
// stays searchable (lexically, and with the vectors it already has).
func (ix *Index) Close() {
	ix.closed.Do(ix.cancel)
	<-ix.done
}

// Len is the number of documents in the index.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Upsert adds docs, replacing any document of the same Name. Only the
// changed documents are (re)indexed; a document whose text did not change
// keeps its vector.
func (ix *Index) Upsert(docs ...Doc) {
	if len(docs) == 0 {
		return
	}
	b := newDocBuilder()
	ix.mu.Lock()
	for i := range docs {
		ix.addLocked(b, &docs[i])
	}
	ix.mu.Unlock()
	ix.signal()
}

// Remove deletes the documents with these names; unknown names are ignored.
func (ix *Index) Remove(names ...string) {
	ix.mu.Lock()
	for _, n := range names {
		if slot, ok := ix.byName[n]; ok {
			ix.removeLocked(slot)
		}
	}
	ix.mu.Unlock()
}

// ReplaceServer replaces every document of server with docs in one step, so
// a search never sees the server half-updated (a reconnect that renamed
// tools, a server turned unavailable with docs = nil). Each doc's Server is
// set to server.
func (ix *Index) ReplaceServer(server string, docs []Doc) {
	b := newDocBuilder()
	ix.mu.Lock()
	// Vectors of unchanged documents survive the replacement.
	keep := make(map[string]docEntry)
	for slot := range ix.serverDocs[server] {
		d := &ix.docs[slot]
		if d.vec != nil {
			keep[d.name] = docEntry{embedText: d.embedText, vec: d.vec}
		}
		ix.removeLocked(slot)
	}
	for i := range docs {
		d := docs[i]
		d.Server = server
		if old, ok := keep[d.Name]; ok {
			b.reuse = &old
		}
		ix.addLocked(b, &d)
		b.reuse = nil
	}
	ix.mu.Unlock()
	ix.signal()
}

// docBuilder holds scratch space for indexing documents.
type docBuilder struct {
	tf    map[string]*[numFields]uint8
	seen  map[string]bool
	vacc  []float32                    // a document's text vector being summed
	raw   map[string]*[numFields]uint8 // words as written, per field, for vectors
	order []string
	reuse *docEntry // vector to keep when the embed text is unchanged
}

func newDocBuilder() *docBuilder {
	return &docBuilder{tf: make(map[string]*[numFields]uint8), seen: make(map[string]bool)}
}

func (b *docBuilder) add(field int, text string) (n int) {
	scanTokens(text, func(raw, t string, whole bool) {
		b.count(field, t)
		if b.raw != nil && !whole {
			c := b.raw[raw]
			if c == nil {
				c = new([numFields]uint8)
				b.raw[raw] = c
			}
			if c[field] < 255 {
				c[field]++
			}
		}
		n++
	})
	return n
}

func (b *docBuilder) count(field int, t string) {
	c := b.tf[t]
	if c == nil {
		c = new([numFields]uint8)
		b.tf[t] = c
		b.order = append(b.order, t)
	}
	if c[field] < 255 {
		c[field]++
	}
}

// addLocked indexes one document. ix.mu must be held for writing.
func (ix *Index) addLocked(b *docBuilder, d *Doc) {
	var old *docEntry
	if slot, ok := ix.byName[d.Name]; ok {
		e := ix.docs[slot]
		old = &e
		ix.removeLocked(slot)
	} else if b.reuse != nil {
		old = b.reuse
	}
	clear(b.tf)
	clear(b.seen)
	if ix.wv != nil && b.raw == nil {
		b.raw = make(map[string]*[numFields]uint8)
	}
	clear(b.raw)
	b.order = b.order[:0]

	var flen [numFields]int
	orig := d.OriginalName
	if orig == "" {
		orig = d.Name
	}
	flen[fName] = b.add(fName, orig)
	// The namespaced name adds its joined form ("githubcreateissue") and any
	// word a shortened or renamed name carries, not the server again.
	for t := range b.tf {
		b.seen[t] = true
	}
	scanTokens(d.Server, func(_, t string, _ bool) { b.seen[t] = true })
	scanTokens(d.Name, func(_, t string, _ bool) {
		if !b.seen[t] {
			b.seen[t] = true
			b.count(fName, t)
			flen[fName]++
		}
	})
	if ix.lex != nil {
		addAcronyms(b, orig)
	}
	flen[fDesc] = b.add(fDesc, d.Description)
	for _, p := range d.Params {
		flen[fParamName] += b.add(fParamName, p.Name)
		flen[fParamDesc] += b.add(fParamDesc, p.Description)
	}
	flen[fServer] = b.add(fServer, d.Server)
	flen[fServerDesc] = b.add(fServerDesc, d.ServerDescription)
	for _, s := range d.Skills {
		flen[fSkill] += b.add(fSkill, s)
	}

	var slot uint32
	if n := len(ix.freeDocs); n > 0 {
		slot = ix.freeDocs[n-1]
		ix.freeDocs = ix.freeDocs[:n-1]
	} else {
		slot = uint32(len(ix.docs))
		ix.docs = append(ix.docs, docEntry{})
	}
	e := docEntry{name: d.Name, server: d.Server, live: true, terms: make([]uint32, 0, len(b.order))}
	if d.ReadOnly {
		e.flags |= docReadOnly
	} else if d.Destructive {
		e.flags |= docDestructive
	}
	if len(d.Skills) > 0 {
		e.skills = append([]string(nil), d.Skills...)
	}
	if ix.wv != nil && ix.docVector(b, slot) {
		e.flags |= docHasVec
	}
	for f := range numFields {
		e.flen[f] = uint16(min(flen[f], 65535))
		ix.fieldTotal[f] += int64(e.flen[f])
	}
	newTerms := false
	for _, t := range b.order {
		id, ok := ix.termIDs[t]
		if !ok {
			newTerms = true
			if n := len(ix.freeTerms); n > 0 {
				id = ix.freeTerms[n-1]
				ix.freeTerms = ix.freeTerms[:n-1]
				ix.terms[id] = term{text: t}
			} else {
				id = uint32(len(ix.terms))
				ix.terms = append(ix.terms, term{text: t})
			}
			ix.termIDs[t] = id
		}
		e.terms = append(e.terms, id)
		ps := ix.terms[id].postings
		p := posting{doc: slot, tf: *b.tf[t]}
		if n := len(ps); n == 0 || ps[n-1].doc < slot {
			ps = append(ps, p)
		} else {
			i := sort.Search(n, func(i int) bool { return ps[i].doc >= slot })
			ps = append(ps, posting{})
			copy(ps[i+1:], ps[i:])
			ps[i] = p
		}
		ix.terms[id].postings = ps
	}
	if newTerms {
		ix.vocab.Store(nil)
	}
	if ix.emb != nil {
		e.embedText = embedText(d)
		if old != nil && old.vec != nil && old.embedText == e.embedText {
			e.vec = old.vec
		} else {
			ix.queueLocked(d.Name)
		}
	}
	ix.docs[slot] = e
	ix.gen.Add(1)
	ix.byName[d.Name] = slot
	sd := ix.serverDocs[d.Server]
	if sd == nil {
		sd = make(map[uint32]struct{})
		ix.serverDocs[d.Server] = sd
		if ix.lex != nil {
			k := serverKey(d.Server)
			ix.serverKeys[k] = append(ix.serverKeys[k], d.Server)
		}
	}
	sd[slot] = struct{}{}
	ix.live++
}

// docVector stores in ix.dvec the text vector of the document b holds:
// the sum of its words' vectors, each weighted by its field (a word of the
// name says most what a tool does) and its rarity (see wordVectors.weight).
// It reports false when no word of the document has a vector.
func (ix *Index) docVector(b *docBuilder, slot uint32) bool {
	d := ix.wv.dims
	if need := (int(slot) + 1) * d; len(ix.dvec) < need {
		ix.dvec = append(ix.dvec, make([]int8, need-len(ix.dvec))...)
	}
	if len(b.vacc) != d {
		b.vacc = make([]float32, d)
	}
	clear(b.vacc)
	for t, tfs := range b.raw {
		i, ok := ix.wv.find(t)
		if !ok {
			continue
		}
		var w float32
		for f, tf := range tfs {
			w += vecFieldWeight[f] * float32(min(tf, 3))
		}
		if w > 0 {
			ix.wv.add(b.vacc, i, w)
		}
	}
	if !unitInto(b.vacc) {
		return false
	}
	out := ix.dvec[int(slot)*d : (int(slot)+1)*d]
	for j, x := range b.vacc {
		out[j] = int8(math.Round(float64(x) * 127))
	}
	return true
}

// vecFieldWeight is how much a word counts in a document's text vector, by
// the field it is in: the name says what a tool does, the description how;
// a server's name and skill ids are left out (they are the same for many
// tools, and the lexical ranking and server hints already use them).
var vecFieldWeight = [numFields]float32{
	fName: 2, fDesc: 1, fParamName: 0.5, fParamDesc: 0.25,
	fServerDesc: 0.25,
}

// removeLocked unindexes the document in slot. ix.mu must be held for writing.
func (ix *Index) removeLocked(slot uint32) {
	e := &ix.docs[slot]
	removedTerm := false
	for _, id := range e.terms {
		t := &ix.terms[id]
		ps := t.postings
		i := sort.Search(len(ps), func(i int) bool { return ps[i].doc >= slot })
		if i < len(ps) && ps[i].doc == slot {
			ps = append(ps[:i], ps[i+1:]...)
		}
		if len(ps) == 0 {
			delete(ix.termIDs, t.text)
			*t = term{}
			ix.freeTerms = append(ix.freeTerms, id)
			removedTerm = true
			continue
		}
		t.postings = ps
	}
	if removedTerm {
		ix.vocab.Store(nil)
	}
	for f := range numFields {
		ix.fieldTotal[f] -= int64(e.flen[f])
	}
	if sd := ix.serverDocs[e.server]; sd != nil {
		delete(sd, slot)
		if len(sd) == 0 {
			delete(ix.serverDocs, e.server)
			if ix.lex != nil {
				k := serverKey(e.server)
				ix.serverKeys[k] = slices.DeleteFunc(ix.serverKeys[k], func(s string) bool { return s == e.server })
				if len(ix.serverKeys[k]) == 0 {
					delete(ix.serverKeys, k)
				}
			}
		}
	}
	delete(ix.byName, e.name)
	if _, ok := ix.pending[e.name]; ok {
		delete(ix.pending, e.name)
		ix.markIdleLocked()
	}
	*e = docEntry{}
	ix.freeDocs = append(ix.freeDocs, slot)
	ix.live--
	ix.gen.Add(1)
}

// vocabulary returns the current vocabView, building it if the vocabulary
// changed since. ix.mu must be held (for reading suffices).
func (ix *Index) vocabulary() *vocabView {
	if v := ix.vocab.Load(); v != nil {
		return v
	}
	ix.vocabMu.Lock()
	defer ix.vocabMu.Unlock()
	if v := ix.vocab.Load(); v != nil {
		return v
	}
	v := &vocabView{byText: make([]uint32, 0, len(ix.termIDs))}
	for _, id := range ix.termIDs {
		t := ix.terms[id].text
		if strings.HasPrefix(t, acronymMark) {
			continue // not a word anyone types in full
		}
		v.byText = append(v.byText, id)
		for len(v.byLen) <= len(t) {
			v.byLen = append(v.byLen, nil)
		}
		v.byLen[len(t)] = append(v.byLen[len(t)], id)
	}
	sort.Slice(v.byText, func(i, j int) bool { return ix.terms[v.byText[i]].text < ix.terms[v.byText[j]].text })
	ix.vocab.Store(v)
	return v
}

// MemoryBytes estimates the index's heap: the backing arrays of the document
// table and postings lists (at capacity), the bytes of every string the index
// holds (names, server names, skills, vocabulary, embed texts; strings shared
// between documents are counted once per document), vectors, and 48 bytes per
// map entry for Go's map overhead. It omits the lazily built vocabulary view
// (4 bytes per term, twice) and pooled search scratch (12 bytes per slot).
func (ix *Index) MemoryBytes() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	const mapEntry = 48
	n := int64(cap(ix.docs))*int64(unsafe.Sizeof(docEntry{})) + int64(cap(ix.dvec)) +
		int64(cap(ix.terms))*int64(unsafe.Sizeof(term{})) +
		int64(cap(ix.freeDocs)+cap(ix.freeTerms))*4
	for i := range ix.docs {
		e := &ix.docs[i]
		if !e.live {
			continue
		}
		n += int64(len(e.name) + len(e.server) + len(e.embedText))
		n += int64(cap(e.terms))*4 + int64(cap(e.vec))*4
		n += int64(cap(e.skills)) * int64(unsafe.Sizeof(""))
		for _, s := range e.skills {
			n += int64(len(s))
		}
	}
	for i := range ix.terms {
		t := &ix.terms[i]
		n += int64(len(t.text)) + int64(cap(t.postings))*int64(unsafe.Sizeof(posting{}))
	}
	n += int64(len(ix.byName)+len(ix.termIDs)+len(ix.pending)) * mapEntry
	for s, sd := range ix.serverDocs {
		n += mapEntry + int64(len(s)) + int64(len(sd))*mapEntry
	}
	for k, ss := range ix.serverKeys {
		n += mapEntry + int64(len(k)) + int64(cap(ss))*int64(unsafe.Sizeof(""))
	}
	return n
}

// embedText is what represents a document to the embeddings model.
func embedText(d *Doc) string {
	var sb strings.Builder
	sb.WriteString(d.Name)
	if d.OriginalName != "" && !strings.HasSuffix(d.Name, d.OriginalName) {
		sb.WriteString(" (")
		sb.WriteString(d.OriginalName)
		sb.WriteString(")")
	}
	if d.Description != "" {
		sb.WriteString(": ")
		sb.WriteString(d.Description)
	}
	if len(d.Params) > 0 {
		sb.WriteString(" Parameters:")
		for i, p := range d.Params {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(" ")
			sb.WriteString(p.Name)
		}
		sb.WriteString(".")
	}
	if d.ServerDescription != "" {
		sb.WriteString(" Server: ")
		sb.WriteString(d.ServerDescription)
	}
	return sb.String()
}
