package search

import (
	"slices"
	"strings"
	"sync"
)

// Query understanding: what the words of a query say beyond their terms.
// An intent verb ("delete", "list") favours the tools whose annotations
// agree (a destructive tool for "wipe", a read-only one for "show"); a
// server's name in the query ("in github …") favours that server's tools.
// Both multiply scores, so a tool must still match to be found.
const (
	// intentBoost multiplies the score of a tool whose annotations fit the
	// query's intent; intentDamp that of one whose annotations contradict
	// it (a destructive tool for "show me …").
	intentBoost = 1.3
	intentDamp  = 0.8
	// serverBoost multiplies the score of the tools of a server the query
	// names.
	serverBoost = 1.5
)

// intent is what a query asks to do, as far as annotations can tell.
type intent uint8

const (
	intentNone   intent = iota
	intentRead          // look without changing: read-only tools fit
	intentDelete        // remove something: destructive tools fit
)

// Document flags from the tool's annotations (MCP hints are hints: only
// explicit values count).
const (
	docReadOnly    uint8 = 1 << iota // readOnlyHint: true
	docDestructive                   // destructiveHint: true and not read-only
	docHasVec                        // ix.dvec holds the document's text vector
)

// intentVerbs are the verbs of tool names that say what a tool does to
// its data; a query word WordNet relates to one of them expresses that
// intent.
var intentVerbs = map[intent][]string{
	intentRead:   {"read", "get", "list", "show", "find", "search", "view"},
	intentDelete: {"delete", "remove", "erase", "destroy"},
}

// intentWords maps the table's word ids of intentVerbs to their intent.
var intentWords = sync.OnceValue(func() map[int]intent {
	lx, err := defaultLexicon()
	if err != nil {
		return nil
	}
	m := map[int]intent{}
	for in, verbs := range intentVerbs {
		for _, v := range verbs {
			if i, ok := lx.find(v); ok {
				m[i] = in
			}
		}
	}
	return m
})

// queryIntent is the intent of the query's words: a word is an intent
// verb, or shares a sense with one among its first senses ("erase" and
// "delete"). Deleting wins over reading ("find and remove …" is a
// removal).
func (ix *Index) queryIntent(toks []qtoken) intent {
	words := intentWords()
	lx := ix.lex
	found := intentNone
	for _, tk := range toks {
		if tk.whole {
			continue
		}
		lx.baseForms(tk.raw, func(base int) {
			found = max(found, words[base])
			lx.senses(base, func(syn, rank int, _ bool) bool {
				if rank < maxSenses {
					lx.synset(syn, func(word int, _ bool) { found = max(found, words[word]) }, nil, nil)
				}
				return true
			})
		})
	}
	return found
}

// hintedServers marks in sc the servers whose names the query contains as
// a word ("github", "sequential-thinking" typed as one), and reports
// whether there was any.
func (ix *Index) hintedServers(sc *scratch) bool {
	sc.hinted = sc.hinted[:0]
	for _, tk := range sc.toks {
		for _, s := range ix.serverKeys[tk.raw] {
			if !slices.Contains(sc.hinted, s) {
				sc.hinted = append(sc.hinted, s)
			}
		}
	}
	return len(sc.hinted) > 0
}

// serverKey is a server name as a query token would spell it: lower case,
// a multi-part name joined.
func serverKey(name string) string {
	var sb strings.Builder
	n := 0
	scanTokens(name, func(raw, _ string, whole bool) {
		if whole {
			sb.Reset()
			sb.WriteString(raw)
			return
		}
		if n == 0 {
			sb.WriteString(raw)
		}
		n++
	})
	return sb.String()
}

// understand adjusts the lexical scores in sc by the query's intent and
// server hints.
func (ix *Index) understand(sc *scratch) {
	in := ix.queryIntent(sc.toks)
	hinted := ix.hintedServers(sc)
	if in == intentNone && !hinted {
		return
	}
	for _, slot := range sc.touched {
		e := &ix.docs[slot]
		f := float32(1)
		switch {
		case in == intentDelete && e.flags&docDestructive != 0,
			in == intentRead && e.flags&docReadOnly != 0:
			f = intentBoost
		case in == intentDelete && e.flags&docReadOnly != 0,
			in == intentRead && e.flags&docDestructive != 0:
			f = intentDamp
		}
		if hinted {
			for _, s := range sc.hinted {
				if e.server == s {
					f *= serverBoost
					break
				}
			}
		}
		sc.acc[slot] *= f
	}
}

// acronymMark starts the index terms that hold the initials of a tool
// name's consecutive words ("pull_request" → "pr", "get_file_info" →
// "gf", "fi", "gfi"), so a query's "PR" finds pull requests. The mark keeps
// them apart from words: only an acronym typed as one looks them up.
const acronymMark = "\x01"

// acronymWeight is an acronym match against an exact one (1).
const acronymWeight = 0.8

// addAcronyms counts in the name field the initials of every run of two or
// three consecutive words of name, without adding to the field's length
// (they are another spelling of words already counted).
func addAcronyms(b *docBuilder, name string) {
	var parts [16]string
	n := 0
	scanTokens(name, func(raw, _ string, whole bool) {
		if !whole && n < len(parts) {
			parts[n] = raw
			n++
		}
	})
	for i := 0; i+1 < n; i++ {
		for k := 2; k <= 3 && i+k <= n; k++ {
			acr := make([]byte, 0, len(acronymMark)+k)
			acr = append(acr, acronymMark...)
			ok := true
			for _, p := range parts[i : i+k] {
				if c := p[0]; c < 'a' || c > 'z' {
					ok = false
					break
				}
				acr = append(acr, p[0])
			}
			if ok {
				b.count(fName, string(acr))
			}
		}
	}
}

// isAcronym reports whether a query word may be an acronym: two to four
// ASCII letters.
func isAcronym(raw string) bool {
	if len(raw) < 2 || len(raw) > 4 {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] < 'a' || raw[i] > 'z' {
			return false
		}
	}
	return true
}
