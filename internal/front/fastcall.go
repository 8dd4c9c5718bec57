package front

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path for tools/call (issue 18).
//
// A tools/call of the stateless revision (2026-07-28) costs the go-sdk's
// Streamable HTTP server a temporary session and about nine decodes of
// the request (the envelope, _meta twice, the params, the name, four
// _meta values by marshal-and-decode, and the tool's whole input schema,
// re-marshalled on every call to look for x-mcp-header annotations); every
// decode allocates a fresh 32 KiB buffer (segmentio/encoding's
// minBufferSize), which is a large object, zeroed at each allocation.
// Profiles of the bench harness put that at a quarter of the gateway's
// CPU. A request that can produce nothing but its answer (no progress
// token, no log level, nothing the SDK must negotiate) is served here
// instead: one decode, the same handler chain the SDK would run, and a
// plain JSON answer instead of an SSE stream (the request cannot produce
// notifications, so there is nothing to stream).
//
// The fast path only takes requests it can answer exactly as the SDK
// would (fastCallEquivalence in the tests compares both, answer for
// answer); anything else, valid or not, goes on to the SDK untouched,
// which keeps the protocol's error answers the SDK's own.

// fastMeta are the _meta keys a fast-path request may carry besides the
// ones the gateway itself reads ([invoke.MetaPrefix]) and trace context:
// the per-request triple of the stateless revision.
const (
	metaClientCaps = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo = "io.modelcontextprotocol/clientInfo"
	metaLogLevel   = "io.modelcontextprotocol/logLevel"
	metaServerInfo = "io.modelcontextprotocol/serverInfo"
)

// fastRequest is a JSON-RPC request as the fast path reads it.
type fastRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// fastBodies recycles request body buffers: a call's body is read once
// and dropped when its answer is written.
var fastBodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// fastToolCall serves r when it is a tools/call the fast path can answer
// exactly as the SDK would, and reports whether it did. When it does not,
// r goes on to the SDK with its body intact.
func (f *Front) fastToolCall(w http.ResponseWriter, r *http.Request, maxBody int64) bool {
	if f.noFastPath || r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "tools/call" {
		return false
	}
	version := r.Header.Get(protocolVersionHeader)
	name := r.Header.Get("Mcp-Name")
	if name == "" || len(r.Header.Values("Last-Event-ID")) > 0 || !slices.Contains(ProtocolVersions, version) {
		return false
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return false
	}
	buf := fastBodies.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 64<<10 { // a huge body's buffer is not kept
			fastBodies.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBody)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "failed to read body", http.StatusBadRequest)
		}
		return true
	}
	body := buf.Bytes()
	req, id, ok := f.fastParse(body, version, name)
	if !ok {
		// The SDK reads the body again: give it a copy, since buf goes
		// back to the pool when this returns.
		r.Body = io.NopCloser(bytes.NewReader(bytes.Clone(body)))
		return false
	}
	req.Extra = &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header}
	var h mcp.MethodHandler = f.fastDispatch
	if f.tracer != nil {
		h = f.traceMiddleware(h)
	}
	ctx := r.Context()
	if caps, ok := metaCapabilities(body); ok {
		ctx = context.WithValue(ctx, fastCapsKey{}, caps)
	}
	res, err := h(ctx, "tools/call", req)
	var result json.RawMessage
	if err == nil {
		ctr, _ := res.(*mcp.CallToolResult) // nil encodes as null, as the SDK's would
		result, err = fastResult(ctr, f.impl)
	}
	out, encErr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: result, Error: err})
	if encErr != nil {
		// A result the SDK could not have encoded either: say so, as it
		// would (an internal error in the JSON-RPC answer).
		f.logger.Error("encoding a tools/call answer", "tool", name, "error", encErr)
		out, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id,
			Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "encoding the result: " + encErr.Error()}})
	}
	f.fastServed.Add(1)
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(errorStatus(err))
	_, _ = w.Write(out)
	return true
}

