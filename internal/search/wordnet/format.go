package main

import (
	"encoding/binary"
)

// The table's layout (version 1), read in place by internal/search without
// copying it to the heap. Integers are little-endian; "uvarint" is
// encoding/binary's.
//
//	"SBWN" 0x01
//	uvarint len(source), source         what it was built from
//	uvarint words, uvarint synsets
//	(words+1) × uint32                  offsets of each word in the word bytes
//	word bytes                          the words, sorted, concatenated
//	(words+1) × uint32                  offsets of each word's senses
//	sense bytes                         per sense: uvarint(synset<<5 | rank<<1 | compound)
//	(synsets+1) × uint32                offsets of each synset's record
//	synset bytes                        per synset: part of speech ('n', 'v', 'a'; | 0x80 for
//	                                    a computer-science sense),
//	                                    uvarint lemma count, per lemma uvarint(word<<1 | compound),
//	                                    uvarint gloss count, per definition word uvarint(word),
//	                                    then to the record's end, per link uvarint(synset<<3 | relation)
//
// The uint32 tables let a reader binary-search the words and jump to a
// synset without decoding anything else.
const (
	magic   = "SBWN"
	version = 1
)

func encode(g *graph, source string) []byte {
	var b []byte
	b = append(b, magic...)
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(source)))
	b = append(b, source...)
	b = binary.AppendUvarint(b, uint64(len(g.words)))
	b = binary.AppendUvarint(b, uint64(len(g.synsets)))

	b = appendTable(b, len(g.words), func(dst []byte, i int) []byte {
		return append(dst, g.words[i]...)
	})
	b = appendTable(b, len(g.words), func(dst []byte, i int) []byte {
		for _, s := range g.senses[i] {
			v := uint64(s.synset)<<5 | uint64(min(s.rank, 15))<<1
			if s.compound {
				v |= 1
			}
			dst = binary.AppendUvarint(dst, v)
		}
		return dst
	})
	return appendTable(b, len(g.synsets), func(dst []byte, i int) []byte {
		s := &g.synsets[i]
		pos := s.pos
		if s.computing {
			pos |= 0x80
		}
		dst = append(dst, pos)
		dst = binary.AppendUvarint(dst, uint64(len(s.lemmas)))
		for _, l := range s.lemmas {
			v := uint64(l.word) << 1
			if l.compound {
				v |= 1
			}
			dst = binary.AppendUvarint(dst, v)
		}
		dst = binary.AppendUvarint(dst, uint64(len(s.gloss)))
		for _, w := range s.gloss {
			dst = binary.AppendUvarint(dst, uint64(w))
		}
		for _, p := range s.ptrs {
			dst = binary.AppendUvarint(dst, uint64(p.to)<<3|uint64(p.rel))
		}
		return dst
	})
}

// appendTable appends n+1 uint32 offsets, then the n items they delimit,
// each written by item.
func appendTable(b []byte, n int, item func(dst []byte, i int) []byte) []byte {
	var data []byte
	offs := make([]uint32, 0, n+1)
	for i := range n {
		offs = append(offs, uint32(len(data)))
		data = item(data, i)
	}
	offs = append(offs, uint32(len(data)))
	for _, o := range offs {
		b = binary.LittleEndian.AppendUint32(b, o)
	}
	return append(b, data...)
}
