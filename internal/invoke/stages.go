package invoke

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/resilience"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// The pipeline's collaborators are declared here, by their consumer, as the
// few methods it calls. The app passes the concrete types (authz.Engine,
// audit.Recorder, resilience.Bulkheads, ...). A nil collaborator disables
// its stage.

// Authorizer decides whether a call may run. *authz.Engine implements it.
type Authorizer interface {
	Decide(ctx context.Context, r authz.Request) (authz.Decision, error)
}

// Recorder keeps the audit log; Record must not block. *audit.Recorder
// implements it.
type Recorder interface {
	Record(rec audit.Record) bool
}

// Redactor hashes and summarizes arguments and results without their
// secrets. *audit.Redactor implements it.
type Redactor interface {
	ParamsHash(args json.RawMessage) string
	Summary(v any, max int) string
}

// Limiter is a per-agent rate limit. *resilience.RateLimiter implements it.
type Limiter interface {
	Allow(key string) (ok bool, retryAfter time.Duration)
}

// Bulkhead caps concurrent calls per server. *resilience.Bulkheads
// implements it.
type Bulkhead interface {
	Acquire(ctx context.Context, key string) (release func(), err error)
}

// RetryBudget bounds retries to a share of calls. *resilience.RetryBudget
// implements it.
type RetryBudget interface {
	Call()
	TryRetry() bool
}

// Idempotency runs a call once per key and fingerprint.
// *resilience.Idempotency[*Result] implements it.
type Idempotency interface {
	DoFingerprint(ctx context.Context, key, fingerprint string, fn func(context.Context) (*Result, error)) (*Result, bool, error)
	Peek(ctx context.Context, key, fingerprint string) (*Result, bool, error)
}

// Escalator is told of calls that failed for good (after their retries
// and fallbacks), so that a human operator hears of them. Escalate must
// return promptly; delivery is its own business. *escalation.Service
// implements it.
type Escalator interface {
	Escalate(ctx context.Context, f Failure)
}

// Failure is a call that failed after its retries and fallbacks.
type Failure struct {
	CorrelationID string
	AgentID       string
	Server        string
	Tool          string // namespaced
	Code          Code
	Error         string
	Attempts      int
}

// Approver files approval requests for high-risk calls made without a
// token, and answers the caller's retry. *escalation.Service implements it.
type Approver interface {
	// AskApproval returns the state of the approval of this call (caller,
	// tool, arguments), filing a pending one when there is none. An
	// approved answer carries the single-use token the call is then
	// authorized with; it is handed out once.
	AskApproval(ctx context.Context, q ApprovalAsk) (ApprovalAnswer, error)
}

// ApprovalAsk is a high-risk call that needs a human approval.
type ApprovalAsk struct {
	Identity      authz.Identity
	Server        string
	Tool          string // the server's own name
	Name          string // namespaced
	Arguments     json.RawMessage
	CorrelationID string
}

// ApprovalAnswer is the state of an approval request.
type ApprovalAnswer struct {
	ID string
	// Status is "pending", "approved" or "denied".
	Status string
	// Token is the approval token of an approved request.
	Token string
	// DecidedBy and Reason explain a denial.
	DecidedBy string
	Reason    string
}

// Outcome is what the pipeline reports of every tools/call it handled, for
// metrics and events.
type Outcome struct {
	CorrelationID string
	AgentID       string
	Server        string // "" when the tool did not resolve
	Tool          string // namespaced
	// Status is "success", "tool_error" (an isError result), "denied" or
	// "error".
	Status string
	// Code is the error code when Status is "denied" or "error".
	Code     Code
	Attempts int
	ServedBy string
	Took     time.Duration
}

// summaryMax bounds an audit result summary (seed 000: 500 characters).
const summaryMax = 500

// callState accumulates what happened during one call, for the result,
// the audit record and the metrics.
type callState struct {
	attempts int
	decision authz.Decision
	servedBy string
}

