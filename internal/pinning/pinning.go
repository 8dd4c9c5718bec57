// Package pinning defends against tool-definition "rug pulls" (OWASP MCP
// Top 10, MCP03): an upstream that, once trusted, changes what one of its
// tools says it does. The first definition the gateway sees of each tool
// (name, description, input and output schemas, annotations: a
// [catalog.Pin]) is pinned in the store; a later, different definition puts
// the tool in quarantine — the catalog holds it back, calls are refused —
// until an admin approves the new definition, which is then pinned. A tool
// whose upstream goes back to the pinned definition is served again.
//
// Pins live in the store, so they survive restarts and replicas sharing a
// PostgreSQL store share them; the store also makes sure that one change is
// announced (event, audit record) once, by one replica.
package pinning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

// Event types published on the bus.
const (
	// EventChanged: an upstream presents another definition than the pinned
	// one; the tool is quarantined.
	EventChanged = "tool.definition_changed"
	// EventRestored: the upstream presents the pinned definition again; the
	// tool is served again.
	EventRestored = "tool.definition_restored"
	// EventApproved: an admin approved the new definition, now pinned.
	EventApproved = "tool.definition_approved"
)

// Operations of the audit records written (audit.Record.Operation).
const (
	OpChanged  = EventChanged
	OpRestored = EventRestored
	OpApprove  = "tool.approve"
)

// PolicyRule names the rule in the audit records of this package.
const PolicyRule = "tool-pinning"

// ErrStale is returned by [Keeper.Approve] when the definition the admin
// approved is no longer the one the upstream presents.
var ErrStale = errors.New("the tool's definition changed again")

// Server is the server whose tools are checked.
type Server struct {
	// ID keys the pins: it stays when a server is renamed.
	ID   string
	Name string
	// Pin is the server's pin_definitions: false lets definitions change
	// freely (the pins then follow them, so turning pinning back on trusts
	// what the server offers at that moment).
	Pin bool
}

