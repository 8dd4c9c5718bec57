package authz

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// match reports whether name matches pattern, where "*" matches any run of
// bytes (dots and slashes included) and every other byte is literal. It is
// case-sensitive, allocation-free and linear in practice (one backtracking
// point, the classic wildcard algorithm), which matters because every
// uncached decision runs it over an agent's grants.
func match(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			// Let the last star swallow one more byte and retry.
			mark++
			p, n = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// literalLen is how specific a pattern is: the more literal bytes, the
// narrower it matches. It picks the grant a decision names when several match.
func literalLen(pattern string) int {
	return len(pattern) - strings.Count(pattern, "*")
}

// isGlob reports whether a HighRisk entry is a pattern on the namespaced name
// rather than a word of the tool's own name.
func isGlob(entry string) bool {
	return strings.ContainsAny(entry, "*.")
}

// isSingleToken reports whether word is exactly one token as nextToken splits
// names, so it can be compared token by token; anything else ("drop_table")
// is matched as a case-insensitive substring instead.
func isSingleToken(word string) bool {
	tok, next := nextToken(word, 0)
	return tok == word && next == len(word)
}

// containsFold is a case-insensitive strings.Contains that does not allocate.
func containsFold(s, sub string) bool {
	if sub == "" {
		return false
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

type runeClass int

const (
	classOther runeClass = iota
	classLower           // lower-case or caseless letter
	classUpper
	classDigit
)

func classify(r rune) runeClass {
	if r < utf8.RuneSelf {
		switch {
		case 'a' <= r && r <= 'z':
			return classLower
		case 'A' <= r && r <= 'Z':
			return classUpper
		case '0' <= r && r <= '9':
			return classDigit
		default:
			return classOther
		}
	}
	switch {
	case unicode.IsDigit(r):
		return classDigit
	case unicode.IsUpper(r):
		return classUpper
	case unicode.IsLetter(r):
		return classLower
	default:
		return classOther
	}
}

// nextToken returns the first token of s at or after byte i and the index
// just past it. Tokens are runs of letters or digits, split at separators,
// at letter/digit changes and at camelCase humps ("HTTPWriteFile" is "HTTP",
// "Write", "File"). It returns "" and len(s) when no token is left.
func nextToken(s string, i int) (string, int) {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if classify(r) != classOther {
			break
		}
		i += size
	}
	if i >= len(s) {
		return "", len(s)
	}
	start := i
	r, size := utf8.DecodeRuneInString(s[i:])
	prev := classify(r)
	i += size
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		c := classify(r)
		switch {
		case c == classOther:
			return s[start:i], i
		case (c == classDigit) != (prev == classDigit):
			return s[start:i], i
		case prev == classLower && c == classUpper:
			return s[start:i], i
		case prev == classUpper && c == classUpper:
			// An acronym ends before the upper-case letter that starts a
			// lower-case word: "HTTPWrite" splits before "W".
			if j := i + size; j < len(s) {
				if r2, _ := utf8.DecodeRuneInString(s[j:]); classify(r2) == classLower {
					return s[start:i], i
				}
			}
		}
		prev = c
		i += size
	}
	return s[start:i], i
}