// CallTool runs one call through the pipeline. The stages, in order:
//
//  1. validate the arguments and resolve the name against the catalog
//     snapshot (404 when unknown; 409 when the tool is disabled);
//  2. identity: a pipeline with an Authorizer refuses calls without one;
//  3. rate limit per agent (429 with Retry-After);
//  4. authorize (default deny; 403 naming the rule);
//  5. idempotency: a key already used by the agent returns the stored
//     result, waits for the first call in flight, or conflicts (409) when
//     the arguments differ;
//  6. bound the whole call, retries included, by the invocation timeout (a
//     shorter client deadline wins);
//  7. per attempt: bulkhead (per-server concurrency cap), circuit breaker
//     (per server:tool; open = fail fast), route to the upstream;
//  8. retry transient failures with backoff and jitter, within the retry
//     budget, and only when the call cannot have run twice (never sent,
//     or read-only/idempotent tool, or an idempotency key);
//  9. fallbacks, in order, when the breaker is open or the server is
//     unavailable or retries are exhausted;
//  10. audit record, metrics and event, for every call, denied ones too.
func (p *Pipeline) CallTool(ctx context.Context, c Call) (*Result, error) {
	start := time.Now()
	if c.CorrelationID == "" {
		c.CorrelationID = newCorrelationID()
	}
	st := &callState{}
	var tool catalog.Tool
	var sp trace.Span
	if p.tracer != nil {
		ctx, sp = p.startCall(ctx, c)
	}
	res, err := p.callTool(ctx, c, &tool, st)
	p.finish(ctx, c, tool, st, res, err, time.Since(start))
	if sp != nil {
		endCall(sp, tool, st, res, err)
	}
	if err != nil {
		return nil, err
	}
	out := *res // a replayed result is shared: give each caller its own copy
	out.CorrelationID = c.CorrelationID
	out.Decision = st.decision
	if out.Replayed {
		out.Attempts = 0 // this request called nothing
	} else {
		out.Attempts = st.attempts
		out.ServedBy = st.servedBy
		out.RoutingTime = max(time.Since(start)-out.ExecutionTime, 0)
	}
	return &out, nil
}

func (p *Pipeline) callTool(ctx context.Context, c Call, tool *catalog.Tool, st *callState) (*Result, error) {
	t := p.tuning.Load()
	if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
		return nil, &Error{Code: CodeInvalidArgument, Message: "arguments are not valid JSON"}
	}
	var err error
	if *tool, err = p.Resolve(c); err != nil {
		return nil, err
	}
	if p.state != nil {
		if ok, why := p.state(*tool); !ok {
			return nil, &Error{Code: CodeToolDisabled, Server: tool.Server,
				Message: fmt.Sprintf("tool %q is disabled: %s", tool.Name, why)}
		}
	}
	if p.authz != nil && c.Identity.ID == "" {
		st.decision = authz.Decision{Rule: "unauthenticated", Reason: "no credentials"}
		return nil, &Error{Code: CodeUnauthenticated, Message: "calling " + strconv.Quote(tool.Name) + ": no authenticated caller"}
	}
	if p.limiter != nil {
		if ok, after := p.limiter.Allow(c.Identity.AgentID); !ok {
			return nil, &Error{Code: CodeRateLimited, RetryAfter: after,
				Message: fmt.Sprintf("agent %q is over its rate limit; retry after %s", c.Identity.AgentID, after.Round(time.Millisecond))}
		}
	}
	var key, fp string
	if c.IdempotencyKey != "" && p.idem != nil && c.RequestState == "" && len(c.InputResponses) == 0 {
		key, fp = c.Identity.AgentID+"\x00"+c.IdempotencyKey, fingerprint(tool.Name, c.Arguments)
		// A replay returns the first execution's result: it is authorized
		// like any call, except that it needs no approval token, which the
		// first execution spent (a single-use one cannot be shown twice).
		prev, ok, err := p.idem.Peek(ctx, key, fp)
		if err != nil {
			return nil, idemConflict(c, *tool, err)
		}
		if ok {
			noToken := c
			noToken.ApprovalToken = ""
			d, err := p.authorize(ctx, noToken, *tool)
			if err != nil && !(d.TokenRequired && strings.HasPrefix(d.Rule, "high-risk:token")) {
				st.decision = d
				return nil, err
			}
			d.Allow = true
			d.Rule = "replay+" + d.Rule
			st.decision = d
			r := *prev
			r.Replayed = true
			return &r, nil
		}
	}
	if st.decision, err = p.authorize(ctx, c, *tool); err != nil {
		if p.approver == nil || st.decision.Rule != "high-risk:token-missing" {
			return nil, err
		}
		if err := p.approve(ctx, &c, *tool, st); err != nil {
			return nil, err
		}
	}

	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	run := func(ctx context.Context) (*Result, error) {
		return p.execute(ctx, c, *tool, st, t)
	}
	if key == "" {
		return run(ctx)
	}
	res, shared, err := p.idem.DoFingerprint(ctx, key, fp, run)
	switch {
	case errors.Is(err, resilience.ErrIdempotencyConflict):
		return nil, idemConflict(c, *tool, err)
	case err != nil:
		return nil, err
	}
	if shared {
		r := *res
		r.Replayed = true
		return &r, nil
	}
	return res, nil
}

