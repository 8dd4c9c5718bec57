package upstream

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
)

// chunkedReader returns its data in pieces of the given sizes, so the filter
// sees events split at arbitrary points.
type chunkedReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])%len(c.data) + 1
		c.i++
	}
	n = min(n, len(p))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkedReader) Close() error { return nil }

// FuzzEventFilter feeds arbitrary event streams, split at arbitrary points,
// through the filter that takes progress and log notifications out of an
// upstream's SSE streams. It must never panic, and a stream that carries
// neither kind of notification must come out byte for byte as it went in.
func FuzzEventFilter(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), []byte{3, 7})
	f.Add([]byte("id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"t\",\"progress\":1}}\n\n"), []byte{1})
	f.Add([]byte("data: {\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\r\n\r\n: comment\n\n"), []byte{})
	f.Add([]byte("data: a\ndata: b\n\nretry: 10\n\n"), []byte{0, 255})
	f.Fuzz(func(t *testing.T, stream, sizes []byte) {
		var seq atomic.Uint64
		r := newRouter("fuzz", slog.New(slog.DiscardHandler), nil, &seq, nil)
		ef := &eventFilter{body: &chunkedReader{data: bytes.Clone(stream), sizes: sizes}, r: r, ctx: context.Background()}
		out, err := io.ReadAll(ef)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if !bytes.Contains(stream, []byte(methodProgress)) && !bytes.Contains(stream, []byte(methodLog)) && !bytes.Equal(out, stream) {
			t.Fatalf("stream changed:\n in: %q\nout: %q", stream, out)
		}
		if len(out) > len(stream) {
			t.Fatalf("filter added bytes: %d > %d", len(out), len(stream))
		}
	})
}
