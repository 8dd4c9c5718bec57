package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// event is one event as the SDK's reader sees it.
type event struct {
	name, id, data string
}

// readEvents parses a filtered stream the way the SDK's reader does, and
// fails on what would make it fail the session: a line without a colon.
func readEvents(t *testing.T, stream []byte) []event {
	t.Helper()
	var out []event
	var cur event
	var data []string
	flush := func() {
		cur.data = strings.Join(data, "\n")
		if cur != (event{}) || data != nil {
			out = append(out, cur)
		}
		cur, data = event{}, nil
	}
	for line := range bytes.Lines(stream) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			flush()
			continue
		}
		field, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			t.Fatalf("a line without a colon reaches the SDK: %q", line)
		}
		v := string(bytes.TrimSpace(value))
		switch string(field) {
		case "event":
			cur.name = v
		case "id":
			cur.id = v
		case "data":
			data = append(data, v)
		}
	}
	if cur != (event{}) || data != nil {
		flush()
	}
	return out
}

// filterEvents runs stream through an event filter.
func filterEvents(t *testing.T, stream string, limit int, legacy bool, call jsonrpc.ID, bufSize int) []byte {
	t.Helper()
	f := newEventBoundSize(io.NopCloser(strings.NewReader(stream)), limit, legacy, func() jsonrpc.ID { return call },
		newReplyLog(slog.New(slog.DiscardHandler)), bufSize)
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return out
}

// errorOf decodes the data of an event as an error reply: its id and code.
func errorOf(t *testing.T, data string) (any, int64) {
	t.Helper()
	msg, err := jsonrpc.DecodeMessage([]byte(data))
	if err != nil {
		t.Fatalf("event data %q: %v", data, err)
	}
	r, ok := msg.(*jsonrpc.Response)
	var rpc *jsonrpc.Error
	if !ok || !errors.As(r.Error, &rpc) {
		t.Fatalf("event data %q is not an error reply", data)
	}
	return r.ID.Raw(), rpc.Code
}