// approve handles a high-risk call without a token when approvals are
// requested: it files (or finds) the call's approval request and, once an
// admin approved it, authorizes the call with the approval's single-use
// token through the same token checks as any other.
func (p *Pipeline) approve(ctx context.Context, c *Call, t catalog.Tool, st *callState) error {
	ans, err := p.approver.AskApproval(ctx, ApprovalAsk{Identity: c.Identity, Server: t.Server, Tool: t.OriginalName, Name: t.Name,
		Arguments: c.Arguments, CorrelationID: c.CorrelationID})
	if err != nil {
		return &Error{Code: CodeUpstream, Server: t.Server, Err: err, Message: "requesting an approval for " + strconv.Quote(t.Name) + ": " + err.Error()}
	}
	switch ans.Status {
	case "approved":
		c.ApprovalToken = ans.Token
		st.decision, err = p.authorize(ctx, *c, t)
		if err == nil {
			st.decision.Rule += "+approval:" + ans.ID
		}
		return err
	case "denied":
		st.decision.Rule = "high-risk:approval-denied:" + ans.ID
		st.decision.Reason = "approval " + ans.ID + " was denied"
		msg := fmt.Sprintf("calling %q: approval %s was denied by %s", t.Name, ans.ID, ans.DecidedBy)
		if ans.Reason != "" {
			msg += ": " + ans.Reason
		}
		return &Error{Code: CodeDenied, Server: t.Server, ApprovalID: ans.ID, Message: msg}
	default:
		st.decision.Rule = "high-risk:approval-pending:" + ans.ID
		st.decision.Reason = "waiting for approval " + ans.ID
		return &Error{Code: CodeApprovalRequired, Server: t.Server, ApprovalID: ans.ID,
			Message: fmt.Sprintf("calling %q needs a human approval: approval %s is pending; "+
				"retry with the same arguments once an admin approved it (switchboard approvals approve %s)", t.Name, ans.ID, ans.ID)}
	}
}

func idemConflict(c Call, t catalog.Tool, err error) error {
	return &Error{Code: CodeIdempotencyConflict, Server: t.Server, Err: err,
		Message: "idempotency key " + strconv.Quote(c.IdempotencyKey) + " was already used for a different call"}
}

