package search

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"unsafe"
)

// wordvecTable is GloVe word vectors compiled by ./wordvec (see its doc for
// how to regenerate it): per word, as written, a unit vector of one
// signed byte per dimension. It is read in place; nothing of it is copied
// to the heap.
//
//go:embed wordvec.bin
var wordvecTable string

// wordVectors reads a table in the format ./wordvec writes (see its
// build.go).
type wordVectors struct {
	data      string
	source    string
	n, dims   int
	offs, dat int // word offsets and word bytes
	rec       int // first record
}

var errWordVectors = errors.New("malformed word vector table")

// defaultWordVectors is the embedded table, parsed once (the header only).
var defaultWordVectors = sync.OnceValues(func() (*wordVectors, error) { return parseWordVectors(wordvecTable) })

func parseWordVectors(data string) (*wordVectors, error) {
	source, n, dims, p, err := readTableHeader(data, "SBWV", errWordVectors)
	if err != nil {
		return nil, err
	}
	wv := &wordVectors{data: data, source: source, n: n, dims: dims}
	if p > len(data) || wv.dims == 0 || wv.dims > 1024 {
		return nil, fmt.Errorf("%w: bad counts", errWordVectors)
	}
	wv.offs = p
	p += 4 * (wv.n + 1)
	if p > len(data) {
		return nil, fmt.Errorf("%w: truncated offsets", errWordVectors)
	}
	wv.dat = p
	p += int(wv.u32(wv.offs + 4*wv.n))
	wv.rec = p
	if p+wv.n*(4+wv.dims) != len(data) {
		return nil, fmt.Errorf("%w: size does not match its counts", errWordVectors)
	}
	for i := range wv.n {
		if wv.u32(wv.offs+4*i) > wv.u32(wv.offs+4*i+4) {
			return nil, fmt.Errorf("%w: offsets out of order", errWordVectors)
		}
	}
	return wv, nil
}

func (wv *wordVectors) u32(p int) uint32 {
	return binary.LittleEndian.Uint32([]byte(wv.data[p : p+4]))
}

func (wv *wordVectors) word(i int) string {
	return wv.data[wv.dat+int(wv.u32(wv.offs+4*i)) : wv.dat+int(wv.u32(wv.offs+4*i+4))]
}

// find returns the entry of a word (lower case, as written), if the table
// has it.
func (wv *wordVectors) find(word string) (int, bool) {
	i := sort.Search(wv.n, func(i int) bool { return wv.word(i) >= word })
	return i, i < wv.n && wv.word(i) == word
}

// vec is entry i's vector, ×127, read in place.
func (wv *wordVectors) vec(i int) []int8 {
	p := wv.rec + i*(4+wv.dims) + 4
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.StringData(wv.data[p:]))), wv.dims)
}

// weight is how much entry i counts in the vector of a text: a/(a+p(w))
// (Arora et al.'s smooth inverse frequency), with p(w) estimated from the
// word's frequency rank by Zipf's law, so "make" or "new" barely move a
// text's vector and "directory" or "screenshot" set it.
func (wv *wordVectors) weight(i int) float32 {
	rank := float64(wv.u32(wv.rec + i*(4+wv.dims)))
	p := 1 / ((rank + 1) * zipfNorm)
	return float32(sifA / (sifA + p))
}

const (
	// sifA is the smoothing of the inverse frequency weight: a word of
	// frequency rank 1,000 weighs about half as much as a rare word.
	sifA = 1e-4
	// zipfNorm is the harmonic number of GloVe's 400,000-word vocabulary:
	// by Zipf's law the word of rank r has frequency 1/(r·zipfNorm).
	zipfNorm = 13.5
)

// add adds entry i's vector to acc (len dims), weighted by w and by the
// word's rarity.
func (wv *wordVectors) add(acc []float32, i int, w float32) {
	w *= wv.weight(i)
	for j, x := range wv.vec(i) {
		acc[j] += w * float32(x)
	}
}

// unitInto normalizes v and reports whether it was non-zero.
func unitInto(v []float32) bool {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return false
	}
	s := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= s
	}
	return true
}

