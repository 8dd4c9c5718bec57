package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The HTTP transports of the SDK read a call's reply from the body of its
// POST (one JSON message, or a stream of server-sent events) and the
// server's own messages from event streams (the hanging GET of Streamable
// HTTP, the one stream of the legacy SSE transport). A read or decode error
// in any of them fails the whole session, so boundTransport filters the
// bodies before the SDK reads them, as the stdio filter does a pipe:
//   - a JSON body over the limit or not JSON-RPC becomes an error reply to
//     the POST's request;
//   - an event over the limit or not JSON-RPC becomes an event carrying an
//     error reply to the request it answers (its "id", or else the POST's
//     request), or is dropped (keeping its event id, for resumption);
//   - the body of an error status is cut at the limit: the SDK only looks
//     into it for a JSON-RPC error.

// boundTransport bounds each message in the responses of an sse/http
// upstream to limit bytes.
type boundTransport struct {
	base  http.RoundTripper
	limit int
	// legacy: the 2024-11-05 SSE transport, whose client decodes every
	// event after the first ("endpoint") as a message, whatever its name.
	legacy bool
	log    *replyLog
}

func (t *boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Header.Get("Mcp-Method") == "" && req.Header.Get("Mcp-Protocol-Version") == "" {
		// A session's first request (initialize) carries no protocol
		// version yet, and the SDK adds the standard headers of SEP-2243
		// only to requests of the new revision: name the method anyway,
		// as a 2026-07-28 server or a load balancer routing on it expects.
		if m := requestMethod(req); m != "" {
			req = req.Clone(req.Context())
			req.Header.Set("Mcp-Method", m)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body = &cutBody{Reader: io.LimitReader(resp.Body, int64(t.limit)), c: resp.Body}
		return resp, nil
	}
	call := func() jsonrpc.ID { return requestID(req) }
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); {
	case mt == "text/event-stream":
		resp.Body = newEventBound(resp.Body, t.limit, t.legacy, call, t.log)
	case mt == "application/json" && req.Method == http.MethodPost:
		resp.Body = &jsonBound{body: resp.Body, length: resp.ContentLength, limit: t.limit, call: call, log: t.log}
	}
	return resp, nil
}

// cutBody is a body read only up to a limit.
type cutBody struct {
	io.Reader
	c io.Closer
}

func (b *cutBody) Close() error { return b.c.Close() }

// requestID is the id of the JSON-RPC call req posts, or an invalid ID.
// It reads a copy of the body (the SDK's requests can make one).
func requestID(req *http.Request) jsonrpc.ID {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return jsonrpc.ID{}
	}
	rc, err := req.GetBody()
	if err != nil {
		return jsonrpc.ID{}
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return jsonrpc.ID{}
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return jsonrpc.ID{}
	}
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
		return r.ID
	}
	return jsonrpc.ID{}
}

// requestMethod is the method of a POST's lone JSON-RPC message, "" if
// there is none.
func requestMethod(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	rc, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return ""
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return ""
	}
	if r, ok := msg.(*jsonrpc.Request); ok {
		return r.Method
	}
	return ""
}

// maxDrain bounds what is read of a body over the limit only to learn its
// size; the rest is cut off by closing it.
const maxDrain = 64 << 20

// jsonBound is a JSON reply body (the answer to one POSTed call), bounded.
type jsonBound struct {
	body   io.ReadCloser
	length int64 // Content-Length; -1 if unknown
	limit  int
	call   func() jsonrpc.ID
	log    *replyLog
	rd     io.Reader // set by the first Read
}

func (b *jsonBound) Close() error { return b.body.Close() }

func (b *jsonBound) Read(p []byte) (int, error) {
	if b.rd == nil {
		b.rd = b.load()
	}
	return b.rd.Read(p)
}

// load reads the body, and returns it or its replacement.
func (b *jsonBound) load() io.Reader {
	limit := int64(b.limit)
	var body []byte
	size, over, atLeast := b.length, b.length > limit, false
	if !over {
		var err error
		body, err = readUpTo(b.body, limit+1, b.length)
		if err != nil {
			return &errReader{err: err} // as without the filter: the exchange failed
		}
		size = int64(len(body))
		if over = size > limit; over {
			n, err := io.Copy(io.Discard, io.LimitReader(b.body, maxDrain))
			size += n
			atLeast = err != nil || n == maxDrain
		}
	}
	if !over && validMessage(body) {
		return bytes.NewReader(body)
	}
	// The body is the reply to the POST's call, whatever it holds: the
	// replacement answers that call, not an id found in the body.
	v := judge(new(replyScanner), b.call(), size, limit, atLeast, over)
	b.log.warn(v.what, slog.Int64("bytes", size), slog.Int("max_result_bytes", b.limit), slog.String("start", prefix(body)))
	if v.reply == nil {
		return bytes.NewReader(body) // no call to answer: as without the filter
	}
	return bytes.NewReader(v.reply)
}