// authorize asks the Authorizer; no Authorizer means authorization is off
// (embedded uses and tests), which the decision says.
func (p *Pipeline) authorize(ctx context.Context, c Call, t catalog.Tool) (authz.Decision, error) {
	if p.authz == nil {
		return authz.Decision{Allow: true, Rule: "authz-disabled"}, nil
	}
	var sp trace.Span
	if p.tracer != nil {
		ctx, sp = p.startStage(ctx, "authorize", attribute.String(telemetry.AttrGenAIToolName, t.Name),
			attribute.String(telemetry.AttrServer, t.Server))
	}
	d, err := p.decide(ctx, c, t)
	if sp != nil {
		sp.SetAttributes(attribute.String(telemetry.AttrPolicyRule, d.Rule))
		endStage(sp, err)
	}
	return d, err
}

// decide is the Authorizer's decision, mapped to the pipeline's errors.
func (p *Pipeline) decide(ctx context.Context, c Call, t catalog.Tool) (authz.Decision, error) {
	d, err := p.authz.Decide(ctx, authz.Request{
		Identity:    c.Identity,
		Server:      t.Server,
		Tool:        t.OriginalName,
		Name:        t.Name,
		Action:      "invoke",
		Destructive: t.Destructive(),
		Arguments:   c.Arguments,
		Token:       c.ApprovalToken,
	})
	if err != nil {
		return d, &Error{Code: CodeUpstream, Server: t.Server, Err: err, Message: "authorizing " + strconv.Quote(t.Name) + ": " + err.Error()}
	}
	if !d.Allow {
		msg := fmt.Sprintf("agent %q may not call %q: %s (rule %s)", c.Identity.AgentID, t.Name, d.Reason, d.Rule)
		return d, &Error{Code: CodeDenied, Server: t.Server, Message: msg}
	}
	return d, nil
}

// execute runs the tool and, when it fails in a way a fallback can cover,
// its fallbacks in order.
func (p *Pipeline) execute(ctx context.Context, c Call, tool catalog.Tool, st *callState, t *tuning) (*Result, error) {
	res, err := p.attemptTool(ctx, c, tool, st, t)
	if err == nil || !fallbackWorthy(err) {
		return res, err
	}
	primaryErr := err
	for _, name := range t.fallbacks[tool.Name] {
		fb, ok := p.cat.Snapshot().Tool(name)
		if !ok || !fb.Available || ctx.Err() != nil {
			continue
		}
		if _, derr := p.authorize(ctx, c, fb); derr != nil {
			p.logger.Debug("fallback not allowed", "tool", tool.Name, "fallback", fb.Name, "error", derr)
			continue
		}
		res, err = p.attemptTool(ctx, c, fb, st, t)
		if err == nil {
			st.servedBy = fb.Name
			return res, nil
		}
		if !fallbackWorthy(err) {
			break
		}
	}
	return nil, primaryErr
}

// fallbackWorthy reports whether a failure leaves the call unserved without
// having possibly run: then another tool may serve it.
func fallbackWorthy(err error) bool {
	switch CodeOf(err) {
	case CodeCircuitOpen, CodeServerUnavailable, CodeServerBusy:
		return true
	}
	var e *Error
	return errors.As(err, &e) && e.exhausted
}