// Options configure a Keeper; nil means defaults.
type Options struct {
	Logger *slog.Logger
	// Events receives EventChanged, EventRestored and EventApproved.
	Events *telemetry.Bus
	// Audit, if set, is given an operation record per change, restoration
	// and approval.
	Audit func(audit.Record)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Keeper checks discovered tools against their pins. Safe for concurrent
// use.
type Keeper struct {
	db     *store.DB
	logger *slog.Logger
	events *telemetry.Bus
	audit  func(audit.Record)
	now    func() time.Time

	mu   sync.Mutex
	last map[string]map[string]store.ToolPin // server id → original name → last pin read
}

// New returns a Keeper storing pins in db.
func New(db *store.DB, opts *Options) *Keeper {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Audit == nil {
		o.Audit = func(audit.Record) {}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Keeper{db: db, logger: o.Logger, events: o.Events, audit: o.Audit, now: o.Now,
		last: map[string]map[string]store.ToolPin{}}
}

// Check compares a server's discovered tools with their pins and returns
// the original names of the tools to hold back (see catalog.Entry.Held):
// those whose definition differs from the pinned one. A tool never seen
// before is pinned and served. Each change is announced once (event and
// audit record), as is a return to the pinned definition.
//
// When the store cannot be read, the pins last read are used, so a store
// outage neither releases quarantined tools nor quarantines good ones;
// tools the gateway knows no pin of are then served (and not pinned).
func (k *Keeper) Check(ctx context.Context, srv Server, tools []*mcp.Tool) map[string]bool {
	stored := map[string]store.ToolPin{}
	pins, readErr := k.db.ToolPins(ctx, srv.ID)
	if readErr != nil {
		k.logger.Error("reading tool pins; using the last ones read", "server", srv.Name, "error", readErr)
		k.mu.Lock()
		stored = maps.Clone(k.last[srv.ID])
		k.mu.Unlock()
		if stored == nil {
			stored = map[string]store.ToolPin{}
		}
	}
	for _, p := range pins {
		stored[p.OriginalName] = p
	}
	held := map[string]bool{}
	for _, t := range tools {
		if t == nil || t.Name == "" {
			continue // the catalog rejects it
		}
		cur, err := catalog.PinOf(t)
		if err != nil {
			continue // the catalog rejects it
		}
		p, known := stored[t.Name]
		switch {
		case !known && readErr != nil:
			continue // nothing to compare with, and no way to pin it now
		case !known:
			p = k.pinNew(ctx, srv, t.Name, cur, stored)
		case !srv.Pin && p.Hash != cur.Hash:
			p = k.follow(ctx, srv, t.Name, cur, stored)
		}
		if p.Hash == cur.Hash {
			if p.Changed() {
				k.restored(ctx, srv, t.Name, stored)
			}
			continue
		}
		held[t.Name] = true
		k.changed(ctx, srv, t.Name, p, cur, stored)
	}
	k.mu.Lock()
	k.last[srv.ID] = stored
	k.mu.Unlock()
	return held
}

// pinNew pins a tool seen for the first time and returns the pin stored
// (another replica's, if it was first).
func (k *Keeper) pinNew(ctx context.Context, srv Server, name string, cur catalog.Pin, stored map[string]store.ToolPin) store.ToolPin {
	p, err := k.db.PinTool(ctx, store.ToolPin{ServerID: srv.ID, OriginalName: name, Hash: cur.Hash,
		Definition: cur.Definition, PinnedAt: k.now()})
	if err != nil {
		k.logger.Error("pinning a tool definition", "server", srv.Name, "tool", name, "error", err)
		return store.ToolPin{Hash: cur.Hash}
	}
	k.logger.Debug("tool definition pinned", "server", srv.Name, "tool", name, "hash", short(p.Hash))
	stored[name] = p
	return p
}

// follow re-pins the current definition of a server that does not pin.
func (k *Keeper) follow(ctx context.Context, srv Server, name string, cur catalog.Pin, stored map[string]store.ToolPin) store.ToolPin {
	p, err := k.db.ApproveToolPin(ctx, store.ToolPin{ServerID: srv.ID, OriginalName: name, Hash: cur.Hash,
		Definition: cur.Definition, PinnedAt: k.now()})
	if err != nil {
		k.logger.Warn("following a tool definition (pin_definitions: false)", "server", srv.Name, "tool", name, "error", err)
		return store.ToolPin{Hash: cur.Hash}
	}
	stored[name] = p
	return p
}

// changed records that the upstream presents cur instead of the pinned p,
// and announces it if no replica has yet.
func (k *Keeper) changed(ctx context.Context, srv Server, name string, p store.ToolPin, cur catalog.Pin, stored map[string]store.ToolPin) {
	if p.ChangedHash == cur.Hash {
		return // already recorded and announced
	}
	at := k.now()
	news, err := k.db.NoteToolChange(ctx, srv.ID, name, cur.Hash, cur.Definition, at)
	if err != nil {
		k.logger.Error("recording a tool definition change", "server", srv.Name, "tool", name, "error", err)
		return
	}
	p.ChangedHash, p.ChangedDefinition, p.ChangedAt = cur.Hash, cur.Definition, at
	stored[name] = p
	if !news {
		return
	}
	k.logger.Warn("tool definition changed since it was pinned; tool quarantined until an admin approves it",
		"server", srv.Name, "tool", name, "pinned", short(p.Hash), "now", short(cur.Hash))
	k.publish(EventChanged, map[string]any{"server": srv.Name, "tool": name, "pinned_hash": p.Hash, "current_hash": cur.Hash})
	k.audit(audit.Record{Kind: audit.KindOperation, Operation: OpChanged, Server: srv.Name, Tool: name,
		Success: false, ErrorCode: "tool_definition_changed", PolicyDecision: "DENY", PolicyRule: PolicyRule,
		Error: fmt.Sprintf("server %q changed the definition of tool %q since it was pinned (%s → %s); quarantined until approved",
			srv.Name, name, short(p.Hash), short(cur.Hash)),
		ResultSummary: summary(p.Definition, cur.Definition)})
}

// restored records that the upstream presents the pinned definition again.
func (k *Keeper) restored(ctx context.Context, srv Server, name string, stored map[string]store.ToolPin) {
	news, err := k.db.ClearToolChange(ctx, srv.ID, name)
	if err != nil {
		k.logger.Error("clearing a tool definition change", "server", srv.Name, "tool", name, "error", err)
		return
	}
	p := stored[name]
	p.ChangedHash, p.ChangedDefinition, p.ChangedAt = "", nil, time.Time{}
	stored[name] = p
	if !news {
		return
	}
	k.logger.Info("tool definition is the pinned one again; tool served", "server", srv.Name, "tool", name)
	k.publish(EventRestored, map[string]any{"server": srv.Name, "tool": name, "hash": p.Hash})
	k.audit(audit.Record{Kind: audit.KindOperation, Operation: OpRestored, Server: srv.Name, Tool: name,
		Success: true, PolicyDecision: "ALLOW", PolicyRule: PolicyRule,
		ResultSummary: "the upstream presents the pinned definition " + short(p.Hash) + " again"})
}

// Approval is an admin's approval of a quarantined tool's definition.
type Approval struct {
	Server Server
	// Tool is the held catalog tool; its definition is the one approved.
	Tool catalog.Tool
	// By is who approved (the admin's agent id).
	By string
	// Hash, if set, is the hash of the definition the admin saw: when the
	// upstream has changed it again since, the approval fails with
	// ErrStale rather than approve something unseen.
	Hash string
}

// Approve pins the tool's current definition, recording who approved it,
// and announces it. The caller re-applies the server's discovery so that
// the catalog serves the tool again.
func (k *Keeper) Approve(ctx context.Context, a Approval) (store.ToolPin, error) {
	cur, err := a.Tool.Pin()
	if err != nil {
		return store.ToolPin{}, err
	}
	if a.Hash != "" && a.Hash != cur.Hash {
		return store.ToolPin{}, fmt.Errorf("approving %q: %w: the upstream now presents %s, not %s",
			a.Tool.Name, ErrStale, short(cur.Hash), short(a.Hash))
	}
	prev, err := k.db.ToolPin(ctx, a.Server.ID, a.Tool.OriginalName)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.ToolPin{}, err
	}
	p, err := k.db.ApproveToolPin(ctx, store.ToolPin{ServerID: a.Server.ID, OriginalName: a.Tool.OriginalName,
		Hash: cur.Hash, Definition: cur.Definition, PinnedAt: k.now(), ApprovedBy: a.By})
	if err != nil {
		return store.ToolPin{}, err
	}
	k.mu.Lock()
	if m := k.last[a.Server.ID]; m != nil {
		m[a.Tool.OriginalName] = p
	}
	k.mu.Unlock()
	k.logger.Info("tool definition approved", "server", a.Server.Name, "tool", a.Tool.OriginalName, "by", a.By,
		"was", short(prev.Hash), "now", short(p.Hash))
	k.publish(EventApproved, map[string]any{"server": a.Server.Name, "tool": a.Tool.OriginalName, "name": a.Tool.Name,
		"hash": p.Hash, "previous_hash": prev.Hash, "approved_by": a.By})
	k.audit(audit.Record{Kind: audit.KindOperation, Operation: OpApprove, AgentID: a.By, Server: a.Server.Name,
		Tool: a.Tool.OriginalName, Success: true, PolicyDecision: "ALLOW", PolicyRule: "admin",
		ResultSummary: fmt.Sprintf("approved definition %s of %s (was %s)", short(p.Hash), a.Tool.Name, short(prev.Hash))})
	return p, nil
}

// Pin returns the stored pin of one tool, or an error wrapping
// store.ErrNotFound.
func (k *Keeper) Pin(ctx context.Context, serverID, originalName string) (store.ToolPin, error) {
	return k.db.ToolPin(ctx, serverID, originalName)
}

func (k *Keeper) publish(typ string, data map[string]any) {
	if k.events != nil {
		k.events.Publish(typ, data)
	}
}

// short abbreviates a hash for messages.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	if h == "" {
		return "none"
	}
	return h
}

// summary says which pinned fields changed, for the audit record.
func summary(pinned, current json.RawMessage) string {
	return "changed: " + strings.Join(catalog.ChangedFields(pinned, current), " ")
}
