// Command foldoc compiles FOLDOC, the Free On-line Dictionary of Computing,
// into the compact table that internal/search embeds (foldoc.txt): per
// computing term, the terms its entry relates it to. It is the part of the
// default search's offline semantic layer that knows software: that a
// folder is a directory, a chat room a channel, a website a web server
// reached by a URL — which neither WordNet nor GloVe's news English knows.
//
// The table is committed, so building switchboard needs neither FOLDOC nor
// the network. To regenerate it (after changing this program, or to move
// to another FOLDOC release), from the repository root, on Debian:
//
//	apt-get install dict-foldoc
//	go run ./internal/search/foldoc -index /usr/share/dictd/foldoc.index \
//	    -dict /usr/share/dictd/foldoc.dict.dz -o internal/search/foldoc.txt
//
// Debian's dict-foldoc packages FOLDOC (edited by Denis Howe, under the GNU
// Free Documentation License 1.1 or later) in dictd's format: an index of
// headwords with the offset and length of their entry, and the entries,
// dictzip-compressed. internal/search/FOLDOC-LICENSE says more.
//
// What is kept, per headword (lower case; several headwords of one entry
// are aliases, "directory", "directories", "folder"): the entry's other
// headwords and the targets of a "See {...}" entry (aliases), and the terms
// its first paragraph cross-references in braces. See table.go for the
// format.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	index := flag.String("index", "", "dictd index (foldoc.index)")
	dict := flag.String("dict", "", "dictd data, plain or dictzip (foldoc.dict.dz)")
	out := flag.String("o", "foldoc.txt", "output file")
	source := flag.String("source", "dict-foldoc", "what the table is built from, recorded in it")
	flag.Parse()
	if *index == "" || *dict == "" {
		fmt.Fprintln(os.Stderr, "usage: foldoc -index foldoc.index -dict foldoc.dict.dz [-o foldoc.txt]")
		os.Exit(2)
	}
	if err := run(*index, *dict, *out, *source); err != nil {
		fmt.Fprintln(os.Stderr, "foldoc:", err)
		os.Exit(1)
	}
}

func run(index, dict, out, source string) error {
	entries, err := readDict(index, dict)
	if err != nil {
		return err
	}
	t := build(entries)
	b := t.encode(source)
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	fmt.Fprintf(os.Stderr, "foldoc: %s: %d headwords from %d entries, %d bytes (from %s)\n", out, len(t.keys), len(entries), len(b), source)
	return nil
}