// attemptTool calls one tool with bulkhead, breaker and retries.
func (p *Pipeline) attemptTool(ctx context.Context, c Call, tool catalog.Tool, st *callState, t *tuning) (*Result, error) {
	params := &mcp.CallToolParams{Meta: upstreamMeta(c.Meta), Name: tool.OriginalName,
		InputResponses: c.InputResponses, RequestState: c.RequestState}
	if len(c.Arguments) > 0 {
		params.Arguments = c.Arguments
	}
	if id, ok := authz.IdentityFrom(ctx); !ok || id.ID != c.Identity.ID {
		// The upstream transport reads the caller from the context
		// (identity propagation); not every front puts it there.
		ctx = authz.WithIdentity(ctx, c.Identity)
	}
	safe := c.IdempotencyKey != "" || retrySafe(tool)
	var budget RetryBudget
	if p.budget != nil {
		budget = p.budget(tool.Server)
		budget.Call()
	}
	for attempt := 1; ; attempt++ {
		routed := time.Now()
		var res *mcp.CallToolResult
		var err error
		if p.tracer != nil {
			actx, sp := p.startStage(ctx, "attempt", attribute.Int(telemetry.AttrAttempt, attempt),
				attribute.String(telemetry.AttrGenAIToolName, tool.Name), attribute.String(telemetry.AttrServer, tool.Server))
			res, err = p.attemptOnce(actx, tool, params, st)
			endStage(sp, err)
		} else {
			res, err = p.attemptOnce(ctx, tool, params, st)
		}
		done := time.Now()
		if err == nil {
			return &Result{CallToolResult: res, Tool: tool, ExecutionTime: done.Sub(routed)}, nil
		}
		var ce *Error
		if errors.As(err, &ce) {
			return nil, ce // refused before reaching the upstream (breaker, bulkhead)
		}
		if ctx.Err() != nil || !upstream.Transient(err) {
			return nil, p.classify(ctx, tool.Server, "calling tool "+strconv.Quote(tool.Name), err)
		}
		if upstream.RequestSent(err) && !safe {
			return nil, &Error{Code: CodeOutcomeUnknown, Server: tool.Server, Err: err, Attempts: st.attempts,
				Message: fmt.Sprintf("calling tool %q: the outcome is unknown: the request reached the upstream and the exchange failed (%s); "+
					"not retried because the tool is not marked read-only or idempotent and the call has no idempotency key",
					tool.Name, upstreamReason(err))}
		}
		final := func(why string) error {
			e := p.classify(ctx, tool.Server, "calling tool "+strconv.Quote(tool.Name), err).(*Error)
			e.exhausted = true
			e.Attempts = st.attempts
			if why != "" {
				e.Message += " (" + why + ")"
			}
			return e
		}
		if attempt >= t.retry.MaxAttempts {
			return nil, final(fmt.Sprintf("after %d attempts", st.attempts))
		}
		if budget != nil && !budget.TryRetry() {
			return nil, final("retry budget of server " + strconv.Quote(tool.Server) + " exhausted")
		}
		wait := t.retry.Jitter(t.retry.Delay(attempt - 1))
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, final("no time left for another attempt")
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, p.classify(ctx, tool.Server, "calling tool "+strconv.Quote(tool.Name), err)
		case <-timer.C:
		}
	}
}

// attemptOnce is one try: bulkhead slot, breaker permission, upstream call.
// Refusals by the bulkhead or the breaker come back as *Error; upstream
// failures unclassified.
func (p *Pipeline) attemptOnce(ctx context.Context, tool catalog.Tool, params *mcp.CallToolParams, st *callState) (*mcp.CallToolResult, error) {
	if p.bulkhead != nil {
		var sp trace.Span
		if p.tracer != nil {
			_, sp = p.startStage(ctx, "bulkhead", attribute.String(telemetry.AttrServer, tool.Server))
		}
		release, err := p.bulkhead.Acquire(ctx, tool.Server)
		endStage(sp, err)
		if err != nil {
			if ctx.Err() != nil {
				return nil, p.classify(ctx, tool.Server, "waiting for a slot on server "+strconv.Quote(tool.Server), err)
			}
			return nil, &Error{Code: CodeServerBusy, Server: tool.Server, Err: err, Attempts: st.attempts,
				Message: fmt.Sprintf("server %q is busy: its concurrency limit and wait queue are full", tool.Server)}
		}
		defer release()
	}
	var report func(success bool)
	var breaker *resilience.Breaker
	if p.breakers != nil {
		b := p.breakers.Get(resilience.Key(tool.Server, tool.OriginalName))
		breaker = b
		var sp trace.Span
		if p.tracer != nil {
			_, sp = p.startStage(ctx, "circuit breaker", attribute.String(telemetry.AttrServer, tool.Server))
		}
		done, err := b.Allow()
		if sp != nil {
			sp.SetAttributes(attribute.String(telemetry.AttrBreakerState, b.State().String()))
			endStage(sp, err)
		}
		if err != nil {
			e := &Error{Code: CodeCircuitOpen, Server: tool.Server, Status: b.State().String(), Err: err, Attempts: st.attempts,
				Message: fmt.Sprintf("circuit breaker for %q is %s: failing fast without calling server %q", tool.Name, b.State(), tool.Server)}
			if snap := b.Snapshot(); !snap.OpenedAt.IsZero() {
				e.RetryAfter = max(time.Until(snap.OpenedAt.Add(p.breakers.Settings().Cooldown)), 0)
			}
			return nil, e
		}
		report = done
	}
	st.attempts++
	res, err := p.up.CallTool(ctx, tool.Server, params)
	switch {
	case report == nil:
	case breakerIgnores(ctx, err):
		breaker.Ignore()
	default:
		report(!breakerFailure(err))
	}
	return res, err
}