// errorStatus is the HTTP status of an answer carrying err under the
// stateless revision, which gives some JSON-RPC errors a status of their
// own (SEP-2575; the SDK's extractErrorStatus).
func errorStatus(err error) int {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		return http.StatusOK
	}
	switch rpcErr.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, codeUnsupportedProtocolVersion, codeMissingClientCapabilities:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// JSON-RPC codes of the stateless revision that the SDK keeps unexported.
const (
	codeMissingClientCapabilities  = -32021
	codeUnsupportedProtocolVersion = -32022
)

// fastParse decodes body into the request the SDK would hand the tool
// handler, when it is a tools/call the fast path takes: a single call with
// an integer or string id, whose name matches the Mcp-Name header, whose
// _meta carries the stateless triple for version and asks for neither
// progress nor logs, of a tool the SDK serves under that name without
// x-mcp-header parameters, and that starts a call (no requestState, no
// inputResponses: a retry goes through the SDK).
func (f *Front) fastParse(body []byte, version, name string) (*mcp.CallToolRequest, jsonrpc.ID, bool) {
	var none jsonrpc.ID
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return nil, none, false // a batch, or not JSON: the SDK answers
	}
	var msg fastRequest
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" || msg.Method != "tools/call" {
		return nil, none, false
	}
	id, ok := fastID(msg.ID)
	if !ok {
		return nil, none, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg.Params, &params) != nil || params == nil {
		return nil, none, false
	}
	p := &mcp.CallToolParamsRaw{}
	for k, v := range params {
		switch k {
		case "name":
			if json.Unmarshal(v, &p.Name) != nil {
				return nil, none, false
			}
		case "arguments":
			p.Arguments = v
		case "_meta":
			if json.Unmarshal(v, &p.Meta) != nil || p.Meta == nil {
				return nil, none, false
			}
		default:
			// requestState, inputResponses, task, or a key this path
			// does not know: the SDK decides what it means.
			return nil, none, false
		}
	}
	if p.Name != name || !fastMetaOK(p.Meta, version) || !f.fastTool(name) {
		return nil, none, false
	}
	return &mcp.CallToolRequest{Params: p}, id, true
}

// fastID converts a request id the way the SDK does, for the ids whose
// conversion is exact: strings and integers. A fractional or huge number,
// null or an absent id goes to the SDK.
func fastID(raw json.RawMessage) (jsonrpc.ID, bool) {
	var none jsonrpc.ID
	if len(raw) == 0 {
		return none, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return none, false
		}
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return none, false
	}
	i, err := n.Int64()
	if err != nil || i > 1<<53 || i < -(1<<53) {
		return none, false // the SDK reads ids as float64
	}
	id, err := jsonrpc.MakeID(float64(i))
	return id, err == nil
}

// fastCapsKey carries the client capabilities the fast path decoded, so
// that [Front.park] need not have the SDK decode them once more.
type fastCapsKey struct{}

