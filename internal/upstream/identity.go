package upstream

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// IdentityHeader returns the header, and its value, that tells a server
// who the caller of a request is (package propagate signs or obtains it).
// id is the zero Identity for the gateway's own requests; a value of ""
// sends no header.
type IdentityHeader func(ctx context.Context, id authz.Identity) (header, value string, err error)

// identityTransport adds the caller's identity header to each request for
// the server's own host. The caller is the authz.Identity in the request's
// context: the go-sdk's Streamable HTTP transport sends each message of a
// call as a POST with the call's context, so the header follows the caller
// even on a session shared by many. Requests without a caller (the
// gateway's own initialize, lists and pings, the event stream) get what
// assert gives the zero Identity. A header of that name set by anyone
// else is removed first, so a server can trust it to be the gateway's.
type identityTransport struct {
	base   http.RoundTripper
	host   string
	header string // canonical
	assert IdentityHeader
}

func (t *identityTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.EqualFold(req.URL.Host, t.host) {
		return t.base.RoundTrip(req)
	}
	id, _ := authz.IdentityFrom(req.Context())
	name, value, err := t.assert(req.Context(), id)
	if err != nil {
		// Not sent: the server must not see this caller's call as
		// the gateway's own.
		return nil, fmt.Errorf("propagating the caller's identity: %w", err)
	}
	if _, present := req.Header[t.header]; !present && value == "" {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not modify the caller's request
	req.Header.Del(t.header)
	if value != "" {
		req.Header.Set(name, value)
	}
	return t.base.RoundTrip(req)
}