// breakerIgnores reports whether a call's outcome says nothing of the
// tool's health: its server was not there to take it (the supervisor
// tracks that, and a breaker opened by it would outlive the recovery), the
// caller gave up, or the tool answered with more than max_result_bytes
// (it works; its answer is too large for this gateway).
func breakerIgnores(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(ctx.Err(), context.Canceled) || upstream.IsResultTooLarge(err) {
		return true
	}
	var u *upstream.UnavailableError
	var ua *upstream.UserAuthRequiredError
	return errors.As(err, &u) && !u.Sent || errors.As(err, &ua)
}

// breakerFailure reports whether err says the tool is unwell: transport
// failures, timeouts and server-side protocol errors. A tool result with
// isError and a client mistake (invalid params, unknown method) are not its
// fault.
func breakerFailure(err error) bool {
	if err == nil {
		return false
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		switch rpc.Code {
		case jsonrpc.CodeInvalidParams, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidRequest:
			return false
		}
	}
	return true
}

// escalates reports whether a failed call is one a human should hear of:
// the upstream side failed (unavailable, timed out, broken, its breaker
// open, its queue full, its outcome unknown) and retries and fallbacks did
// not help. The caller's own mistakes, refusals and cancellations are not,
// nor an upstream's protocol answer to a bad request.
func escalates(err error) bool {
	if e, ok := errors.AsType[*Error](err); ok && e.exhausted {
		return true // transient failures that outlasted the retries
	}
	switch CodeOf(err) {
	case CodeServerUnavailable, CodeTimeout, CodeCircuitOpen, CodeServerBusy, CodeOutcomeUnknown:
		return true
	case CodeUpstream:
		var rpcErr *jsonrpc.Error
		return !errors.As(err, &rpcErr)
	}
	return false
}

// retrySafe reports whether the tool says running it twice does no harm.
func retrySafe(t catalog.Tool) bool {
	if t.Def == nil || t.Def.Annotations == nil {
		return false
	}
	return t.Def.Annotations.ReadOnlyHint || t.Def.Annotations.IdempotentHint
}

// upstreamReason is the failure's text without the pipeline's own framing.
func upstreamReason(err error) string {
	return strings.TrimSpace(err.Error())
}

