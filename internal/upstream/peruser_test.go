package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

type subjectKey struct{}

// tokenServer serves the basic fake server to requests whose bearer token
// is "<who>-token" for a known who, and records, per who, the MCP methods
// and HTTP requests it saw.
type tokenServer struct {
	url string

	mu   sync.Mutex
	seen []string // "who HTTP-method MCP-method"
}

func serveTokens(t *testing.T, who ...string) *tokenServer {
	t.Helper()
	ts := &tokenServer{}
	srv := newBasicServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	known := map[string]bool{}
	for _, w := range who {
		known["Bearer "+w+"-token"] = true
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if !known[auth] {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var msg struct{ Method string }
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			_ = json.Unmarshal(body, &msg)
		}
		ts.mu.Lock()
		ts.seen = append(ts.seen, strings.TrimSuffix(strings.TrimPrefix(auth, "Bearer "), "-token")+" "+r.Method+" "+msg.Method)
		ts.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	ts.url = s.URL
	return ts
}

func (ts *tokenServer) count(line string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, s := range ts.seen {
		if s == line {
			n++
		}
	}
	return n
}

// TestPerUserSessions: on a credentials: per_user server every call goes
// on a session of its caller's, opened with the caller's credential
// (Options.UserCredential) and pooled per caller; the server's own session
// goes as Options.DiscoveryCredential; a caller without a credential gets
// the UserAuthRequiredError as it is, and the server stays CONNECTED;
// an idle session closes, and the next call opens another;
// DropUserSessions closes a caller's at once.
func TestPerUserSessions(t *testing.T) {
	// Served before the manager starts, so closed after it.
	up, quickUp := serveTokens(t, "admin", "alice", "bob"), serveTokens(t, "admin", "alice")
	rec := newRecorder()
	m := newManager(t, rec, nil, &upstream.Options{
		UserCredential: func(ctx context.Context, srv *config.Server) (upstream.UserCredential, error) {
			who, _ := ctx.Value(subjectKey{}).(string)
			if who == "" || who == "carol" {
				return upstream.UserCredential{Subject: who}, &upstream.UserAuthRequiredError{Server: srv.Name, Subject: who, Reason: "link one"}
			}
			return upstream.UserCredential{Subject: who, Headers: map[string]string{"Authorization": "Bearer " + who + "-token"}}, nil
		},
		DiscoveryCredential: func(context.Context, *config.Server) (upstream.UserCredential, error) {
			return upstream.UserCredential{Subject: "admin", Headers: map[string]string{"Authorization": "Bearer admin-token"}}, nil
		},
	})
	// crm keeps idle sessions for an hour (pooling is seen whatever the
	// machine's speed); quick closes them at once.
	for name, c := range map[string]struct {
		url  string
		idle time.Duration
	}{"crm": {up.url, time.Hour}, "quick": {quickUp.url, time.Millisecond}} {
		srv := &config.Server{Name: name, Transport: config.TransportHTTP, URL: c.url, Credentials: config.CredentialsPerUser,
			UserSessionIdle: config.Seconds(c.idle)}
		if err := m.Add(srv); err != nil {
			t.Fatal(err)
		}
		if err := m.Connect(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	callOn := func(server, who string) error {
		ctx := context.WithValue(t.Context(), subjectKey{}, who)
		_, err := m.CallTool(ctx, server, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
		return err
	}
	call := func(who string) error { return callOn("crm", who) }
	for range 3 {
		for _, who := range []string{"alice", "bob"} {
			if err := call(who); err != nil {
				t.Fatalf("%s: %v", who, err)
			}
		}
	}
	for _, who := range []string{"alice", "bob"} {
		if n := up.count(who + " POST tools/call"); n != 3 {
			t.Errorf("%s's calls seen with %s's token: %d, want 3", who, who, n)
		}
	}
	if n := up.count("admin POST tools/call"); n != 0 {
		t.Errorf("%d calls went as the discovery account", n)
	}
	if up.count("admin POST tools/list") == 0 {
		t.Error("the server's own session did not list tools as the discovery account")
	}

	for _, who := range []string{"", "carol"} {
		err := call(who)
		var ua *upstream.UserAuthRequiredError
		if !errors.As(err, &ua) || ua.Reason != "link one" || upstream.Transient(err) {
			t.Errorf("caller %q: %v, want the UserAuthRequiredError, not transient", who, err)
		}
	}
	if st, _ := m.Status("crm"); st.State != upstream.StateConnected {
		t.Errorf("after refused callers the server is %s", st.State)
	}

	// Pooled: one session per caller.
	if a, b := up.count("alice POST initialize"), up.count("bob POST initialize"); a != 1 || b != 1 {
		t.Errorf("sessions opened: alice %d, bob %d; want 1 each", a, b)
	}
	// A changed credential: the caller's sessions close at once, and the
	// next call opens another.
	m.DropUserSessions("crm", "alice")
	rec.waitFor(t, "alice's session to close", func() bool { return up.count("alice DELETE ") == 1 })
	if err := call("alice"); err != nil {
		t.Fatal(err)
	}
	if a, b := up.count("alice POST initialize"), up.count("bob DELETE "); a != 2 || b != 0 {
		t.Errorf("after dropping alice's: alice opened %d sessions (want 2), bob's closed %d (want 0)", a, b)
	}

	// Idle: closed, and the next call opens another. The server's own
	// session is never closed for idleness.
	for i := 1; i <= 2; i++ {
		if err := callOn("quick", "alice"); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "the idle session to close", func() bool { return quickUp.count("alice DELETE ") == i })
	}
	if n := quickUp.count("alice POST initialize"); n != 2 {
		t.Errorf("quick: alice opened %d sessions, want 2", n)
	}
	if n := quickUp.count("admin DELETE "); n != 0 {
		t.Errorf("quick: the server's own session was closed %d times", n)
	}
}
