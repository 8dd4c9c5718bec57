package escalation

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

func openStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "esc.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// receiver is a webhook that refuses (503) while down and records what it
// accepted.
type receiver struct {
	srv  *httptest.Server
	down atomic.Bool
	hits atomic.Int32

	mu       sync.Mutex
	got      []Payload
	headers  []http.Header
	accepted chan string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{accepted: make(chan string, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var p Payload
		if err := json.NewDecoder(req.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, p)
		r.headers = append(r.headers, req.Header.Clone())
		r.mu.Unlock()
		r.accepted <- p.ID
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns the next accepted id, failing after a generous bound (a
// hang guard, not a latency assertion).
func (r *receiver) wait(t *testing.T) string {
	t.Helper()
	select {
	case id := <-r.accepted:
		return id
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook received nothing")
		return ""
	}
}

func failure(tool string) invoke.Failure {
	return invoke.Failure{CorrelationID: "corr-" + tool, AgentID: "agent", Server: "up", Tool: "up." + tool,
		Code: invoke.CodeServerUnavailable, Error: "server \"up\" is unavailable", Attempts: 3}
}

func TestDelivery(t *testing.T) {
	tests := []struct {
		name     string
		downFor  int32 // refused deliveries before the receiver comes back
		restarts bool  // the service is closed while the receiver is down and a new one delivers
	}{
		{name: "receiver up"},
		{name: "receiver down then back", downFor: 3},
		{name: "gateway restarted while the receiver is down", downFor: 1, restarts: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := openStore(t)
			rcv := newReceiver(t)
			opts := &Options{WebhookURL: rcv.srv.URL, Header: http.Header{"Authorization": {"Bearer hook-secret"}},
				MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
			rcv.down.Store(tc.downFor > 0)
			s := New(db, opts)
			t.Cleanup(s.Close)
			s.Escalate(t.Context(), failure("write"))
			list, err := s.List(t.Context(), true)
			if err != nil || len(list) != 1 {
				t.Fatalf("stored escalations: %v %v", list, err)
			}
			e := list[0]
			if e.Event != EventCallFailed || e.CorrelationID != "corr-write" || e.Attempts != 3 || e.ErrorCode != "server_unavailable" {
				t.Errorf("stored %+v", e)
			}
			if tc.downFor > 0 {
				for rcv.hits.Load() < tc.downFor {
					time.Sleep(time.Millisecond)
				}
				if tc.restarts {
					s.Close()
					s = New(db, opts)
					t.Cleanup(s.Close)
				}
				got, _ := db.Escalation(t.Context(), e.ID)
				if got.DeliveredAt != nil {
					t.Fatalf("delivered while the receiver was down: %+v", got)
				}
				rcv.down.Store(false)
			}
			if id := rcv.wait(t); id != e.ID {
				t.Errorf("delivered %q, want %q", id, e.ID)
			}
			rcv.mu.Lock()
			p, h := rcv.got[0], rcv.headers[0]
			rcv.mu.Unlock()
			if p.Tool != "up.write" || p.AgentID != "agent" || p.Attempts != 3 || p.Error == "" || p.Event != EventCallFailed {
				t.Errorf("payload %+v", p)
			}
			if h.Get("Authorization") != "Bearer hook-secret" || h.Get("X-Switchboard-Escalation-Id") != e.ID {
				t.Errorf("headers %v", h)
			}
			waitDelivered(t, db, e.ID)
			got, _ := db.Escalation(t.Context(), e.ID)
			if tc.downFor > 0 && !tc.restarts && got.DeliveryAttempts < 2 {
				t.Errorf("delivery attempts %d, want the refused ones counted", got.DeliveryAttempts)
			}
		})
	}
}

func waitDelivered(t *testing.T, db *store.DB, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if e, err := db.Escalation(t.Context(), id); err == nil && e.DeliveredAt != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("escalation %s not marked delivered", id)
}

func TestEventsAndAck(t *testing.T) {
	db := openStore(t)
	s := New(db, &Options{Events: []string{EventApprovalRequested}})
	t.Cleanup(s.Close)
	s.Escalate(t.Context(), failure("read"))
	if list, _ := s.List(t.Context(), false); len(list) != 0 {
		t.Fatalf("call_failed is not an enabled event, yet stored: %+v", list)
	}
	s = New(db, nil)
	t.Cleanup(s.Close)
	s.Escalate(t.Context(), failure("read"))
	list, _ := s.List(t.Context(), true)
	if len(list) != 1 {
		t.Fatalf("%+v", list)
	}
	acked, err := s.Ack(t.Context(), list[0].ID, "ops")
	if err != nil || acked.AckedBy != "ops" || acked.AckedAt == nil {
		t.Fatalf("ack: %+v %v", acked, err)
	}
	if list, _ := s.List(t.Context(), true); len(list) != 0 {
		t.Errorf("an acknowledged escalation is listed as unacked: %+v", list)
	}
	if _, err := s.Ack(t.Context(), "esc_nope", "ops"); err == nil {
		t.Error("acking an unknown escalation succeeded")
	}
}

// issuer records the tokens it issues.
type issuer struct {
	mu   sync.Mutex
	reqs []authz.TokenRequest
}

func (i *issuer) IssueToken(_ context.Context, r authz.TokenRequest) (authz.IssuedToken, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.reqs = append(i.reqs, r)
	return authz.IssuedToken{Secret: "sbt_secret"}, nil
}

func TestApprovals(t *testing.T) {
	db := openStore(t)
	iss := &issuer{}
	s := New(db, &Options{Tokens: iss})
	t.Cleanup(s.Close)
	ask := invoke.ApprovalAsk{Identity: authz.Identity{AgentID: "writer"}, Server: "up", Tool: "write", Name: "up.write",
		Arguments: json.RawMessage(`{"text": "x", "n": 1}`)}
	ctx := t.Context()

	first, err := s.AskApproval(ctx, ask)
	if err != nil || first.Status != store.ApprovalPending || first.ID == "" {
		t.Fatalf("first ask: %+v %v", first, err)
	}
	// The same call (keys reordered) finds the same request.
	same := ask
	same.Arguments = json.RawMessage(`{"n":1,"text":"x"}`)
	if again, _ := s.AskApproval(ctx, same); again.ID != first.ID || again.Status != store.ApprovalPending {
		t.Errorf("asking again: %+v, want the pending %s", again, first.ID)
	}
	other := ask
	other.Arguments = json.RawMessage(`{"text":"y"}`)
	if o, _ := s.AskApproval(ctx, other); o.ID == first.ID {
		t.Error("other arguments share the approval")
	}
	list, _ := s.List(ctx, false)
	if len(list) != 2 || list[0].Event != EventApprovalRequested || list[0].ApprovalID == "" {
		t.Errorf("escalations of the requests: %+v", list)
	}

	a, err := s.Decide(ctx, first.ID, true, "admin", "")
	if err != nil || a.Status != store.ApprovalApproved || a.DecidedBy != "admin" {
		t.Fatalf("approve: %+v %v", a, err)
	}
	if len(iss.reqs) != 1 || !iss.reqs[0].SingleUse || iss.reqs[0].ArgsDigest == "" || iss.reqs[0].AgentID != "writer" || iss.reqs[0].Tool != "write" {
		t.Errorf("token requested: %+v", iss.reqs)
	}
	if _, err := s.Decide(ctx, first.ID, false, "admin", ""); err == nil {
		t.Error("a decided approval was decided again")
	}
	got, _ := s.AskApproval(ctx, ask)
	if got.Status != store.ApprovalApproved || got.Token != "sbt_secret" || got.ID != first.ID {
		t.Fatalf("retry after approval: %+v", got)
	}
	next, _ := s.AskApproval(ctx, ask)
	if next.Status != store.ApprovalPending || next.ID == first.ID || next.Token != "" {
		t.Errorf("second retry: %+v, want a new pending request", next)
	}

	if _, err := s.Decide(ctx, next.ID, false, "admin", "not today"); err != nil {
		t.Fatal(err)
	}
	denied, _ := s.AskApproval(ctx, ask)
	if denied.Status != store.ApprovalDenied || denied.ID != next.ID || denied.Reason != "not today" {
		t.Errorf("after a denial: %+v", denied)
	}
	all, _ := s.Approvals(ctx, "")
	for _, a := range all {
		if a.TokenSecret != "" {
			t.Errorf("approval %s listed with its token", a.ID)
		}
	}
}
