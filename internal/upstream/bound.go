package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Upstream replies are bounded per message, not per connection.
//
// The SDK's readers bound a message too (a stdio line, a server-sent event),
// but a message over their bound, or one they cannot decode, ends the whole
// connection: every call in flight on the server fails, and a stdio server
// is restarted. So every message from an upstream passes a filter first, on
// its way from the pipe or the HTTP body to the SDK. A message within
// max_result_bytes that is a JSON-RPC message goes through untouched.
// Anything else is read to its end without being kept, and either replaced
// by a JSON-RPC error reply to the request it answers (found by its
// top-level "id"), which fails that call alone, or dropped and logged when
// it answers no request of ours. The SDK's own bounds are turned off: the
// filter's output is bounded already.

// The JSON-RPC error codes of the replies the filter puts in place of the
// ones it cannot pass on, from the range JSON-RPC leaves to implementations.
// Data carries replyErrorData, which tells them from an upstream's own
// errors that happen to use the same code.
const (
	codeResultTooLarge = -32050
	codeMalformedReply = -32051
)

// replyErrorData is the data of a replacement reply.
type replyErrorData struct {
	Reason  string `json:"switchboard"` // reasonTooLarge or reasonMalformed
	Size    int64  `json:"size"`
	Limit   int64  `json:"limit,omitempty"`
	AtLeast bool   `json:"at_least,omitempty"`
}

const (
	reasonTooLarge  = "result_too_large"
	reasonMalformed = "malformed_reply"
)

// ResultTooLargeError is a reply larger than the server's max_result_bytes.
// Only the call it answered failed: the connection and the other calls on
// it went on.
type ResultTooLargeError struct {
	Size  int64 // bytes of the reply
	Limit int64 // the server's max_result_bytes
	// AtLeast: the reply was not read to its end; it is larger than Size.
	AtLeast bool
}

func (e *ResultTooLargeError) Error() string {
	of := "of"
	if e.AtLeast {
		of = "of more than"
	}
	return fmt.Sprintf("result too large: upstream reply %s %d bytes exceeds max_result_bytes (%d)", of, e.Size, e.Limit)
}

// tooLarge recovers the ResultTooLargeError of a replacement reply from the
// error the SDK returned for it.
func tooLarge(err error) (*ResultTooLargeError, bool) {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code != codeResultTooLarge {
		return nil, false
	}
	var d replyErrorData
	if json.Unmarshal(rpc.Data, &d) != nil || d.Reason != reasonTooLarge {
		return nil, false
	}
	return &ResultTooLargeError{Size: d.Size, Limit: d.Limit, AtLeast: d.AtLeast}, true
}

// IsResultTooLarge reports whether err is a reply over max_result_bytes: a
// failure of the one call, which says nothing of the server's health.
func IsResultTooLarge(err error) bool {
	var e *ResultTooLargeError
	if errors.As(err, &e) {
		return true
	}
	_, ok := tooLarge(err)
	return ok
}

// errorReply is the wire form of a JSON-RPC error reply to id.
func errorReply(id jsonrpc.ID, code int64, msg string, data replyErrorData) []byte {
	d, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("upstream: encoding reply error data: %v", err)) // plain struct: cannot fail
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg, Data: d}})
	if err != nil {
		panic(fmt.Sprintf("upstream: encoding a reply error: %v", err)) // valid id and error: cannot fail
	}
	return b
}

// tooLargeReply replaces a reply of size bytes (at least, if atLeast) over limit.
func tooLargeReply(id jsonrpc.ID, size, limit int64, atLeast bool) []byte {
	e := ResultTooLargeError{Size: size, Limit: limit, AtLeast: atLeast}
	return errorReply(id, codeResultTooLarge, e.Error(), replyErrorData{Reason: reasonTooLarge, Size: size, Limit: limit, AtLeast: atLeast})
}

// malformedReply replaces a reply of size bytes that is not JSON-RPC.
func malformedReply(id jsonrpc.ID, size int64) []byte {
	msg := fmt.Sprintf("malformed reply: the upstream's answer (%d bytes) is not a valid JSON-RPC message", size)
	return errorReply(id, codeMalformedReply, msg, replyErrorData{Reason: reasonMalformed, Size: size})
}

// validMessage reports whether b is what the SDK's readers accept as a
// message: one JSON-RPC message or a non-empty batch of them. It decodes
// with the SDK's own decoder, so that the two cannot disagree. A batch
// holding a request is refused: the SDK fails the connection on one whose
// id repeats one still pending, and no server of the protocol versions
// that allow batches sends its requests in one.
func validMessage(b []byte) bool {
	if len(b) > 0 && b[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(b, &batch) != nil || len(batch) == 0 {
			return false
		}
		for _, raw := range batch {
			msg, err := jsonrpc.DecodeMessage(raw)
			if err != nil {
				return false
			}
			if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
				return false
			}
		}
		return true
	}
	_, err := jsonrpc.DecodeMessage(b)
	return err == nil
}