// finish writes the audit record and reports the outcome.
func (p *Pipeline) finish(ctx context.Context, c Call, tool catalog.Tool, st *callState, res *Result, err error, took time.Duration) {
	o := Outcome{
		CorrelationID: c.CorrelationID,
		AgentID:       c.Identity.AgentID,
		Server:        tool.Server,
		Tool:          tool.Name,
		Attempts:      st.attempts,
		ServedBy:      st.servedBy,
		Took:          took,
	}
	if o.Tool == "" {
		o.Tool = c.Name
		if c.Server != "" {
			o.Server = c.Server
		}
	}
	switch {
	case err != nil:
		o.Code = CodeOf(err)
		o.Status = "error"
		if o.Code == CodeDenied || o.Code == CodeUnauthenticated || o.Code == CodeApprovalRequired {
			o.Status = "denied"
		}
	case res.IsError:
		o.Status = "tool_error"
	default:
		o.Status = "success"
	}
	if res != nil && res.Replayed {
		o.Attempts = 0
	}
	p.onCall(o)
	if p.escalator != nil && err != nil && escalates(err) {
		p.escalator.Escalate(context.WithoutCancel(ctx), Failure{CorrelationID: c.CorrelationID, AgentID: c.Identity.AgentID,
			Server: o.Server, Tool: o.Tool, Code: o.Code, Error: err.Error(), Attempts: o.Attempts})
	}
	if p.recorder == nil {
		return
	}
	rec := audit.Record{
		Kind:           audit.KindInvocation,
		CorrelationID:  c.CorrelationID,
		AgentID:        c.Identity.AgentID,
		Server:         o.Server,
		Tool:           tool.OriginalName,
		Success:        o.Status == "success",
		Attempts:       o.Attempts,
		LatencyMS:      float64(took.Microseconds()) / 1e3,
		PolicyDecision: policyDecision(st.decision),
		PolicyRule:     st.decision.Rule,
		PolicyRevision: st.decision.Revision,
		CachedDecision: st.decision.Cached,
		IdempotencyKey: c.IdempotencyKey,
		TicketID:       c.TicketID,
		TaskID:         c.TaskID,
		ServedBy:       st.servedBy,
	}
	if rec.Tool == "" {
		rec.Tool = c.Name
	}
	var a *auditInputs
	switch {
	case err != nil:
		rec.Error = err.Error()
		rec.ErrorCode = string(o.Code)
		a = p.auditInputs(c.Arguments, nil, false)
	case p.redactor != nil:
		a = p.auditInputs(c.Arguments, res.CallToolResult, true)
		if res.IsError {
			rec.ErrorCode = "tool_error"
			rec.Error = ToolErrorText(res.CallToolResult)
		}
	}
	if p.tracer != nil {
		sctx, sp := p.startStage(ctx, "audit")
		p.record(sctx, rec, a)
		sp.End()
		return
	}
	p.record(ctx, rec, a)
}

// record hands rec to the recorder, durably when configured. A recorder
// that can derive fields itself derives a's on its writer; otherwise they
// are derived here. The wait for a durable write keeps ctx's values but not
// its end: a caller that gave up still gets its call recorded.
func (p *Pipeline) record(ctx context.Context, rec audit.Record, a *auditInputs) {
	var derive func(*audit.Record)
	if a != nil {
		derive = a.derive
		// Whatever happens below, the result is not read once the call
		// has moved on.
		defer a.release()
	}
	dr, deferring := p.recorder.(deferringRecorder)
	if !deferring && derive != nil {
		derive(&rec)
	}
	if sr, ok := p.recorder.(syncRecorder); ok && p.durable {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		var err error
		if deferring {
			err = dr.RecordSyncDeferred(ctx, rec, derive)
		} else {
			err = sr.RecordSync(ctx, rec)
		}
		if err != nil {
			p.logger.Warn("audit record not confirmed written", "correlation_id", rec.CorrelationID, "error", err)
		}
		return
	}
	if deferring {
		// Not waiting for the writer: copy the result now.
		if a != nil {
			a.release()
		}
		dr.RecordDeferred(rec, derive)
		return
	}
	p.recorder.Record(rec)
}

// syncRecorder writes a record before returning. *audit.Recorder
// implements it.
type syncRecorder interface {
	RecordSync(ctx context.Context, rec audit.Record) error
}

// deferringRecorder runs the derivation of a record's redacted fields on
// its own writer, off the call's path (see audit.Recorder.RecordDeferred).
// *audit.Recorder implements it.
type deferringRecorder interface {
	RecordDeferred(rec audit.Record, derive func(*audit.Record)) bool
	RecordSyncDeferred(ctx context.Context, rec audit.Record, derive func(*audit.Record)) error
}