func TestEventBound(t *testing.T) {
	const limit = 300
	ok := func(id int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, id) }
	msg := func(data string) string { return "event: message\ndata: " + data + "\n\n" }
	bigData := `{"result":{"id":1,"content":[{"type":"text","text":` + big(2000) + `}]},"jsonrpc":"2.0","id":4}`
	type want struct {
		ev   event  // passed as it is
		id   any    // or an error reply to this id
		code int64  // ... with this code
		evID string // ... in an event with this id
	}
	tests := []struct {
		name   string
		stream string
		legacy bool
		call   jsonrpc.ID
		want   []want
	}{
		{name: "valid events pass", stream: msg(ok(1)) + "id: 7\ndata: " + ok(2) + "\n\n",
			want: []want{{ev: event{name: "message", data: ok(1)}}, {ev: event{id: "7", data: ok(2)}}}},
		{name: "CRLF and comments pass", stream: ": keep-alive\r\nevent: message\r\ndata: " + ok(1) + "\r\n\r\n",
			want: []want{{ev: event{name: "message", data: ok(1)}}}},
		{name: "a priming event without data passes", stream: "id: 0\ndata:\n\n" + msg(ok(1)),
			want: []want{{ev: event{id: "0"}}, {ev: event{name: "message", data: ok(1)}}}},
		{name: "events of other names pass", stream: "event: ping\ndata: hello\n\n", want: []want{{ev: event{name: "ping", data: "hello"}}}},
		{name: "data over several lines", stream: "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":{}}\n\n",
			want: []want{{ev: event{data: "{\"jsonrpc\":\"2.0\",\n\"id\":1,\"result\":{}}"}}}},
		{name: "a big reply becomes an error for its id", stream: "id: 9\nevent: message\ndata: " + bigData + "\n\n" + msg(ok(5)),
			want: []want{{id: int64(4), code: codeResultTooLarge, evID: "9"}, {ev: event{name: "message", data: ok(5)}}}},
		{name: "a big reply in many data lines", stream: "data: {\"jsonrpc\":\"2.0\",\"id\":\"s\",\ndata: \"result\":{\"t\":" + big(400) + "}}\n" + strings.Repeat("data: \n", 10) + "\n",
			want: []want{{id: "s", code: codeResultTooLarge}}},
		{name: "a big reply without id falls back to the call", call: mustID(33),
			stream: "data: {\"jsonrpc\":\"2.0\",\"result\":{\"t\":" + big(400) + "}}\n\n",
			want:   []want{{id: int64(33), code: codeResultTooLarge}}},
		{name: "a big reply without id and no call is dropped", stream: "id: 3\ndata: {\"result\":{\"t\":" + big(400) + "}}\n\n" + msg(ok(1)),
			want: []want{{ev: event{id: "3"}}, {ev: event{name: "message", data: ok(1)}}}},
		{name: "a big request of the server is dropped", call: mustID(2),
			stream: "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\",\"params\":{\"t\":" + big(400) + "}}\n\n" + msg(ok(2)),
			want:   []want{{ev: event{name: "message", data: ok(2)}}}},
		{name: "a big event of another name is dropped", stream: "event: ping\ndata: " + big(400) + "\n\n", want: nil},
		{name: "a malformed reply becomes an error for its id", stream: msg(`{"jsonrpc":"2.0","id":6,"result":{"t":"abc`) + msg(ok(1)),
			want: []want{{id: int64(6), code: codeMalformedReply}, {ev: event{name: "message", data: ok(1)}}}},
		{name: "garbage falls back to the call", call: mustID("c"), stream: msg("Internal Server Error"),
			want: []want{{id: "c", code: codeMalformedReply}}},
		{name: "garbage without a call is dropped", stream: msg("Internal Server Error") + msg(ok(1)),
			want: []want{{ev: event{name: "message", data: ok(1)}}}},
		{name: "a line without a colon is dropped", stream: "event: message\nGARBAGE\ndata: " + ok(1) + "\n\n",
			want: []want{{ev: event{name: "message", data: ok(1)}}}},
		{name: "a long line without a colon is dropped", stream: strings.Repeat("G", 1000) + "\n" + msg(ok(1)),
			want: []want{{ev: event{name: "message", data: ok(1)}}}},
		{name: "an event cut by the end of the stream", stream: "data: " + ok(1),
			want: []want{{ev: event{data: ok(1)}}}},
		{name: "legacy: the endpoint event passes", legacy: true, stream: "event: endpoint\ndata: /message?sessionId=1\n\n" + msg(ok(1)),
			want: []want{{ev: event{name: "endpoint", data: "/message?sessionId=1"}}, {ev: event{name: "message", data: ok(1)}}}},
		{name: "legacy: later events are all checked", legacy: true,
			stream: "event: endpoint\ndata: /m\n\nevent: ping\ndata: x\n\nid: 4\n\n" + msg(ok(1)),
			want:   []want{{ev: event{name: "endpoint", data: "/m"}}, {ev: event{name: "message", data: ok(1)}}}},
		{name: "legacy: a big reply becomes an error", legacy: true,
			stream: "event: endpoint\ndata: /m\n\nevent: message\nid: 5\ndata: " + bigData + "\n\n",
			want:   []want{{ev: event{name: "endpoint", data: "/m"}}, {id: int64(4), code: codeResultTooLarge, evID: "5"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, bufSize := range []int{stdioReadBuffer, 16} {
				evs := readEvents(t, filterEvents(t, tt.stream, limit, tt.legacy, tt.call, bufSize))
				if len(evs) != len(tt.want) {
					t.Fatalf("buffer %d: events %+v, want %d", bufSize, evs, len(tt.want))
				}
				for i, w := range tt.want {
					if w.id == nil {
						if evs[i] != w.ev {
							t.Errorf("buffer %d: event %d = %+v, want %+v", bufSize, i, evs[i], w.ev)
						}
						continue
					}
					id, code := errorOf(t, evs[i].data)
					if id != w.id || code != w.code || evs[i].id != w.evID || (evs[i].name != "" && evs[i].name != "message") {
						t.Errorf("buffer %d: event %d = %+v, want an error %d for id %v in event id %q", bufSize, i, evs[i], w.code, w.id, w.evID)
					}
				}
			}
		})
	}
}

// mustID makes an ID of an int or a string.
func mustID(v any) jsonrpc.ID {
	if n, ok := v.(int); ok {
		v = float64(n)
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		panic(err)
	}
	return id
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestBoundTransportJSON(t *testing.T) {
	const limit = 200
	const call = `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"x"}}`
	tests := []struct {
		name     string
		body     string
		length   bool // send Content-Length
		status   int
		want     string // the body as it is, or:
		wantCode int64  // an error reply to the call with this code
		wantSize int64
		atLeast  bool
	}{
		{name: "a valid reply passes", body: `{"jsonrpc":"2.0","id":21,"result":{}}`, want: `{"jsonrpc":"2.0","id":21,"result":{}}`},
		{name: "a big reply, length known", body: `{"jsonrpc":"2.0","id":21,"result":{"t":` + big(1000) + `}}`, length: true,
			wantCode: codeResultTooLarge, wantSize: 1000 + int64(len(`{"jsonrpc":"2.0","id":21,"result":{"t":""}}`))},
		{name: "a big reply, length unknown", body: `{"jsonrpc":"2.0","id":21,"result":{"t":` + big(1000) + `}}`,
			wantCode: codeResultTooLarge, wantSize: 1000 + int64(len(`{"jsonrpc":"2.0","id":21,"result":{"t":""}}`))},
		{name: "a reply over what is drained", body: strings.Repeat(" ", maxDrain+limit+2),
			wantCode: codeResultTooLarge, wantSize: maxDrain + limit + 1, atLeast: true},
		{name: "a malformed reply", body: `{"jsonrpc":"2.0","id":21,"result":`, wantCode: codeMalformedReply, wantSize: 34},
		{name: "a malformed reply naming another call answers the POST's", body: `{"jsonrpc":"2.0","id":5,"result":`,
			wantCode: codeMalformedReply, wantSize: 33},
		{name: "an error status is cut at the limit", status: http.StatusInternalServerError, body: strings.Repeat("e", 1000), want: strings.Repeat("e", limit)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &boundTransport{limit: limit, base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(strings.NewReader(tt.body)), ContentLength: -1, Request: r}
				if tt.status != 0 {
					resp.StatusCode = tt.status
				}
				if tt.length {
					resp.ContentLength = int64(len(tt.body))
				}
				return resp, nil
			})}
			req, err := http.NewRequest(http.MethodPost, "http://upstream/mcp", strings.NewReader(call))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantCode == 0 {
				if string(got) != tt.want {
					t.Errorf("body = %.80q..., want %.80q...", got, tt.want)
				}
				return
			}
			id, code := errorOf(t, string(got))
			if id != int64(21) || code != tt.wantCode {
				t.Fatalf("body = %s, want an error %d for id 21", got, tt.wantCode)
			}
			if tt.wantCode == codeResultTooLarge {
				msg, _ := jsonrpc.DecodeMessage(got)
				tl, ok := tooLarge(msg.(*jsonrpc.Response).Error)
				if !ok || *tl != (ResultTooLargeError{Size: tt.wantSize, Limit: limit, AtLeast: tt.atLeast}) {
					t.Errorf("error = %+v, want size %d at least %v", tl, tt.wantSize, tt.atLeast)
				}
			}
		})
	}
}

