package audit

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxKeyWords bounds the word set a pattern is expanded into; a pattern
// with more words (a long character class repeated, say) keeps its regexp.
const maxKeyWords = 256

// keyMatcher decides which object keys are sensitive: those a
// case-insensitive regular expression matches anywhere. Running the regexp
// on every key of every argument and result was the largest cost of the
// audit path, so a pattern whose language is a finite set of words (the
// default, and any alternation of names with optional parts or character
// classes) is expanded once into its lower-cased words, and an ASCII key is
// folded on the fly while it is searched for them, in one pass. A key with
// other runes still goes to the regexp, whose case folding knows Unicode
// (the Kelvin sign matches "k"). A keyMatcher is immutable.
type keyMatcher struct {
	re *regexp.Regexp // nil: no key is sensitive
	// words is false when the pattern could not be expanded: every key
	// goes to re.
	words bool
	// any is true when the empty word is in the set: every key matches.
	any bool
	// byFirst lists the words by their first byte, lower case ASCII.
	byFirst [utf8.RuneSelf][]string
}

// newKeyMatcher expands re into words when it can.
func newKeyMatcher(re *regexp.Regexp) *keyMatcher {
	m := &keyMatcher{re: re}
	if re == nil {
		return m
	}
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return m // cannot happen: re compiled from the same string
	}
	words, ok := expandWords(parsed.Simplify())
	if !ok {
		return m
	}
	m.words = true
	for _, w := range minimalWords(words) {
		if w == "" {
			m.any = true
			continue
		}
		m.byFirst[w[0]] = append(m.byFirst[w[0]], w)
	}
	return m
}

// match reports whether key is sensitive.
func (m *keyMatcher) match(key string) bool {
	if m.re == nil {
		return false
	}
	if !m.words {
		return m.re.MatchString(key)
	}
	found, ascii := searchWords(m, key)
	if found || ascii {
		return found
	}
	return m.re.MatchString(key)
}

// matchBytes is match for a key not yet made a string.
func (m *keyMatcher) matchBytes(key []byte) bool {
	if m.re == nil {
		return false
	}
	if !m.words {
		return m.re.Match(key)
	}
	found, ascii := searchWords(m, key)
	if found || ascii {
		return found
	}
	return m.re.Match(key)
}

// searchWords looks for the words in key, folding ASCII letters to lower case.
// It reports whether one was found, and whether key is all ASCII (then not
// finding one is the answer).
func searchWords[K string | []byte](m *keyMatcher, key K) (found, ascii bool) {
	if m.any {
		return true, true
	}
	ascii = true
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= utf8.RuneSelf {
			ascii = false
			continue
		}
		for _, w := range m.byFirst[lower(c)] {
			if hasFoldPrefix(key[i:], w) {
				return true, ascii
			}
		}
	}
	return false, ascii
}

// hasFoldPrefix reports whether s starts with the lower-case ASCII word w,
// ignoring ASCII case in s.
func hasFoldPrefix[K string | []byte](s K, w string) bool {
	if len(s) < len(w) {
		return false
	}
	for j := 0; j < len(w); j++ {
		if lower(s[j]) != w[j] {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isLetter(c byte) bool { return 'a' <= lower(c) && lower(c) <= 'z' }

// expandWords returns the words over ASCII, in lower case, that re matches
// exactly, when there are at most maxKeyWords of them and the set is
// closed under ASCII case changes (so that folding a key to lower case
// before looking for them loses nothing). Runes outside ASCII are left out:
// keys holding them are matched by the regexp. It reports false for
// anything else (repetition without bound, anchors, word boundaries, a
// case-sensitive letter).
func expandWords(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpNoMatch:
		return nil, true
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		b := make([]byte, 0, len(re.Rune))
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf {
				// A literal rune outside ASCII may still fold to an
				// ASCII one (the Kelvin sign to k): leave it to the regexp.
				return nil, false
			}
			c := byte(r)
			if isLetter(c) {
				if re.Flags&syntax.FoldCase == 0 {
					return nil, false
				}
				c = lower(c)
			}
			b = append(b, c)
		}
		return []string{string(b)}, true
	case syntax.OpCharClass:
		var in [utf8.RuneSelf]bool
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1] && r < utf8.RuneSelf; r++ {
				in[r] = true
			}
		}
		var words []string
		for c := range byte(utf8.RuneSelf) {
			if !in[c] {
				continue
			}
			if isLetter(c) {
				if !in[c^0x20] { // ASCII upper and lower case differ in bit 5
					return nil, false
				}
				if c != lower(c) {
					continue // listed as its lower case
				}
			}
			words = append(words, string(rune(c)))
		}
		return words, len(words) <= maxKeyWords
	case syntax.OpCapture:
		return expandWords(re.Sub[0])
	case syntax.OpQuest:
		words, ok := expandWords(re.Sub[0])
		return append(words, ""), ok && len(words) < maxKeyWords
	case syntax.OpAlternate:
		var words []string
		for _, sub := range re.Sub {
			w, ok := expandWords(sub)
			if !ok || len(words)+len(w) > maxKeyWords {
				return nil, false
			}
			words = append(words, w...)
		}
		return words, true
	case syntax.OpConcat:
		words := []string{""}
		for _, sub := range re.Sub {
			w, ok := expandWords(sub)
			if !ok || len(words)*len(w) > maxKeyWords {
				return nil, false
			}
			next := make([]string, 0, len(words)*len(w))
			for _, a := range words {
				for _, b := range w {
					next = append(next, a+b)
				}
			}
			words = next
		}
		return words, true
	}
	return nil, false
}

// minimalWords drops duplicates and every word that contains another one:
// a key holding the longer word also holds the shorter.
func minimalWords(words []string) []string {
	slices.Sort(words)
	words = slices.Compact(words)
	var out []string
	for _, w := range words {
		redundant := false
		for _, v := range words {
			if v != w && strings.Contains(w, v) {
				redundant = true
				break
			}
		}
		if !redundant {
			out = append(out, w)
		}
	}
	return out
}
