package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress and log notifications are relayed as they are read off the
// upstream connection, not by the SDK's notification handlers: the SDK's
// reader hands notifications to a handler goroutine, and the response that
// follows them on the wire may overtake them. The call would then be over
// (its progress token unregistered, its peer no longer attributable) before
// its last notifications are handled, and the downstream client would get
// them after the result, when it no longer listens. Read in order, they reach
// the peer before the call returns.
//
// A stdio connection is wrapped (relayConn). The streamable HTTP connection
// cannot be, because the SDK relies on its unexported methods, so for sse and
// http the event streams are filtered on their way from net/http to the SDK
// (eventTransport).

const (
	methodProgress = "notifications/progress"
	methodLog      = "notifications/message"
)

// deliver relays a progress or log notification, and reports whether it
// took it. Anything else, or a notification it cannot decode, is left to
// the SDK.
func (r *router) deliver(ctx context.Context, method string, params json.RawMessage) bool {
	switch method {
	case methodProgress:
		var p mcp.ProgressNotificationParams
		if err := json.Unmarshal(params, &p); err != nil {
			return false
		}
		r.progressTo(ctx, &p)
		return true
	case methodLog:
		var p mcp.LoggingMessageParams
		if err := json.Unmarshal(params, &p); err != nil {
			return false
		}
		r.logTo(ctx, &p)
		return true
	}
	return false
}

// relayConn is a connection whose progress and log notifications are
// relayed as they are read.
type relayConn struct {
	mcp.Connection
	r *router
}

// wrap is a lifetimeTransport.wrap for stdio connections.
func (r *router) wrap(c mcp.Connection) mcp.Connection { return &relayConn{Connection: c, r: r} }

func (c *relayConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && c.r.deliver(ctx, req.Method, req.Params) {
			continue
		}
		return msg, nil
	}
}

// eventTransport filters the server-sent event streams of an sse/http
// session through r.
type eventTransport struct {
	base     http.RoundTripper
	r        *router
	maxEvent int // the longest event held back to parse; 0 = maxFilteredEvent
}

func (t *eventTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		// A call's stream reads with the call's context, which attributes
		// its log messages exactly.
		resp.Body = &eventFilter{body: resp.Body, r: t.r, ctx: req.Context(), max: t.maxEvent}
	}
	return resp, nil
}

// maxFilteredEvent bounds an event the filter holds back to parse, by
// default; eventTransport.maxEvent follows the bound on messages. A longer
// event ends the filtering: the rest of the stream goes to the SDK as it is.
const maxFilteredEvent = mcp.DefaultMaxEventSize

// maxEventOverhead is what the lines of an event may add to its message:
// field names, an id, a retry delay.
const maxEventOverhead = 64 << 10

// eventFilter passes an event stream through, taking out the progress and log
// notifications, which it relays itself when it reaches them. An event ID
// stays, as an event without data, so that a resumed stream does not
// replay what was relayed.
type eventFilter struct {
	body io.ReadCloser
	r    *router
	ctx  context.Context

	chunk []byte
	in    []byte // read, not yet a complete event
	out   []byte // filtered; out[off:] is still to be returned
	off   int
	err   error // from body; returned once in and out are empty
	raw   bool  // no more filtering
	max   int   // the longest event held back; 0 = maxFilteredEvent
}

func (f *eventFilter) Close() error { return f.body.Close() }

func (f *eventFilter) Read(p []byte) (int, error) {
	for f.off == len(f.out) {
		f.out, f.off = f.out[:0], 0
		if f.err != nil {
			if len(f.in) == 0 {
				return 0, f.err
			}
			f.out, f.in = append(f.out, f.in...), f.in[:0] // an unterminated last event, as it is
			break
		}
		if f.chunk == nil {
			f.chunk = make([]byte, 32<<10)
		}
		n, err := f.body.Read(f.chunk)
		f.in = append(f.in, f.chunk[:n]...)
		f.err = err
		f.split()
	}
	n := copy(p, f.out[f.off:])
	f.off += n
	return n, nil
}

// split moves the complete events of f.in, filtered, to f.out.
func (f *eventFilter) split() {
	done := 0
	for !f.raw {
		end := eventEnd(f.in[done:])
		if end < 0 {
			limit := f.max
			if limit <= 0 {
				limit = maxFilteredEvent
			}
			f.raw = len(f.in)-done > limit
			break
		}
		f.out = append(f.out, f.filter(f.in[done:done+end])...)
		done += end
	}
	if f.raw {
		done, f.out = len(f.in), append(f.out, f.in[done:]...)
	}
	f.in = f.in[:copy(f.in, f.in[done:])]
}

// eventEnd is the length of the first complete event in b (up to and
// including the empty line that ends it), or -1. Lines end with "\n", an
// optional "\r" before it ignored, as in the SDK's reader.
func eventEnd(b []byte) int {
	start := 0
	for {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			return -1
		}
		line := bytes.TrimRight(b[start:start+i], "\r")
		start += i + 1
		if len(line) == 0 {
			return start
		}
	}
}

// filter returns ev as it is, or, if it is a progress or log notification,
// relays it and returns what is left of it: its ID.
func (f *eventFilter) filter(ev []byte) []byte {
	if !bytes.Contains(ev, []byte(methodProgress)) && !bytes.Contains(ev, []byte(methodLog)) {
		return ev // the common case, without parsing
	}
	var name, id string
	var data []byte
	for line := range bytes.Lines(ev) {
		line = bytes.TrimRight(line, "\r\n")
		field, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch string(field) {
		case "event":
			name = string(value)
		case "id":
			id = string(value)
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
	if name != "" && name != "message" {
		return ev
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &msg) != nil || msg.ID != nil || !f.r.deliver(f.ctx, msg.Method, msg.Params) {
		return ev
	}
	if id == "" {
		return nil
	}
	return []byte("id: " + id + "\n\n")
}