// FuzzEventBound feeds arbitrary event streams, read in pieces of
// arbitrary sizes, through the event filter. What comes out must be what
// the SDK's reader takes without failing the session: no line without a
// colon, and every event it decodes a JSON-RPC message, within the limit
// unless it is a replacement reply.
func FuzzEventBound(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), []byte{3, 7}, uint8(0))
	f.Add([]byte("id: 1\ndata: {\"result\":{\"t\":\""+strings.Repeat("y", 300)+"\"},\"jsonrpc\":\"2.0\",\"id\":2}\r\n\r\n: c\n\n"), []byte{1}, uint8(1))
	f.Add([]byte("event: endpoint\ndata: /m\n\nevent: ping\ndata: x\n\nGARBAGE\ndata: {\n\n"), []byte{}, uint8(2))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\ndata:\n\nretry: 10\nid: 3"), []byte{255, 0}, uint8(3))
	f.Fuzz(func(t *testing.T, stream, sizes []byte, knob uint8) {
		limit := 64 + int(knob)*4
		legacy := knob%2 == 1
		call := jsonrpc.ID{}
		if knob%3 == 0 {
			call = mustID(int(knob))
		}
		src := &chunkedReader{data: bytes.Clone(stream), sizes: sizes}
		eb := newEventBoundSize(src, limit, legacy, func() jsonrpc.ID { return call }, nil, 16+int(knob%64))
		out, err := io.ReadAll(eb)
		if err != nil {
			t.Fatalf("filter read: %v", err)
		}
		for i, ev := range readEvents(t, out) {
			decoded := ev.name == "" || ev.name == "message"
			if legacy {
				decoded = i > 0
			}
			if !decoded || (!legacy && ev.data == "") {
				continue
			}
			if !validMessage([]byte(ev.data)) {
				t.Fatalf("event %d %+v is not a message, in %q", i, ev, out)
			}
			if len(ev.data) > limit {
				msg, _ := jsonrpc.DecodeMessage([]byte(ev.data))
				if r, ok := msg.(*jsonrpc.Response); !ok || r.Error == nil {
					t.Fatalf("event %d of %d bytes over the limit %d", i, len(ev.data), limit)
				}
			}
		}
	})
}

// TestValidStreamsPassUnchanged checks that streams of valid messages of
// every size up to the limit come out of the filters byte for byte, read
// in pieces of every size.
func TestValidStreamsPassUnchanged(t *testing.T) {
	const limit = 4096
	var lines, events strings.Builder
	for i, n := range []int{0, 1, 100, 1000, 3000, limit - len(`{"jsonrpc":"2.0","id":0,"result":{"t":""}}`)} {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"t":%s}}`, i%10, big(n))
		lines.WriteString(msg + "\n")
		fmt.Fprintf(&events, "id: %d\nevent: message\ndata: %s\n\n", i, msg)
	}
	for _, sizes := range [][]byte{nil, {0}, {6, 250}, {99}} {
		lf := newLineFilterSize(&chunkedReader{data: []byte(lines.String()), sizes: sizes}, limit, nil, 16)
		if out, err := io.ReadAll(lf); err != nil || string(out) != lines.String() {
			t.Errorf("line filter, pieces %v: output differs (%v)", sizes, err)
		}
		eb := newEventBoundSize(&chunkedReader{data: []byte(events.String()), sizes: sizes}, limit+64, false, func() jsonrpc.ID { return jsonrpc.ID{} }, nil, 16)
		if out, err := io.ReadAll(eb); err != nil || string(out) != events.String() {
			t.Errorf("event filter, pieces %v: output differs (%v)", sizes, err)
		}
	}
}
