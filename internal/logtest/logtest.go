// Package logtest collects the output a test reads back: a gateway's log
// or a child process's output, written from goroutines other than the
// test's.
//
// It is test support: only _test.go files import it, never the gateway.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that is safe for concurrent use: writers (a
// slog handler, the goroutines copying a child's stdout and stderr) and the
// test reading it may run at once. The zero Buffer is empty and ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