// Bounds of what the scanner keeps of a message.
const (
	maxScanKey = 64  // a top-level key, raw; longer ones are none of ours
	maxScanID  = 256 // the raw id value; a longer id is taken for none
)

// replyScanner reads a message a piece at a time and finds what decides
// its fate when it cannot be passed on: its top-level "id", and whether it
// is a request or notification (a top-level "method") rather than a reply.
// It keeps a few hundred bytes whatever the message's size. On input that
// is not JSON it learns less, never more: an "id" nested in a result, or
// one after the top-level object ended, is never taken.
type replyScanner struct {
	started bool // saw the first byte of the value
	done    bool // the top-level object ended, or the value is not one
	depth   int
	inStr   bool
	esc     bool

	wantKey bool   // at depth 1, the next string is a key
	inKey   bool   // reading a top-level key
	key     []byte // the key being read, raw
	keyLong bool
	member  string // the top-level key whose value comes next
	atValue bool   // between the ':' of member and its value

	idOn   bool   // reading the value of "id"
	idStr  bool   // ... which is a string
	idBuf  []byte // ... raw
	idLong bool
	id     []byte // the last complete top-level id, raw; nil = none

	method bool // a top-level "method": a request or notification
}

// feed scans the next piece of the message.
func (s *replyScanner) feed(p []byte) {
	for i := 0; i < len(p) && !s.done; i++ {
		if s.inStr {
			capture := s.inKey || s.idOn
			if !capture {
				// The bulk of a large message is string contents:
				// skip to what can end the string.
				if s.esc {
					s.esc = false
					continue
				}
				j := bytes.IndexAny(p[i:], `"\`)
				if j < 0 {
					return
				}
				i += j
			}
			c := p[i]
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
				switch {
				case s.inKey:
					s.endKey()
				case s.idOn:
					s.idBuf = keep(s.idBuf, c, maxScanID, &s.idLong)
					s.endID()
				}
				continue
			}
			switch {
			case s.inKey:
				s.key = keep(s.key, c, maxScanKey, &s.keyLong)
			case s.idOn:
				s.idBuf = keep(s.idBuf, c, maxScanID, &s.idLong)
			}
			continue
		}
		c := p[i]
		if s.depth >= 2 {
			// Nested values: only the brackets and strings matter.
			j := bytes.IndexAny(p[i:], `"{}[]`)
			if j < 0 {
				return
			}
			i += j
			c = p[i]
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			if s.idOn {
				s.endID()
			}
		case '"':
			if !s.started {
				s.started, s.done = true, true // not an object
				return
			}
			s.inStr = true
			if s.depth == 1 {
				switch {
				case s.wantKey:
					s.wantKey, s.inKey = false, true
					s.key, s.keyLong = s.key[:0], false
				case s.atValue && s.member == "id":
					s.idOn, s.idStr, s.idLong = true, true, false
					s.idBuf = append(s.idBuf[:0], c)
				}
			}
			s.atValue = false
		case '{', '[':
			if !s.started {
				s.started = true
				if c != '{' {
					s.done = true // a batch: its ids are not at the top level
					return
				}
				s.depth, s.wantKey = 1, true
				continue
			}
			if s.idOn {
				s.endID()
			}
			s.depth++
			s.atValue = false
		case '}', ']':
			if s.idOn {
				s.endID()
			}
			s.depth--
			if s.depth <= 0 {
				s.done = true
			}
			s.atValue = false
		case ':':
			if s.depth == 1 {
				s.atValue = true
			}
		case ',':
			if s.depth == 1 {
				if s.idOn {
					s.endID()
				}
				s.wantKey, s.member, s.atValue = true, "", false
			}
		default:
			if !s.started {
				s.started, s.done = true, true // not an object
				return
			}
			switch {
			case s.idOn:
				s.idBuf = keep(s.idBuf, c, maxScanID, &s.idLong)
			case s.depth == 1 && s.atValue && s.member == "id":
				s.idOn, s.idStr, s.idLong = true, false, false
				s.idBuf = append(s.idBuf[:0], c)
			}
			s.atValue = false
		}
	}
}

// keep appends c to b unless b is full, which it records in long.
func keep(b []byte, c byte, max int, long *bool) []byte {
	if len(b) >= max {
		*long = true
		return b
	}
	return append(b, c)
}

func (s *replyScanner) endKey() {
	s.inKey = false
	s.member = ""
	if s.keyLong {
		return
	}
	k := string(s.key)
	if bytes.IndexByte(s.key, '\\') >= 0 {
		// An escaped key ("\u0069d") means what the decoder makes of it.
		var dec string
		if json.Unmarshal([]byte(`"`+k+`"`), &dec) != nil {
			return
		}
		k = dec
	}
	s.member = k
	if k == "method" {
		s.method = true
	}
}

// endID records the id value just read; the last one wins, as in the
// SDK's decoder.
func (s *replyScanner) endID() {
	s.idOn = false
	if s.idLong {
		s.id = nil
		return
	}
	s.id = append(s.id[:0], s.idBuf...)
}

// result says what the scan found: the message's id (invalid if none),
// and whether it is a request or notification from the server.
func (s *replyScanner) result() (id jsonrpc.ID, request bool) {
	if len(s.id) == 0 {
		return jsonrpc.ID{}, s.method
	}
	var v any
	if json.Unmarshal(s.id, &v) != nil {
		return jsonrpc.ID{}, s.method
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return jsonrpc.ID{}, s.method
	}
	return id, s.method
}

// scanAll scans a whole message.
func scanAll(b []byte) *replyScanner {
	s := new(replyScanner)
	s.feed(b)
	return s
}

// replyLogInterval spaces the warnings about replaced and dropped messages
// of one server, so that a server printing garbage in a loop cannot flood
// the log.
const replyLogInterval = 10 * time.Second

// logPrefix is how much of a dropped message a warning shows.
const logPrefix = 48

// replyLog logs what the filters of one server replace and drop: at most
// one warning per replyLogInterval, which counts the ones it held back.
type replyLog struct {
	log *slog.Logger

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newReplyLog(log *slog.Logger) *replyLog { return &replyLog{log: log} }

// warn logs msg with attrs, unless another warning was logged less than
// replyLogInterval ago.
func (l *replyLog) warn(msg string, attrs ...slog.Attr) {
	if l == nil {
		return
	}
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < replyLogInterval {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.last = now
	if l.suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed_since_last", l.suppressed))
		l.suppressed = 0
	}
	l.mu.Unlock()
	l.log.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
}

// prefix is the start of a message, which is all a log may show of it: a
// few dozen bytes, valid UTF-8 (the log handler quotes what needs it).
func prefix(b []byte) string {
	if len(b) > logPrefix {
		return strings.ToValidUTF8(string(b[:logPrefix]), "?") + "..."
	}
	return strings.ToValidUTF8(string(b), "?")
}

// verdict is what becomes of a message that cannot be passed on.
type verdict struct {
	reply []byte // the replacement reply; nil = dropped
	what  string // for the log
}

// judge decides the fate of a message the filter cannot pass on, from
// what sc found in it. fallback, if valid, is the id of the request the
// message answers when the transport says so (an HTTP response to a POST).
func judge(sc *replyScanner, fallback jsonrpc.ID, size, limit int64, atLeast, over bool) verdict {
	id, request := sc.result()
	switch {
	case request:
		// A request or notification of the server's: there is no call of
		// ours to fail.
		if over {
			return verdict{what: "upstream message over max_result_bytes dropped"}
		}
		return verdict{what: "malformed upstream message dropped"}
	case !id.IsValid() && !fallback.IsValid():
		if over {
			return verdict{what: "upstream message over max_result_bytes dropped: it names no request"}
		}
		return verdict{what: "upstream output that is not JSON-RPC dropped"}
	}
	if !id.IsValid() {
		id = fallback
	}
	if over {
		return verdict{reply: tooLargeReply(id, size, limit, atLeast), what: "upstream reply over max_result_bytes failed its call"}
	}
	return verdict{reply: malformedReply(id, size), what: "malformed upstream reply failed its call"}
}

// stdioReadBuffer is the read buffer of the stdio filter: the piece of a
// long line it handles at a time.
const stdioReadBuffer = 64 << 10

// lineFilter is the filter of a stdio server's stdout (newline-delimited
// JSON-RPC). It keeps one line of at most limit bytes.
type lineFilter struct {
	src   io.ReadCloser
	rd    *bufio.Reader
	limit int
	log   *replyLog

	line    []byte // the line being read, while within the limit
	rep     []byte // a replacement reply
	pending        // out: a line of line, or rep
}

// pending is what a filter has ready for Read: one message's output at a
// time, and the error of its source once that is spent.
type pending struct {
	out []byte // what Read returns next
	off int
	err error // from the source; returned once out is empty
}

// read copies what is pending into p, having f fill it (f.next) whenever
// it is empty, until f records an error.
func (q *pending) read(p []byte, f interface{ next() }) (int, error) {
	for q.off == len(q.out) {
		if q.err != nil {
			return 0, q.err
		}
		f.next()
	}
	n := copy(p, q.out[q.off:])
	q.off += n
	return n, nil
}

// newLineFilter filters src, a stdio server's stdout, bounding each
// message to limit bytes. Closing it closes src.
func newLineFilter(src io.ReadCloser, limit int, log *replyLog) *lineFilter {
	return newLineFilterSize(src, limit, log, stdioReadBuffer)
}

// newLineFilterSize is newLineFilter with a read buffer of size bytes: tests
// use a small one to see long lines in many pieces.
func newLineFilterSize(src io.ReadCloser, limit int, log *replyLog, size int) *lineFilter {
	return &lineFilter{src: src, rd: bufio.NewReaderSize(src, size), limit: limit, log: log}
}

func (f *lineFilter) Close() error { return f.src.Close() }

func (f *lineFilter) Read(p []byte) (int, error) { return f.read(p, f) }

// next reads one line into f.out, filtered (possibly to nothing), or
// records the read error.
func (f *lineFilter) next() {
	f.out, f.off = nil, 0
	f.line = f.line[:0]
	var sc *replyScanner // set once the line is over the limit
	var head []byte      // its first bytes, for the log
	var size int64       // bytes of the line, its end included
	var frag []byte
	for {
		var err error
		frag, err = f.rd.ReadSlice('\n')
		size += int64(len(frag))
		if sc == nil && len(f.line)+len(frag) > f.limit+2 { // +2: a "\r\n" is not the message
			sc = new(replyScanner)
			sc.feed(f.line)
			head = append(head, f.line[:min(len(f.line), logPrefix)]...)
			if len(head) < logPrefix {
				head = append(head, frag[:min(len(frag), logPrefix-len(head))]...)
			}
			f.line = release(f.line)
		}
		if sc != nil {
			sc.feed(frag)
		} else {
			f.line = appendGrow(f.line, frag, f.limit+2)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			f.err = err
			if !errors.Is(err, io.EOF) {
				// The pipe broke: the session ends with it, and a
				// part of a line has nothing left to answer.
				return
			}
		}
		break
	}
	if sc != nil {
		switch {
		case bytes.HasSuffix(frag, []byte("\r\n")):
			size -= 2
		case bytes.HasSuffix(frag, []byte("\n")):
			size--
		}
		f.reject(sc, size, true, head)
		return
	}
	msg := bytes.TrimSpace(f.line)
	switch {
	case len(msg) == 0:
	case len(msg) > f.limit:
		f.reject(scanAll(msg), int64(len(msg)), true, msg)
	case json.Valid(msg) && validMessage(msg):
		// json.Valid as well: the SDK reads with encoding/json before it
		// decodes with its own decoder. The line is returned from where it
		// was read, its end made a plain newline.
		if end := len(msg); cap(msg) > end {
			msg = msg[:end+1]
			msg[end] = '\n'
		} else {
			msg = append(msg, '\n') // a last line without one, at capacity
		}
		f.out = msg
	default:
		f.reject(scanAll(msg), int64(len(msg)), false, msg)
	}
	f.line = release(f.line)
}

// reject replaces or drops a line that cannot be passed on.
func (f *lineFilter) reject(sc *replyScanner, size int64, over bool, head []byte) {
	v := judge(sc, jsonrpc.ID{}, size, int64(f.limit), false, over)
	if v.reply != nil {
		f.rep = append(append(f.rep[:0], v.reply...), '\n')
		f.out = f.rep
	}
	f.log.warn(v.what, slog.Int64("bytes", size), slog.Int("max_result_bytes", f.limit), slog.String("start", prefix(head)))
}

// keptBuffer is the largest line buffer kept between messages; a larger
// one, left by a large reply, is given back to the garbage collector.
const keptBuffer = 1 << 20

// appendGrow is append(b, p...) for a buffer that may grow to limit bytes
// (and one piece more): it doubles the capacity, where append grows a large
// slice by a quarter and would allocate five times a large message on the
// way.
func appendGrow(b, p []byte, limit int) []byte {
	if need := len(b) + len(p); need > cap(b) {
		c := min(max(2*cap(b), need, 4096), limit+len(p))
		nb := make([]byte, len(b), c)
		copy(nb, b)
		b = nb
	}
	return append(b, p...)
}

func release(b []byte) []byte {
	if cap(b) > keptBuffer {
		return nil
	}
	return b[:0]
}
