package upstream

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
)

const (
	// stderrLines is how much of a child's stderr is kept for Status and the API.
	stderrLines = 200
	// maxStderrLine bounds one kept line; the rest of a longer line is dropped
	// (but still read, so the child never blocks on a full pipe).
	maxStderrLine = 4096
)

// lineRing keeps the last lines written to it. It outlives sessions, so the
// output of a crashed server stays visible after the crash.
type lineRing struct {
	mu    sync.Mutex
	lines []string // circular once full
	next  int      // index of the oldest line once full
}

func (r *lineRing) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < stderrLines {
		r.lines = append(r.lines, line)
		return
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % stderrLines
}

// snapshot returns the lines oldest first.
func (r *lineRing) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.lines))
	out = append(out, r.lines[r.next:]...)
	return append(out, r.lines[:r.next]...)
}

// last returns the most recent line, or "".
func (r *lineRing) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) == 0 {
		return ""
	}
	i := len(r.lines) - 1
	if len(r.lines) == stderrLines {
		i = (r.next + stderrLines - 1) % stderrLines
	}
	return r.lines[i]
}

// readLines copies lines from rd into ring and file (which may be nil) and
// logs each at debug until rd fails: EOF once every writer (the child and
// anything it spawned) is gone, or an error once the owner closes the pipe.
// It returns the last line read.
func readLines(rd io.Reader, ring *lineRing, file *logFile, log *slog.Logger) (last string) {
	br := bufio.NewReaderSize(rd, maxStderrLine)
	var line []byte
	for {
		frag, isPrefix, err := br.ReadLine()
		if len(line) < maxStderrLine {
			line = append(line, frag[:min(len(frag), maxStderrLine-len(line))]...)
		}
		if err != nil {
			if len(line) > 0 { // a last line cut short
				last = emit(ring, file, log, line)
			}
			return last
		}
		if isPrefix {
			continue
		}
		last = emit(ring, file, log, line)
		line = line[:0]
	}
}

func emit(ring *lineRing, file *logFile, log *slog.Logger, line []byte) string {
	s := string(line)
	ring.add(s)
	file.line(s)
	log.LogAttrs(context.Background(), slog.LevelDebug, "upstream stderr", slog.String("line", s))
	return s
}