// auditInputs is what an invocation record's params hash and result
// summary are derived from. Deriving them means redacting, the costly part
// of auditing, so the recorder's writer may do it, possibly after the call
// returned; the inputs must then be data nothing else changes. The
// arguments are copied at once (cheap; the request's buffer may be
// reused). The result is read where it is only while the call waits for
// its record (durable audit: the writer derives before it writes); release,
// which the call's path runs before it moves on, marshals it if the writer
// has not yet, and the writer then uses those bytes. So a durable call
// marshals its result on the writer, and nothing reads a result after the
// call returned it (its caller may change it).
type auditInputs struct {
	red  Redactor
	args json.RawMessage

	mu        sync.Mutex
	summarize bool                // the call has a result to summarize
	result    *mcp.CallToolResult // until marshalled
	raw       []byte
	rawErr    error
	marshaled bool
}

// auditInputs returns the inputs of a record, or nil without a redactor.
func (p *Pipeline) auditInputs(args json.RawMessage, result *mcp.CallToolResult, summarize bool) *auditInputs {
	if p.redactor == nil {
		return nil
	}
	return &auditInputs{red: p.redactor, args: bytes.Clone(args), summarize: summarize, result: result}
}

// release makes a copy of the result if there is none yet; afterwards the
// result itself is never read.
func (a *auditInputs) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.marshal()
}

// marshal must be called with mu held.
func (a *auditInputs) marshal() {
	if a.marshaled || !a.summarize {
		return
	}
	a.raw, a.rawErr = marshalResult(a.result)
	a.result, a.marshaled = nil, true
}

// derive fills rec's params hash and result summary; a result over
// summaryInputMax is only measured.
func (a *auditInputs) derive(rec *audit.Record) {
	rec.ParamsHash = a.red.ParamsHash(a.args)
	a.mu.Lock()
	a.marshal()
	raw, err := a.raw, a.rawErr
	a.mu.Unlock()
	switch {
	case !a.summarize || err != nil:
	case len(raw) > summaryInputMax:
		rec.ResultSummary = fmt.Sprintf("(a %d-byte result, not summarized)", len(raw))
	default:
		rec.ResultSummary = a.red.Summary(json.RawMessage(raw), summaryMax)
	}
}

// marshalResult is json.Marshal(r), byte for byte, without its last pass:
// json.Marshal re-scans and compacts what a MarshalJSON method returns, and
// the SDK's is already compact json.Marshal output.
func marshalResult(r *mcp.CallToolResult) ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	return r.MarshalJSON()
}

// summaryInputMax bounds the results the audit summarizes: redacting means
// reading the whole result, which for a large one (a file read) would cost
// more than the call; its summary then says only how large it was.
const summaryInputMax = 64 << 10

// fingerprint identifies a call's content for idempotency: the tool and the
// digest of its arguments in canonical JSON (authz.ArgsDigest), so that the
// same call sent with keys in another order is still the same call.
func fingerprint(tool string, args json.RawMessage) string {
	d, err := authz.ArgsDigest(args)
	if err != nil {
		// Not valid JSON: the pipeline refused the call before this; hash
		// the bytes so a fingerprint still exists.
		sum := sha256.Sum256(args)
		d = hex.EncodeToString(sum[:])
	}
	// Hex only: the fingerprint may be stored (shared by replicas), where a
	// NUL byte is not welcome.
	sum := sha256.Sum256([]byte(tool + "\x00" + d))
	return hex.EncodeToString(sum[:])
}

// newCorrelationID returns a random id for a call that came without one.
func newCorrelationID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "sb-" + hex.EncodeToString(b[:])
}

// policyDecision is the audit column: ALLOW, DENY, or "" when the call
// failed before a decision was made (unknown tool, bad arguments).
func policyDecision(d authz.Decision) string {
	switch {
	case d.Allow:
		return "ALLOW"
	case d.Rule != "":
		return "DENY"
	}
	return ""
}