// How word vectors rank: the score of each tool the query matched (by its
// words or their WordNet and FOLDOC relatives) becomes a fraction of the
// best one, plus vecWeight × how far the cosine of its text vector and the
// query's exceeds vecFloor (scaled to [0, 1]). Below the floor texts are no
// more alike than unrelated ones usually are, and the vectors add nothing;
// above it they add at most half of what the best match has, so a tool that
// says what the user typed still ranks first, and among tools that match
// alike the one whose whole text is nearest the query's comes first.
const (
	vecWeight = 0.5
	vecFloor  = 0.2
)

// scoreVectors adds the word vector similarity of the query and each
// matching document to the scores in sc (see vecWeight). It scores only the
// documents the query matched: scoring every document in scope as well
// (found by their vectors alone) changed no figure of either relevance set
// and tripled the CPU time of a search over 10,000 tools.
func (ix *Index) scoreVectors(sc *scratch, depth int) {
	if len(sc.touched) == 0 {
		return
	}
	wv := ix.wv
	d := wv.dims
	if len(sc.qvec) != d {
		sc.qvec = make([]float32, d)
	}
	clear(sc.qvec)
	n := 0
	for i, tk := range sc.toks {
		if tk.whole || i >= maxExpandedTokens || repeated(sc.toks[:i], tk.term) {
			continue
		}
		if e, ok := wv.find(tk.raw); ok {
			wv.add(sc.qvec, e, 1)
			n++
		}
	}
	if n == 0 || !unitInto(sc.qvec) {
		return
	}
	var best float32
	for _, slot := range sc.touched {
		best = max(best, sc.acc[slot])
	}
	if best <= 0 {
		return
	}
	// The query's vector in the documents' scale, so that each document
	// costs one integer dot product.
	if len(sc.qvec8) != d {
		sc.qvec8 = make([]int8, d)
	}
	for j, x := range sc.qvec {
		sc.qvec8[j] = int8(math.Round(float64(x) * 127))
	}
	scale := float32(vecWeight / (1 - vecFloor) / (127 * 127))
	floor := int32(math.Round(vecFloor * 127 * 127))
	// Vectors add at most vecWeight: a tool whose score is below the
	// depth-th best by more than that cannot reach the ranking, and is not
	// worth a dot product.
	cut := float32(0)
	if len(sc.touched) > depth {
		sc.kth = sc.kth[:0]
		for _, slot := range sc.touched {
			sc.kth = pushMin(sc.kth, depth, sc.acc[slot])
		}
		cut = sc.kth[0]/best - vecWeight
	}
	for _, slot := range sc.touched {
		sc.acc[slot] /= best
		if sc.acc[slot] < cut || ix.docs[slot].flags&docHasVec == 0 {
			continue
		}
		if c := dot8(sc.qvec8, ix.dvec[int(slot)*d:(int(slot)+1)*d]); c > floor {
			sc.acc[slot] += float32(c-floor) * scale
		}
	}
}

// pushMin keeps the k largest values in h, a min-heap (smallest at h[0]).
func pushMin(h []float32, k int, v float32) []float32 {
	if len(h) < k {
		h = append(h, v)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if h[p] <= h[i] {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		return h
	}
	if v <= h[0] {
		return h
	}
	h[0] = v
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if r < len(h) && h[r] < h[m] {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return h
}

// dot8 is the dot product of two vectors of signed bytes of the same
// length. Eight products a step, into four sums, with the bounds checked
// once per step: a third faster than the plain loop.
func dot8(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	for len(a) >= 8 {
		aa, bb := a[:8:8], b[:8:8]
		s0 += int32(aa[0])*int32(bb[0]) + int32(aa[4])*int32(bb[4])
		s1 += int32(aa[1])*int32(bb[1]) + int32(aa[5])*int32(bb[5])
		s2 += int32(aa[2])*int32(bb[2]) + int32(aa[6])*int32(bb[6])
		s3 += int32(aa[3])*int32(bb[3]) + int32(aa[7])*int32(bb[7])
		a, b = a[8:], b[8:]
	}
	for i := range a {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}
