package front

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// forwardedHeader marks a request one replica passed to another, so that it
// is never passed on again.
const forwardedHeader = "Switchboard-Forwarded-By"

// forwardParked passes a stateless caller's retry to the replica its call is
// parked on, when requestState says it is another one: replicas need no
// sticky routing. It reports whether it answered the request. A request it
// does not forward goes on to the SDK with its body intact; one it cannot
// forward is refused there with the state error.
func (f *Front) forwardParked(w http.ResponseWriter, r *http.Request, maxBody int64) bool {
	if f.replicaAddr == nil || r.Method != http.MethodPost || r.Header.Get(forwardedHeader) != "" {
		return false
	}
	switch r.Header.Get("Mcp-Method") {
	case "tools/call", "prompts/get", "resources/read":
	default:
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		}
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Params struct {
			RequestState string `json:"requestState"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Params.RequestState == "" {
		return false
	}
	st, ok := f.mrtr.peek(msg.Params.RequestState)
	if !ok || st.Kind != statePark || st.Replica == "" || st.Replica == f.mrtr.replica {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	base, err := f.replicaAddr(ctx, st.Replica)
	cancel()
	if err != nil {
		f.logger.Warn("cannot pass a retry to the replica its call is parked on", "replica", st.Replica, "error", err)
		return false
	}
	target, err := url.Parse(base)
	if err != nil || target.Host == "" {
		f.logger.Warn("replica address unusable", "replica", st.Replica, "address", base)
		return false
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = r.URL.Path
			pr.Out.URL.RawPath = r.URL.RawPath
			pr.Out.Host = target.Host
			// This replica checked the browser headers; the other one
			// checks Host against its own address.
			pr.Out.Header.Del("Origin")
			pr.Out.Header.Set(forwardedHeader, f.mrtr.replica)
			pr.Out.Body = io.NopCloser(bytes.NewReader(body))
			pr.Out.ContentLength = int64(len(body))
		},
		FlushInterval: -1, // an SSE response streams through as it comes
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			f.logger.Warn("passing a retry to another replica", "replica", st.Replica, "error", err)
			http.Error(w, "the replica holding this call cannot be reached", http.StatusBadGateway)
		},
	}
	f.logger.Debug("retry passed to the replica holding its call", "replica", st.Replica)
	proxy.ServeHTTP(w, r)
	return true
}
