// Package escalation tells human operators what the gateway cannot settle
// alone (seed 000's error strategy: escalate once retries and fallbacks are
// exhausted): calls that failed for good, and high-risk calls waiting for a
// human approval.
//
// Every escalation is stored first (table escalations) and then POSTed to
// the configured webhook by one owner goroutine. A delivery that fails is
// retried with backoff until the webhook takes it, so a webhook that is
// down loses nothing; delivery is at least once, and receivers deduplicate
// on the escalation id (also sent as the X-Switchboard-Escalation-Id
// header). Approval requests are stored too (table approvals); approving
// one issues a single-use approval token bound to the caller, the tool and
// the arguments, which the caller's retry of the same call receives once.
package escalation

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// Events: what is escalated (the values of settings.escalation_events).
const (
	EventCallFailed        = "call_failed"
	EventApprovalRequested = "approval_requested"
)

// TokenIssuer issues approval tokens. *authz.Engine implements it.
type TokenIssuer interface {
	IssueToken(ctx context.Context, r authz.TokenRequest) (authz.IssuedToken, error)
}

// Options configure a [Service]. The zero value stores escalations and
// delivers none.
type Options struct {
	// WebhookURL receives every escalation as a JSON POST; "" delivers
	// nothing (the records are still kept and listed).
	WebhookURL string
	// Header is sent with every delivery (credentials of the receiver: it
	// is never logged).
	Header http.Header
	// Events are the events escalated; nil means all of them.
	Events []string
	// Client sends the deliveries; it should apply the SSRF guard. Default
	// a client with a 10s timeout.
	Client *http.Client
	// Tokens issues the approval of an approved request; without it
	// approvals cannot be approved.
	Tokens TokenIssuer
	// ApprovalTTL is how long a request waits for a decision and a decision
	// holds; default one hour.
	ApprovalTTL time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed deliveries
	// (doubling, with jitter); defaults 100ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Poll is how often undelivered records are looked for when nothing
	// new was escalated here (records of a previous run or of another
	// replica); default 30s.
	Poll time.Duration
	// OnEvent, if set, is told of new escalations and approval decisions
	// (the gateway's event stream). It must not block.
	OnEvent func(typ string, data any)
	Logger  *slog.Logger
}

