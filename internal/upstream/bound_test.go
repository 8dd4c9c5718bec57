package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// big is a JSON string literal of n bytes of text, quotes excluded.
func big(n int) string { return `"` + strings.Repeat("x", n) + `"` }

func TestReplyScanner(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		id      any // int64, string or nil (none)
		request bool
	}{
		{"id before result", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, int64(7), false},
		{"id after result (TypeScript SDK order)", `{"result":{"content":[{"type":"text","text":"a"}]},"jsonrpc":"2.0","id":12}`, int64(12), false},
		{"string id", `{"jsonrpc":"2.0","id":"abc-1","result":{}}`, "abc-1", false},
		{"string id with escapes", `{"id":"a\"b\\c\u0041","result":{}}`, "a\"b\\cA", false},
		{"nested ids are not taken", `{"result":{"id":99,"content":[{"id":98}],"x":{"id":"no"}},"jsonrpc":"2.0","id":3}`, int64(3), false},
		{"only nested ids", `{"jsonrpc":"2.0","result":{"id":99,"items":[{"id":98}]}}`, nil, false},
		{"an id inside a string is not taken", `{"jsonrpc":"2.0","result":{"text":"\"id\":5,"},"id":6}`, int64(6), false},
		{"key that only looks like id", `{"idx":4,"xid":5,"result":{}}`, nil, false},
		{"escaped key", `{"\u0069d":8,"result":{}}`, int64(8), false},
		{"the last id wins", `{"id":1,"result":{},"id":2}`, int64(2), false},
		{"id after the object ended", `{"result":{}} {"id":4}`, nil, false},
		{"whitespace everywhere", " {\n \"id\" :\t 21 ,\r\n\"result\":{ } } ", int64(21), false},
		{"float id", `{"id":3.0,"result":{}}`, int64(3), false},
		{"null id", `{"id":null,"error":{"code":-32700,"message":"parse error"}}`, nil, false},
		{"object id", `{"id":{"a":1},"result":{}}`, nil, false},
		{"request", `{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{}}`, int64(5), true},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":1}}`, nil, true},
		{"truncated reply", `{"jsonrpc":"2.0","id":44,"result":{"content":[{"type":"text","text":"abc`, int64(44), false},
		{"garbage", `Traceback (most recent call last): id 5`, nil, false},
		{"a quoted string", `"id"`, nil, false},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"result":{}}]`, nil, false},
		{"empty", ``, nil, false},
		{"too long an id", `{"id":"` + strings.Repeat("a", maxScanID) + `","result":{}}`, nil, false},
		{"too long a key", `{"` + strings.Repeat("k", maxScanKey+1) + `":1,"id":9}`, int64(9), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// In one piece, and a byte at a time.
			for _, pieces := range [][]string{{tt.in}, strings.Split(tt.in, "")} {
				var s replyScanner
				for _, p := range pieces {
					s.feed([]byte(p))
				}
				id, request := s.result()
				if id.Raw() != tt.id || request != tt.request {
					t.Errorf("in %d pieces: result() = %v (%T), %v; want %v (%T), %v", len(pieces), id.Raw(), id.Raw(), request, tt.id, tt.id, tt.request)
				}
			}
		})
	}
}

// replyOf decodes a line of filter output as a response.
func replyOf(t *testing.T, line string) *jsonrpc.Response {
	t.Helper()
	msg, err := jsonrpc.DecodeMessage([]byte(line))
	if err != nil {
		t.Fatalf("output line %q: %v", line, err)
	}
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		t.Fatalf("output line %q is a %T, want a response", line, msg)
	}
	return r
}

// filterLines runs input through a line filter (limit bytes, a read buffer
// of bufSize) and returns its output lines.
func filterLines(t *testing.T, input string, limit, bufSize int, logs io.Writer) []string {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	f := newLineFilterSize(io.NopCloser(strings.NewReader(input)), limit, newReplyLog(slog.New(slog.NewTextHandler(logs, nil))), bufSize)
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(out) == 0 {
		return nil
	}
	if out[len(out)-1] != '\n' {
		t.Fatalf("output does not end with a newline: %q", out)
	}
	return strings.Split(string(out[:len(out)-1]), "\n")
}

func TestLineFilter(t *testing.T) {
	const limit = 200
	ok := func(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, id) }
	type want struct {
		pass string // the line, passed as it is
		id   any    // or a replacement reply for this id
		code int64  // ... with this code
	}
	tests := []struct {
		name  string
		input string
		want  []want
	}{
		{"valid lines pass", ok(1) + "\n" + ok(2) + "\n", []want{{pass: ok(1)}, {pass: ok(2)}}},
		{"CRLF and blank lines", ok(1) + "\r\n\r\n  \n" + ok(2) + "\r\n", []want{{pass: ok(1)}, {pass: ok(2)}}},
		{"a last line without newline", ok(1) + "\n" + ok(2), []want{{pass: ok(1)}, {pass: ok(2)}}},
		{"surrounding whitespace is trimmed", "  " + ok(1) + " \t\n", []want{{pass: ok(1)}}},
		{"big reply, id first", `{"jsonrpc":"2.0","id":3,"result":{"text":` + big(500) + "}}\n" + ok(4) + "\n",
			[]want{{id: int64(3), code: codeResultTooLarge}, {pass: ok(4)}}},
		{"big reply, id last", `{"result":{"content":[{"type":"text","text":` + big(500) + `}]},"jsonrpc":"2.0","id":5}` + "\n" + ok(6) + "\n",
			[]want{{id: int64(5), code: codeResultTooLarge}, {pass: ok(6)}}},
		{"big reply with nested ids", `{"result":{"id":1,"items":[{"id":2,"t":` + big(500) + `}]},"jsonrpc":"2.0","id":"s-7"}` + "\n",
			[]want{{id: "s-7", code: codeResultTooLarge}}},
		{"big reply with CRLF", `{"jsonrpc":"2.0","id":8,"result":{"text":` + big(500) + "}}\r\n" + ok(9) + "\r\n",
			[]want{{id: int64(8), code: codeResultTooLarge}, {pass: ok(9)}}},
		{"big error reply", `{"jsonrpc":"2.0","id":10,"error":{"code":1,"message":` + big(500) + "}}\n",
			[]want{{id: int64(10), code: codeResultTooLarge}}},
		{"big reply without id is dropped", `{"jsonrpc":"2.0","result":{"id":1,"text":` + big(500) + "}}\n" + ok(2) + "\n",
			[]want{{pass: ok(2)}}},
		{"big request of the server is dropped", `{"jsonrpc":"2.0","id":11,"method":"sampling/createMessage","params":{"t":` + big(500) + "}}\n" + ok(2) + "\n",
			[]want{{pass: ok(2)}}},
		{"big garbage is dropped", strings.Repeat("noise ", 100) + "\n" + ok(2) + "\n", []want{{pass: ok(2)}}},
		{"garbage without id is dropped", "Listening on port 3000\n" + ok(2) + "\n", []want{{pass: ok(2)}}},
		{"garbage with an id fails its call", `{"jsonrpc":"2.0","id":12,"result":{"text":"abc` + "\n" + ok(2) + "\n",
			[]want{{id: int64(12), code: codeMalformedReply}, {pass: ok(2)}}},
		{"JSON that is not JSON-RPC, with an id", `{"id":13,"result":{}}` + "\n", []want{{id: int64(13), code: codeMalformedReply}}},
		{"JSON that is not JSON-RPC, without id", `{"hello":"world"}` + "\n" + `[1,2]` + "\n" + `42` + "\n", nil},
		{"two messages on a line: the first answered", ok(1) + ok(2) + "\n", []want{{id: int64(1), code: codeMalformedReply}}},
		{"an empty batch", "[]\n", nil},
		{"a batch of replies passes", "[" + ok(1) + "," + ok(2) + "]\n", []want{{pass: "[" + ok(1) + "," + ok(2) + "]"}}},
		{"a batch with a request is dropped", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\n", nil},
		{"a malformed notification is dropped", `{"jsonrpc":"2.0","method":"notifications/progress","params":{` + "\n", nil},
		{"a line of exactly the limit passes",
			`{"jsonrpc":"2.0","id":1,"result":{"t":` + big(limit-len(`{"jsonrpc":"2.0","id":1,"result":{"t":""}}`)) + "}}\n",
			[]want{{pass: `{"jsonrpc":"2.0","id":1,"result":{"t":` + big(limit-len(`{"jsonrpc":"2.0","id":1,"result":{"t":""}}`)) + "}}"}}},
		{"a line of one byte more does not",
			`{"jsonrpc":"2.0","id":1,"result":{"t":` + big(limit+1-len(`{"jsonrpc":"2.0","id":1,"result":{"t":""}}`)) + "}}\n",
			[]want{{id: int64(1), code: codeResultTooLarge}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, bufSize := range []int{16, stdioReadBuffer} {
				lines := filterLines(t, tt.input, limit, bufSize, nil)
				if len(lines) != len(tt.want) {
					t.Fatalf("buffer %d: output %q, want %d lines", bufSize, lines, len(tt.want))
				}
				for i, w := range tt.want {
					if w.pass != "" {
						if lines[i] != w.pass {
							t.Errorf("buffer %d: line %d = %q, want %q", bufSize, i, lines[i], w.pass)
						}
						continue
					}
					r := replyOf(t, lines[i])
					var rpc *jsonrpc.Error
					if r.ID.Raw() != w.id || !errors.As(r.Error, &rpc) || rpc.Code != w.code {
						t.Errorf("buffer %d: line %d = %s, want an error %d for id %v", bufSize, i, lines[i], w.code, w.id)
					}
				}
			}
		})
	}
}

func TestLineFilterTooLargeError(t *testing.T) {
	const limit = 1000
	line := `{"jsonrpc":"2.0","id":1,"result":{"text":` + big(5000) + "}}"
	lines := filterLines(t, line+"\r\n", limit, 16, nil)
	if len(lines) != 1 {
		t.Fatalf("output %q, want one line", lines)
	}
	err := replyOf(t, lines[0]).Error
	tl, ok := tooLarge(err)
	if !ok {
		t.Fatalf("tooLarge(%v) = false", err)
	}
	if want := (ResultTooLargeError{Size: int64(len(line)), Limit: limit}); *tl != want {
		t.Errorf("error = %+v, want %+v", *tl, want)
	}
	want := fmt.Sprintf("result too large: upstream reply of %d bytes exceeds max_result_bytes (1000)", len(line))
	if err.Error() != want || tl.Error() != want {
		t.Errorf("message = %q / %q, want %q", err.Error(), tl.Error(), want)
	}
	if !IsResultTooLarge(err) || !IsResultTooLarge(fmt.Errorf("wrapped: %w", tl)) {
		t.Error("IsResultTooLarge is false")
	}
	// An upstream's own error with the same code is not taken for ours.
	if IsResultTooLarge(&jsonrpc.Error{Code: codeResultTooLarge, Message: "mine"}) {
		t.Error("an upstream error with the code but not the data is taken for result_too_large")
	}
}

func TestLineFilterLogs(t *testing.T) {
	var logs bytes.Buffer
	secret := "sk-" + strings.Repeat("9", 100)
	input := "debug: token=" + secret + "\n" + "second garbage line\n"
	if lines := filterLines(t, input, 200, 16, &logs); lines != nil {
		t.Fatalf("output %q, want nothing", lines)
	}
	got := logs.String()
	if strings.Count(got, "level=WARN") != 1 {
		t.Errorf("want one warning (the second held back), got:\n%s", got)
	}
	if strings.Contains(got, secret) || !strings.Contains(got, "debug: token=") {
		t.Errorf("the warning should show a short start of the line only:\n%s", got)
	}
}

// readAllMessages reads everything the SDK's own stdio connection makes of
// r, and returns the messages and the error that ended the reading.
func readAllMessages(r io.Reader) ([]jsonrpc.Message, error) {
	conn, err := (&mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{}, MaxLineLength: -1}).Connect(context.Background())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var msgs []jsonrpc.Message
	for {
		msg, err := conn.Read(context.Background())
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, msg)
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// FuzzReplyFilter feeds arbitrary stdout through the stdio filter, read in
// pieces of arbitrary sizes, then through the SDK's own stdio connection.
// Whatever a server writes, the connection must read to the end without an
// error (an error would end the session and every call on it), and each
// message must fit the limit unless it is a replacement reply.
func FuzzReplyFilter(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"), []byte{3}, uint8(0))
	f.Add([]byte(`{"result":{"id":2,"t":"`+strings.Repeat("y", 300)+`"},"jsonrpc":"2.0","id":3}`+"\r\n"), []byte{1, 7}, uint8(1))
	f.Add([]byte("garbage\n{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"t\":\"x\n[]\n[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]\n"), []byte{}, uint8(2))
	f.Add([]byte(`{"jsonrpc":"2.0","id":5,"method":"ping"}`+"\n"+`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`), []byte{255}, uint8(3))
	f.Fuzz(func(t *testing.T, stdout, sizes []byte, knob uint8) {
		limit := 64 + int(knob)*4
		src := &chunkedReader{data: bytes.Clone(stdout), sizes: sizes}
		lf := newLineFilterSize(src, limit, nil, 16+int(knob%64))
		out, err := io.ReadAll(lf)
		if err != nil {
			t.Fatalf("filter read: %v", err)
		}
		for line := range bytes.Lines(out) {
			line = bytes.TrimSuffix(line, []byte{'\n'})
			if !json.Valid(line) || !validMessage(line) {
				t.Fatalf("output line is not a message: %q", line)
			}
			if len(line) > limit {
				var r *jsonrpc.Response
				if msg, _ := jsonrpc.DecodeMessage(line); msg != nil {
					r, _ = msg.(*jsonrpc.Response)
				}
				if r == nil || r.Error == nil {
					t.Fatalf("output line of %d bytes over the limit %d: %q", len(line), limit, line)
				}
			}
		}
		if _, err := readAllMessages(bytes.NewReader(out)); !errors.Is(err, io.EOF) {
			t.Fatalf("the SDK connection ended with %v, want EOF, on %q", err, out)
		}
	})
}

// BenchmarkLineFilter measures what the stdio filter costs per byte of
// messages: the copy into its line buffer and the validation with the
// decoders the SDK uses (the SDK then decodes the message again). A reply
// over the limit is only scanned.
func BenchmarkLineFilter(b *testing.B) {
	for _, bc := range []struct {
		name  string
		size  int // of a message's text
		count int // messages in the stream
	}{
		{"1KiB", 1 << 10, 1000},
		{"1MiB", 1 << 20, 1},
		{"12MiB", 12 << 20, 1},
		{"20MiB over the limit", 20 << 20, 1},
	} {
		line := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + big(bc.size) + `}]}}` + "\n"
		stream := []byte(strings.Repeat(line, bc.count))
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				f := newLineFilter(io.NopCloser(bytes.NewReader(stream)), 16<<20, nil)
				if _, err := io.Copy(io.Discard, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
