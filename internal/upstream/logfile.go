package upstream

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Rotation of the stderr log files: a file is rotated once it would grow
// past logFileMax bytes, and logFileKeep files are kept (<server>.log,
// <server>.log.1, <server>.log.2), so a server's logs never take more than
// about 30 MiB.
const (
	logFileMax  = 10 << 20
	logFileKeep = 3
)

// logFile appends a stdio server's stderr, one timestamped line at a time,
// to <dir>/<server>.log, rotating it by size. It outlives sessions, like the
// in-memory ring. It is opened on the first write; a failure (a full disk, a
// directory that cannot be created) is logged once per streak of failures
// and never blocks the child: the lines stay in the in-memory ring. Safe for
// concurrent use.
type logFile struct {
	path string
	max  int64 // rotate before the file grows past this
	log  *slog.Logger

	mu     sync.Mutex
	f      *os.File
	size   int64
	broken bool // the last open or write failed: warned already
	closed bool
}

// newLogFile returns the log file of server in dir, or nil when dir is "".
func newLogFile(dir, server string, log *slog.Logger) *logFile {
	if dir == "" {
		return nil
	}
	return &logFile{path: filepath.Join(dir, server+".log"), max: logFileMax, log: log}
}

// line appends one line. A nil logFile discards it.
func (l *logFile) line(s string) {
	if l == nil {
		return
	}
	b := make([]byte, 0, len(s)+32)
	b = time.Now().UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00 ")
	b = append(b, s...)
	b = append(b, '\n')

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.f != nil && l.size > 0 && l.size+int64(len(b)) > l.max {
		l.rotate()
	}
	if l.f == nil && !l.open() {
		return
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	if err != nil {
		l.fail("writing", err)
		return
	}
	l.broken = false
}

// marker records a lifecycle event (start, exit) among the lines.
func (l *logFile) marker(format string, args ...any) {
	l.line("--- switchboard: " + fmt.Sprintf(format, args...))
}

func (l *logFile) open() bool {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o750); err != nil {
		l.fail("creating directory for", err)
		return false
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		l.fail("opening", err)
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		l.fail("opening", err)
		return false
	}
	l.f, l.size = f, fi.Size()
	return true
}

// rotate shifts <path>.N to <path>.N+1, dropping the oldest, and starts a
// new file on the next write.
func (l *logFile) rotate() {
	l.f.Close()
	l.f = nil
	for i := logFileKeep - 1; i > 0; i-- {
		from := l.path
		if i > 1 {
			from = fmt.Sprintf("%s.%d", l.path, i-1)
		}
		if err := os.Rename(from, fmt.Sprintf("%s.%d", l.path, i)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.fail("rotating", err)
		}
	}
}

func (l *logFile) fail(what string, err error) {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	if !l.broken {
		l.broken = true
		l.log.Warn("upstream stderr log file: "+what+" failed; lines are kept in memory only", "path", l.path, "error", err)
	}
}

// Close closes the file; later lines are dropped.
func (l *logFile) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