// readUpTo reads r to its end or to n bytes, into a buffer of the
// announced length if there is one (-1 if not), else one that doubles.
func readUpTo(r io.Reader, n, length int64) ([]byte, error) {
	size := int64(512)
	if length >= 0 {
		size = min(length+1, n) // +1: to see the end without growing
	}
	buf := make([]byte, 0, size)
	lr := io.LimitReader(r, n)
	for {
		if len(buf) == cap(buf) && int64(len(buf)) < n {
			nb := make([]byte, len(buf), min(max(2*int64(cap(buf)), 512), n))
			copy(nb, buf)
			buf = nb
		}
		m, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

// maxEventField bounds what an event filter keeps of an over-limit
// event's fields other than data: their values are short (an event name,
// an id, a retry delay).
const maxEventField = 1 << 10

// eventBound is an event stream, each event bounded. Events within the
// limit are passed as they are; it holds back one event at a time.
type eventBound struct {
	body   io.ReadCloser
	rd     *bufio.Reader
	limit  int
	legacy bool
	first  bool // no event passed yet (legacy: the next is the "endpoint" event)
	call   func() jsonrpc.ID
	log    *replyLog

	// The event being read.
	ev        []byte     // its raw lines, while within the limit
	over      *overEvent // set once it is over the limit
	size      int64      // its bytes so far
	lineStart int        // where the current line starts in ev
	inLine    bool       // in the middle of a line longer than the read buffer
	field     string     // the current line's field name
	skip      bool       // the current line is left out

	rep     []byte // an event the filter wrote: a replacement, or an id
	pending        // out: the event in ev, or rep
}

func newEventBound(body io.ReadCloser, limit int, legacy bool, call func() jsonrpc.ID, log *replyLog) *eventBound {
	return newEventBoundSize(body, limit, legacy, call, log, stdioReadBuffer)
}

// newEventBoundSize is newEventBound with a read buffer of size bytes:
// tests use a small one to see long lines in many pieces.
func newEventBoundSize(body io.ReadCloser, limit int, legacy bool, call func() jsonrpc.ID, log *replyLog, size int) *eventBound {
	return &eventBound{body: body, rd: bufio.NewReaderSize(body, size), limit: limit, legacy: legacy, first: true, call: call, log: log}
}

func (f *eventBound) Close() error { return f.body.Close() }

func (f *eventBound) Read(p []byte) (int, error) { return f.read(p, f) }

// next reads up to the end of one event and puts it, filtered, into
// f.out, or records the read error.
func (f *eventBound) next() {
	f.out, f.off = nil, 0
	f.ev = f.ev[:0] // out, which may have been ev, is spent
	for {
		frag, err := f.rd.ReadSlice('\n')
		partial := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !partial {
			f.err = err
		}
		if len(frag) > 0 {
			first := !f.inLine
			f.inLine = partial
			if f.piece(frag, first, !partial) {
				f.finish()
				return
			}
		}
		if f.err != nil {
			// At EOF the SDK takes what it read of an event as an event;
			// after an error it drops it, and so does the filter.
			if errors.Is(f.err, io.EOF) && (len(f.ev) > 0 || f.over != nil) {
				f.finish()
			}
			return
		}
	}
}

// piece takes the next piece of a line (all of it, unless the line is
// longer than the read buffer); first and last say where in the line it
// is. It reports whether the piece is the empty line that ends an event.
func (f *eventBound) piece(frag []byte, first, last bool) bool {
	if first {
		line := bytes.TrimRight(frag, "\r\n")
		if last && len(line) == 0 {
			return true
		}
		name, _, ok := bytes.Cut(line, []byte{':'})
		f.skip = !ok
		if !ok {
			// A line without a colon stops the SDK's reader; one whose
			// name fills the read buffer is none the SDK knows.
			f.log.warn("malformed line of an upstream event stream dropped", slog.String("start", prefix(line)))
			return false
		}
		f.field = string(name)
		f.lineStart = len(f.ev)
	}
	if f.skip {
		return false
	}
	f.size += int64(len(frag))
	switch {
	case f.over != nil:
		f.over.piece(f.field, frag, first)
	case len(f.ev)+len(frag) <= f.limit:
		f.ev = appendGrow(f.ev, frag, f.limit)
	default:
		// Over the limit: keep what decides the event's fate, not the event.
		o := &overEvent{}
		for line := range bytes.Lines(f.ev[:f.lineStart]) {
			name, _, _ := bytes.Cut(line, []byte{':'})
			o.piece(string(name), line, true)
		}
		if cur := f.ev[f.lineStart:]; len(cur) > 0 {
			o.piece(f.field, cur, true)
			o.piece(f.field, frag, false)
		} else {
			o.piece(f.field, frag, true)
		}
		f.over = o
		f.ev = release(f.ev)
	}
	return false
}

// overEvent is what is kept of an event over the limit: its short fields,
// and a scan of its data.
type overEvent struct {
	name, id, retry []byte
	sc              replyScanner
	data            bool // the current line is data
}

// piece takes a piece of a line of the event, field its field name; with
// first, the piece starts with the field name and a colon.
func (o *overEvent) piece(field string, frag []byte, first bool) {
	value := frag
	if first {
		_, value, _ = bytes.Cut(frag, []byte{':'})
		o.data = field == "data"
		if !o.data {
			v := bytes.TrimSpace(value)
			if len(v) > maxEventField || !bytes.HasSuffix(frag, []byte{'\n'}) {
				v = nil // too long to be meant, and never kept whole
			}
			switch field {
			case "event":
				o.name = bytes.Clone(v)
			case "id":
				o.id = bytes.Clone(v)
			case "retry":
				o.retry = bytes.Clone(v)
			}
		}
	}
	if o.data {
		// Lines of data are joined with newlines, and whitespace
		// around a JSON value means nothing: the raw line will do.
		o.sc.feed(value)
	}
}

// finish puts the event read into f.out: as it is, replaced, or only its
// id (dropped; the id keeps a resumed stream from replaying it).
func (f *eventBound) finish() {
	defer func() {
		f.over, f.size, f.inLine, f.skip = nil, 0, false, false
		if cap(f.ev) > keptBuffer {
			f.ev = nil // out may hold it until it is read
		}
	}()
	if o := f.over; o != nil {
		v := verdict{what: "upstream event over max_result_bytes dropped"}
		if name := string(o.name); f.legacy || name == "" || name == "message" {
			v = judge(&o.sc, f.call(), f.size, int64(f.limit), false, true)
		}
		f.log.warn(v.what, slog.Int64("bytes", f.size), slog.Int("max_result_bytes", f.limit))
		f.put(v.reply, o.id, o.retry)
		return
	}
	if len(f.ev) == 0 {
		return
	}
	name, id, retry, data := parseEvent(f.ev)
	var pass bool
	switch {
	case f.legacy:
		// The legacy client reads the first event as the endpoint, and
		// decodes every later one as a message, whatever its name.
		pass = f.first || validMessage(data)
	case string(name) != "" && string(name) != "message", len(data) == 0:
		pass = true // the SDK skips it (keeping its id)
	default:
		pass = validMessage(data)
	}
	if pass {
		// Returned from where it was read, with the empty line that ends it.
		f.ev = append(f.ev, '\n')
		f.out = f.ev
		f.first = false
		return
	}
	v := verdict{what: "upstream event without a message dropped"}
	if len(data) > 0 {
		v = judge(scanAll(data), f.call(), int64(len(data)), int64(f.limit), false, false)
	}
	f.log.warn(v.what, slog.Int("bytes", len(data)), slog.String("start", prefix(data)))
	f.put(v.reply, id, retry)
}

// put writes an event carrying reply, or only the id if reply is nil.
func (f *eventBound) put(reply, id, retry []byte) {
	if reply == nil && (f.legacy || len(id) == 0) {
		return // the legacy client would decode an event without data
	}
	b := f.rep[:0]
	if len(id) > 0 {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	if len(retry) > 0 {
		b = append(append(append(b, "retry: "...), retry...), '\n')
	}
	if reply != nil {
		b = append(append(append(b, "data: "...), reply...), '\n')
		f.first = false
	}
	f.rep = append(b, '\n')
	f.out = f.rep
}

// parseEvent reads the fields of an event's lines as the SDK does: data
// lines trimmed and joined with newlines. The values are ev's own bytes,
// but for the data of several lines, which is joined in a new buffer.
func parseEvent(ev []byte) (name, id, retry, data []byte) {
	lines := 0
	for line := range bytes.Lines(ev) {
		field, value, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte{':'})
		value = bytes.TrimSpace(value)
		switch string(field) {
		case "event":
			name = value
		case "id":
			id = value
		case "retry":
			retry = value
		case "data":
			switch lines++; lines {
			case 1:
				data = value
			case 2:
				data = append(bytes.Clone(data), '\n')
				fallthrough
			default:
				if lines > 2 {
					data = append(data, '\n')
				}
				data = append(data, value...)
			}
		}
	}
	return name, id, retry, data
}
