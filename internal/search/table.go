package search

import (
	"encoding/binary"
	"fmt"
)

// readTableHeader reads the header the embedded tables share (the formats
// ./wordnet and ./wordvec write): a four-byte magic, format version 1,
// the source (a uvarint length, then its bytes) and two uvarint counts. It
// returns them and where the header ends, which is past the end of data
// when a count is malformed: the caller's size checks then reject it.
// Errors wrap malformed.
func readTableHeader(data, magic string, malformed error) (source string, count1, count2, end int, err error) {
	if len(data) < 5 || data[:4] != magic || data[4] != 1 {
		return "", 0, 0, 0, fmt.Errorf("%w: bad magic or version", malformed)
	}
	p := 5
	next := func() int {
		// After a malformed count p is past the end, and so are the
		// counts after it.
		v, n := binary.Uvarint([]byte(data[min(p, len(data)):min(p+binary.MaxVarintLen64, len(data))]))
		if n <= 0 || v > 1<<31 {
			p = len(data) + 1
			return 0
		}
		p += n
		return int(v)
	}
	n := next()
	if p+n > len(data) {
		return "", 0, 0, 0, fmt.Errorf("%w: truncated header", malformed)
	}
	source = data[p : p+n]
	p += n
	count1, count2 = next(), next()
	return source, count1, count2, p, nil
}
