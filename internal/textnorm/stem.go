// Package textnorm is the text analysis search and skills share, so that a
// word means the same to both: today one stemmer.
package textnorm

import "strings"

// Stem reduces an English word to a stem so that plural, -ing, -ed and -er
// forms of a verb or noun meet ("files", "file"; "creating", "created",
// "creates", "create" → "creat"). It is a Porter-lite in four steps, chosen
// for tool vocabularies rather than prose:
//
//  1. plurals: -ies → -y, -sses → -ss, -ches/-shes/-xes/-zzes drop "es",
//     a final -s goes unless the word ends in -ss, -us, -is or -as;
//  2. -ied → -y; -ing and -ed go when at least three letters with a vowel
//     remain; then -er goes when at least four letters remain;
//  3. a doubled final consonant (other than l, s, z) is undoubled, and a
//     three-letter consonant-vowel-consonant stem gets its e back;
//  4. a final -e goes from words of four letters or more ("file" stays).
//
// Words of three letters or fewer, and words with digits, are left alone.
func Stem(w string) string {
	if len(w) <= 3 || !isASCIILetters(w) {
		return w
	}
	// Step 1: plurals.
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"),
		strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "zzes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") &&
		!strings.HasSuffix(w, "is") && !strings.HasSuffix(w, "as"):
		w = w[:len(w)-1]
	}
	// Step 2: verb suffixes.
	stripped := false
	switch {
	case strings.HasSuffix(w, "ied") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ing") && len(w) >= 6 && hasVowel(w[:len(w)-3]):
		w, stripped = w[:len(w)-3], true
	case strings.HasSuffix(w, "ed") && len(w) >= 5 && hasVowel(w[:len(w)-2]):
		w, stripped = w[:len(w)-2], true
	}
	if strings.HasSuffix(w, "er") && len(w) >= 6 {
		w, stripped = w[:len(w)-2], true
	}
	// Step 3: undouble after a stripped suffix ("running" → "run"), or give
	// a short consonant-vowel-consonant stem its e back ("moving" → "move").
	if stripped && len(w) >= 4 {
		c := w[len(w)-1]
		if c == w[len(w)-2] && !IsVowel(c) && c != 'l' && c != 's' && c != 'z' {
			w = w[:len(w)-1]
		}
	} else if stripped && len(w) == 3 && !IsVowel(w[0]) && IsVowel(w[1]) && !IsVowel(w[2]) &&
		w[2] != 'w' && w[2] != 'x' {
		w += "e"
	}
	// Step 4: a final silent e ("create" and "creating" → "creat").
	if len(w) >= 5 && w[len(w)-1] == 'e' && w[len(w)-2] != 'e' {
		w = w[:len(w)-1]
	}
	return w
}

func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// IsVowel reports whether c is a, e, i, o, u or y (as the stemmer counts them).
func IsVowel(c byte) bool {
	return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y'
}

func hasVowel(w string) bool {
	for i := 0; i < len(w); i++ {
		if IsVowel(w[i]) {
			return true
		}
	}
	return false
}
