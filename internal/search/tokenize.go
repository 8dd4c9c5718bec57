package search

import (
	"github.com/switchboard-mcp/switchboard/internal/textnorm"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenize turns text (a tool name, a description, a query) into index terms.
// Tool names are identifiers, so it splits every naming style a server may use
// ("read_text_file", "readTextFile", "read-text-file", "fs.read.text.file",
// "getHTTPResponse2" → get http response 2), keeps each multi-part identifier
// as one extra term with its separators removed ("readtextfile": the same term
// for all styles), drops a small English stopword list and applies [Stem] to
// the parts. Every returned term is non-empty and lower-case.
func Tokenize(text string) []string {
	return appendTokens(nil, text)
}

// appendTokens is [Tokenize] appending to dst, so callers can reuse a buffer.
func appendTokens(dst []string, text string) []string {
	scanTokens(text, func(_, term string, _ bool) { dst = append(dst, term) })
	return dst
}

// scanTokens calls fn for every term of text in order: raw is the part as
// written (lower-cased, before stemming), term the indexed form, and whole
// is true for the joined form of a multi-part identifier.
func scanTokens(text string, fn func(raw, term string, whole bool)) {
	var parts [16]string
	var joined strings.Builder
	i := 0
	for i < len(text) {
		// An identifier is a maximal run of letters, digits and the inner
		// separators _ - . (a dot or dash ending a sentence is trimmed).
		start := i
		for i < len(text) {
			r, size := utf8.DecodeRuneInString(text[i:])
			if !isWordRune(r) && r != '_' && r != '-' && r != '.' {
				break
			}
			i += size
		}
		if start == i {
			_, size := utf8.DecodeRuneInString(text[i:])
			i += size
			continue
		}
		ident := strings.Trim(text[start:i], "_-.")
		if ident == "" {
			continue
		}
		ps := splitIdent(parts[:0], ident)
		for _, p := range ps {
			if stopwords[p] {
				continue
			}
			fn(p, Stem(p), false)
		}
		if len(ps) > 1 {
			joined.Reset()
			for _, p := range ps {
				joined.WriteString(p)
			}
			w := joined.String()
			fn(w, w, true)
		}
	}
}

// isWordRune reports whether r belongs inside a word.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// splitIdent splits one identifier into lower-case parts at separators,
// lower→upper and acronym→word case changes, and letter↔digit boundaries.
func splitIdent(dst []string, ident string) []string {
	const (
		other = iota
		lower
		upper
		digit
	)
	class := func(r rune) int {
		switch {
		case unicode.IsDigit(r):
			return digit
		case unicode.IsUpper(r):
			return upper
		case unicode.IsLetter(r):
			return lower
		}
		return other
	}
	runes := []rune(ident)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			dst = append(dst, lowerString(runes[start:end]))
		}
		start = -1
	}
	for k, r := range runes {
		c := class(r)
		if c == other {
			flush(k)
			continue
		}
		if start < 0 {
			start = k
			continue
		}
		prev := class(runes[k-1])
		switch {
		case prev == digit && c != digit, prev != digit && c == digit:
			flush(k)
			start = k
		case prev == lower && c == upper:
			flush(k)
			start = k
		case prev == upper && c == upper && k+1 < len(runes) && class(runes[k+1]) == lower:
			// "HTTPResponse": the last capital starts the next word.
			flush(k)
			start = k
		}
	}
	flush(len(runes))
	return dst
}

// lowerString lower-cases runes into a string. Runes whose lower-case form is
// not stable under a second lowering are kept lowered once by strings.ToLower,
// which is what the tokens are checked against.
func lowerString(rs []rune) string {
	return strings.ToLower(string(rs))
}

// stopwords are dropped from queries and documents: they match nearly every
// description and would only add noise to the ranking.
var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true,
	"by": true, "can": true, "do": true, "does": true, "for": true, "from": true, "how": true,
	"i": true, "in": true, "into": true, "is": true, "it": true, "its": true, "me": true,
	"my": true, "of": true, "on": true, "or": true, "our": true, "please": true, "should": true,
	"so": true, "some": true, "that": true, "the": true, "their": true, "them": true,
	"then": true, "there": true, "these": true, "this": true, "those": true, "to": true,
	"was": true, "we": true, "what": true, "when": true, "which": true, "who": true,
	"will": true, "with": true, "you": true, "your": true, "want": true, "need": true,
	"s": true, "t": true,
}

// Stem is [textnorm.Stem], the one stemmer of the tree: search and skills
// stem alike.
var Stem = textnorm.Stem

// editDistance is the optimal-string-alignment Damerau-Levenshtein distance
// between a and b, giving up (returning max+1) once it must exceed max.
func editDistance(a, b string, max int) int {
	if d := len(a) - len(b); d > max || -d > max {
		return max + 1
	}
	// Three rolling rows: two back for transpositions.
	n := len(b)
	var buf [3 * 64]int
	var rows []int
	if 3*(n+1) <= len(buf) {
		rows = buf[:3*(n+1)]
	} else {
		rows = make([]int, 3*(n+1))
	}
	prev2, prev, cur := rows[:n+1], rows[n+1:2*(n+1)], rows[2*(n+1):]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= n; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			best = min(best, v)
		}
		if best > max {
			return max + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[n]
}