// Service stores escalations and approval requests and delivers them to
// the webhook. Safe for concurrent use; [Service.Close] stops its
// delivery goroutine.
type Service struct {
	db     *store.DB
	o      Options
	log    *slog.Logger
	now    func() time.Time
	kick   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Service over db and, when a webhook is configured, starts
// its delivery goroutine, which first delivers what an earlier run left
// undelivered.
func New(db *store.DB, opts *Options) *Service {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Events == nil {
		o.Events = []string{EventCallFailed, EventApprovalRequested}
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.ApprovalTTL <= 0 {
		o.ApprovalTTL = time.Hour
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(30*time.Second, o.MinBackoff)
	}
	if o.Poll <= 0 {
		o.Poll = 30 * time.Second
	}
	if o.OnEvent == nil {
		o.OnEvent = func(string, any) {}
	}
	s := &Service{db: db, o: o, log: o.Logger, now: func() time.Time { return time.Now().UTC() }, kick: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if o.WebhookURL != "" {
		s.wg.Go(func() { s.deliver(ctx) })
	}
	return s
}

// Close stops the delivery goroutine; undelivered records stay stored for
// the next run. Idempotent.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}

func (s *Service) enabled(event string) bool { return slices.Contains(s.o.Events, event) }

// newID is a short random id with a prefix saying what it names.
func newID(prefix string) string { return prefix + strings.ToLower(rand.Text()[:16]) }

// Escalate stores a failed call as an escalation and wakes the delivery.
// It implements [invoke.Escalator].
func (s *Service) Escalate(ctx context.Context, f invoke.Failure) {
	if !s.enabled(EventCallFailed) {
		return
	}
	s.record(ctx, store.Escalation{Event: EventCallFailed, CorrelationID: f.CorrelationID, AgentID: f.AgentID,
		Server: f.Server, Tool: f.Tool, ErrorCode: string(f.Code), Error: f.Error, Attempts: f.Attempts})
}

// record stores e and wakes the delivery. A record that cannot be stored
// is logged: the call's own audit row still tells of it.
func (s *Service) record(ctx context.Context, e store.Escalation) {
	e.ID = newID("esc_")
	e.CreatedAt = s.now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.db.CreateEscalation(ctx, e); err != nil {
		s.log.Error("escalation not stored", "event", e.Event, "correlation_id", e.CorrelationID, "tool", e.Tool, "error", err)
		return
	}
	s.log.Warn("escalated", "escalation", e.ID, "event", e.Event, "correlation_id", e.CorrelationID,
		"agent_id", e.AgentID, "tool", e.Tool, "code", e.ErrorCode)
	s.o.OnEvent("escalation.created", map[string]any{"id": e.ID, "event": e.Event, "tool": e.Tool, "correlation_id": e.CorrelationID})
	select {
	case s.kick <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// List returns the escalations, newest first; unacked keeps those no
// operator acknowledged.
func (s *Service) List(ctx context.Context, unacked bool) ([]store.Escalation, error) {
	return s.db.Escalations(ctx, store.EscalationFilter{Unacked: unacked})
}

// Ack records that by acknowledged escalation id.
func (s *Service) Ack(ctx context.Context, id, by string) (store.Escalation, error) {
	e, err := s.db.AckEscalation(ctx, id, by, s.now())
	if err == nil {
		s.log.Info("escalation acknowledged", "escalation", id, "by", by)
	}
	return e, err
}

// Payload is the JSON body POSTed to the webhook.
type Payload struct {
	ID            string    `json:"id"`
	Event         string    `json:"event"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	AgentID       string    `json:"agent_id,omitempty"`
	Server        string    `json:"server,omitempty"`
	Tool          string    `json:"tool,omitempty"`
	ErrorCode     string    `json:"error_code,omitempty"`
	Error         string    `json:"error,omitempty"`
	Attempts      int       `json:"attempts"`
	ApprovalID    string    `json:"approval_id,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// PayloadOf is the webhook body of e.
func PayloadOf(e store.Escalation) Payload {
	return Payload{ID: e.ID, Event: e.Event, CorrelationID: e.CorrelationID, AgentID: e.AgentID, Server: e.Server, Tool: e.Tool,
		ErrorCode: e.ErrorCode, Error: e.Error, Attempts: e.Attempts, ApprovalID: e.ApprovalID, CreatedAt: e.CreatedAt}
}

// deliver is the owner goroutine: it posts undelivered records, oldest
// first, when woken by a new one, every Poll, and after a failure once its
// backoff has passed (new records do not cut a backoff short, so a webhook
// that is down is not hammered).
func (s *Service) deliver(ctx context.Context) {
	failures := 0
	for {
		if s.deliverPending(ctx) {
			failures = 0
		} else {
			failures++
		}
		wait, kick := s.o.Poll, s.kick
		if failures > 0 {
			wait, kick = s.backoff(failures), nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// backoff is the wait after n consecutive failed rounds: doubling from
// MinBackoff up to MaxBackoff, times 0.5–1.5 so replicas do not retry in
// step.
func (s *Service) backoff(n int) time.Duration {
	d := s.o.MinBackoff << min(n-1, 20)
	if d <= 0 || d > s.o.MaxBackoff {
		d = s.o.MaxBackoff
	}
	return time.Duration(float64(d) * (0.5 + mrand.Float64()))
}

// deliverPending posts every undelivered record; it reports false when
// one failed (the rest wait for the next round, in order).
func (s *Service) deliverPending(ctx context.Context) bool {
	for ctx.Err() == nil {
		batch, err := s.db.Escalations(ctx, store.EscalationFilter{Undelivered: true, Limit: 100})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("reading undelivered escalations", "error", err)
			}
			return false
		}
		for _, e := range batch {
			if err := s.post(ctx, e); err != nil {
				if ctx.Err() != nil {
					return true
				}
				s.log.Warn("escalation webhook failed; retrying with backoff", "escalation", e.ID, "error", err)
				if err := s.db.EscalationDeliveryFailed(context.WithoutCancel(ctx), e.ID, err.Error()); err != nil {
					s.log.Warn("noting a failed escalation delivery", "escalation", e.ID, "error", err)
				}
				return false
			}
			if err := s.db.EscalationDelivered(context.WithoutCancel(ctx), e.ID, s.now()); err != nil {
				s.log.Warn("marking an escalation delivered", "escalation", e.ID, "error", err)
				return false
			}
			s.log.Info("escalation delivered", "escalation", e.ID, "event", e.Event)
		}
		if len(batch) < 100 {
			return true
		}
	}
	return true
}

// post sends one record; any answer but 2xx is a failure. The error names
// the status, never the URL's secrets or the headers.
func (s *Service) post(ctx context.Context, e store.Escalation) error {
	body, err := json.Marshal(PayloadOf(e))
	if err != nil {
		return fmt.Errorf("encoding escalation %s: %w", e.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the webhook request: %w", err)
	}
	for k, v := range s.o.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "switchboard-escalation")
	req.Header.Set("X-Switchboard-Event", e.Event)
	req.Header.Set("X-Switchboard-Escalation-Id", e.ID)
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return fmt.Errorf("posting escalation %s: %w", e.ID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // drained so the connection is reused; its content is not ours to log
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("posting escalation %s: the webhook answered %s", e.ID, resp.Status)
	}
	return nil
}

// AskApproval implements [invoke.Approver]: it answers with the state of
// the open approval of this call, handing an approved one's token to this
// caller once, or files a new pending request and escalates it.
func (s *Service) AskApproval(ctx context.Context, q invoke.ApprovalAsk) (invoke.ApprovalAnswer, error) {
	digest, err := authz.ArgsDigest(q.Arguments)
	if err != nil {
		return invoke.ApprovalAnswer{}, err
	}
	now := s.now()
	a, err := s.db.OpenApproval(ctx, q.Identity.AgentID, q.Server, q.Tool, digest, now)
	switch {
	case err == nil:
		switch a.Status {
		case store.ApprovalPending:
			return invoke.ApprovalAnswer{ID: a.ID, Status: a.Status}, nil
		case store.ApprovalDenied:
			return invoke.ApprovalAnswer{ID: a.ID, Status: a.Status, DecidedBy: a.DecidedBy, Reason: a.Reason}, nil
		case store.ApprovalApproved:
			secret, err := s.db.TakeApproval(ctx, a.ID, now)
			if err == nil {
				s.log.Info("approval used", "approval", a.ID, "agent_id", a.AgentID, "tool", a.Name)
				return invoke.ApprovalAnswer{ID: a.ID, Status: a.Status, Token: secret}, nil
			}
			if !errors.Is(err, store.ErrConflict) {
				return invoke.ApprovalAnswer{}, err
			}
			// A concurrent retry took it: this call asks anew.
		}
	case !errors.Is(err, store.ErrNotFound):
		return invoke.ApprovalAnswer{}, err
	}
	a = store.Approval{ID: newID("apr_"), AgentID: q.Identity.AgentID, Server: q.Server, Tool: q.Tool, Name: q.Name,
		ArgsDigest: digest, CorrelationID: q.CorrelationID, Status: store.ApprovalPending,
		RequestedAt: now, ExpiresAt: now.Add(s.o.ApprovalTTL)}
	if err := s.db.CreateApproval(ctx, a); err != nil {
		return invoke.ApprovalAnswer{}, err
	}
	s.log.Info("approval requested", "approval", a.ID, "agent_id", a.AgentID, "tool", a.Name, "correlation_id", a.CorrelationID)
	s.o.OnEvent("approval.requested", map[string]any{"id": a.ID, "agent_id": a.AgentID, "tool": a.Name})
	if s.enabled(EventApprovalRequested) {
		s.record(context.WithoutCancel(ctx), store.Escalation{Event: EventApprovalRequested, CorrelationID: q.CorrelationID,
			AgentID: a.AgentID, Server: a.Server, Tool: a.Name, ApprovalID: a.ID,
			Error: "high-risk call waiting for a human approval: switchboard approvals approve|deny " + a.ID})
	}
	return invoke.ApprovalAnswer{ID: a.ID, Status: a.Status}, nil
}

// Approvals lists approval requests, newest first; status "" lists all.
// Stored tokens are not returned.
func (s *Service) Approvals(ctx context.Context, status string) ([]store.Approval, error) {
	list, err := s.db.Approvals(ctx, status, 0)
	for i := range list {
		list[i].TokenSecret = ""
	}
	return list, err
}

// ErrExpired is wrapped by the error of a decision on a request that
// waited longer than the approval TTL.
var ErrExpired = errors.New("the approval request expired")

// Decide approves or denies a pending request. Approving issues the
// single-use token bound to the request's caller, tool and arguments that
// the caller's retry receives. A request decided already is an error
// wrapping [store.ErrConflict]; an expired one wraps [ErrExpired] and
// [store.ErrConflict].
func (s *Service) Decide(ctx context.Context, id string, approve bool, by, reason string) (store.Approval, error) {
	a, err := s.db.Approval(ctx, id)
	if err != nil {
		return store.Approval{}, err
	}
	now := s.now()
	if a.Status == store.ApprovalPending && !now.Before(a.ExpiresAt) {
		return store.Approval{}, fmt.Errorf("approval %q: %w at %s (%w)", id, ErrExpired, a.ExpiresAt.Format(time.RFC3339), store.ErrConflict)
	}
	status, secret := store.ApprovalDenied, ""
	if approve {
		if s.o.Tokens == nil {
			return store.Approval{}, errors.New("approvals cannot be approved: no token issuer")
		}
		if a.Status != store.ApprovalPending {
			return store.Approval{}, fmt.Errorf("approval %q is %s, not pending: %w", id, a.Status, store.ErrConflict)
		}
		// If a concurrent decision wins, this token is never handed to
		// anyone and simply expires.
		tok, err := s.o.Tokens.IssueToken(ctx, authz.TokenRequest{AgentID: a.AgentID, Server: a.Server, Tool: a.Tool,
			TTL: s.o.ApprovalTTL, ArgsDigest: a.ArgsDigest, SingleUse: true})
		if err != nil {
			return store.Approval{}, fmt.Errorf("issuing the token of approval %q: %w", id, err)
		}
		status, secret = store.ApprovalApproved, tok.Secret
	}
	out, err := s.db.DecideApproval(ctx, id, status, by, reason, secret, now, now.Add(s.o.ApprovalTTL))
	if err != nil {
		return store.Approval{}, err
	}
	s.log.Info("approval decided", "approval", id, "status", status, "by", by, "agent_id", out.AgentID, "tool", out.Name)
	s.o.OnEvent("approval.decided", map[string]any{"id": id, "status": status, "by": by})
	return out, nil
}
