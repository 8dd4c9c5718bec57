package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// hashSuffixLen is len("_") + 8 hex digits.
const hashSuffixLen = 9

// join namespaces original under prefix with sep; an empty prefix leaves it
// unchanged.
func join(prefix, sep, original string) string {
	if prefix == "" {
		return original
	}
	return prefix + sep + original
}

// shorten returns name if it fits in max bytes, else its first max-9 bytes
// plus "_" and the first 8 hex digits of sha256(name): exactly max bytes,
// and a function of name alone, so it is stable whatever order servers are
// registered in.
func shorten(name string, max int) string {
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:max-hashSuffixLen] + "_" + hex.EncodeToString(sum[:4])
}

// toolNames returns the canonical (client-visible) name of a tool and every
// other name it answers to: the other separator form and the unshortened
// forms. aliases never contains canonical and has no duplicates.
func (c *Catalog) toolNames(prefix, original string) (canonical string, aliases []string) {
	full := join(prefix, c.sep, original)
	canonical = shorten(full, c.maxLen)
	add := func(n string) {
		if n != canonical && !slices.Contains(aliases, n) {
			aliases = append(aliases, n)
		}
	}
	add(full)
	if prefix != "" {
		alt := join(prefix, c.altSep, original)
		add(shorten(alt, c.maxLen))
		add(alt)
	}
	return canonical, aliases
}

// promptNames is toolNames without shortening: prompt names are not subject
// to LLM tool-name limits.
func (c *Catalog) promptNames(prefix, original string) (canonical string, aliases []string) {
	canonical = join(prefix, c.sep, original)
	if prefix != "" {
		aliases = []string{join(prefix, c.altSep, original)}
	}
	return canonical, aliases
}

// namespaceURI is prefix + "+" + original; an empty prefix leaves original
// unchanged.
func namespaceURI(prefix, original string) string {
	if prefix == "" {
		return original
	}
	return prefix + "+" + original
}