// metaCapabilities decodes the client capabilities of a request's _meta as
// the SDK's ServerRequest.ClientCapabilities does (the stateless
// revision's roots replace the legacy roots field).
func metaCapabilities(body []byte) (*mcp.ClientCapabilities, bool) {
	var msg struct {
		Params struct {
			Meta struct {
				Caps *struct {
					mcp.ClientCapabilities
					Roots *mcp.RootCapabilities `json:"roots,omitempty"`
				} `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Params.Meta.Caps == nil {
		return nil, false
	}
	c := msg.Params.Meta.Caps
	caps := c.ClientCapabilities
	caps.RootsV2 = c.Roots
	if caps.RootsV2 != nil {
		caps.Roots = *caps.RootsV2
	}
	return &caps, true
}

// fastMetaOK reports whether a request's _meta is one the fast path
// serves: the protocol version equal to the header's, client capabilities
// an object, client info absent or an object, and no progress token or
// log level (the answer could then not be the only message).
func fastMetaOK(meta mcp.Meta, version string) bool {
	if v, _ := meta[metaProtocolKey].(string); v != version {
		return false
	}
	if _, ok := meta[metaClientCaps].(map[string]any); !ok {
		return false
	}
	if ci, present := meta[metaClientInfo]; present {
		if _, ok := ci.(map[string]any); !ok {
			return false
		}
	}
	if _, ok := meta["progressToken"]; ok {
		return false
	}
	if _, ok := meta[metaLogLevel]; ok {
		return false
	}
	return true
}

// fastTool reports whether name is a tool the SDK serves under that name
// with nothing it would check in the HTTP headers: an available tool of
// the registered snapshot, not a meta-tool, without x-mcp-header
// parameters.
func (f *Front) fastTool(name string) bool {
	if f.isMeta(name) {
		return false
	}
	t, known := f.lookup(name)
	if !known || !t.Available || (t.Name != name && f.scope == "") {
		return false
	}
	f.fastMu.RLock()
	defer f.fastMu.RUnlock()
	return !f.headerTools[name]
}

// fastDispatch is what the SDK's handler chain does with a tools/call of
// a registered, available tool (routeMiddleware, then the registered
// handler, then the server's result checks), for a caller of the
// stateless revision.
func (f *Front) fastDispatch(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
	ctr := req.(*mcp.CallToolRequest)
	res, err := f.serveStateless(ctx, ctr, "tools/call", ctr.Params.Name, nil, "",
		func(ctx context.Context, up string, answers mcp.InputResponseMap) (mcp.Result, error) {
			return f.forwardCall(ctx, ctr, up, answers)
		},
		func(asks mcp.InputRequestMap, state string) mcp.Result {
			return &mcp.CallToolResult{Content: []mcp.Content{}, InputRequests: asks, RequestState: state}
		})
	if err != nil {
		return nil, err
	}
	return res.(*mcp.CallToolResult), nil
}

// fastResult encodes res as the SDK's server does for a caller of the
// stateless revision (mcp.Server.callTool, handleMultiRoundTripResult and
// annotateServerInfo): resultType says whether input is required, content
// is never null, and _meta names the server unless it names one already.
// res itself is left as it is: results may be shared by idempotent
// replays.
func fastResult(res *mcp.CallToolResult, impl *mcp.Implementation) (json.RawMessage, error) {
	if res == nil {
		return json.RawMessage("null"), nil
	}
	asks := res.InputRequests != nil
	if asks && (len(res.Content) > 0 || res.StructuredContent != nil) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: "server bug: result has both content and inputRequests"}
	}
	// plain has the result's fields without its MarshalJSON, which writes
	// the unexported resultType this package cannot set.
	type plain mcp.CallToolResult
	w := struct {
		plain
		ResultType    string          `json:"resultType,omitempty"`
		InputRequests json.RawMessage `json:"inputRequests,omitempty"` // as mcp.CallToolResult.MarshalJSON
	}{plain: plain(*res), ResultType: "complete"}
	if _, named := res.Meta[metaServerInfo]; !named && impl != nil {
		w.Meta = make(mcp.Meta, len(res.Meta)+1)
		maps.Copy(w.Meta, res.Meta)
		w.Meta[metaServerInfo] = impl
	}
	if asks {
		w.ResultType = "input_required"
		ir, err := json.Marshal(res.InputRequests)
		if err != nil {
			return nil, err
		}
		w.InputRequests = ir
	} else if w.Content == nil {
		w.Content = []mcp.Content{}
	}
	return json.Marshal(w)
}

// hasHeaderParams reports whether a tool's input schema may carry
// x-mcp-header annotations, which the SDK checks against the request's
// headers: such tools always go through the SDK. Any mention of the
// keyword counts; a false positive only costs the fast path.
func hasHeaderParams(t *mcp.Tool) bool {
	if t == nil || t.InputSchema == nil {
		return false
	}
	b, err := json.Marshal(t.InputSchema)
	return err != nil || strings.Contains(string(b), "x-mcp-header")
}
