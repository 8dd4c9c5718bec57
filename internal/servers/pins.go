package servers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/pinning"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// pinGate puts tool pinning between discovery and the catalog: every entry
// the registry sets is checked against the pins first, and the tools whose
// definition changed are held back.
type pinGate struct {
	keeper *pinning.Keeper
	// locks serialize check-and-set per server (by id): an approval's
	// re-apply must not interleave with a discovery of the same server.
	locks sync.Map // server id → *sync.Mutex
}

func (g *pinGate) lock(serverID string) func() {
	mu, _ := g.locks.LoadOrStore(serverID, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// pinServer is rec as the pin keeper knows it.
func pinServer(rec *record) pinning.Server {
	return pinning.Server{ID: rec.id, Name: rec.def.Name, Pin: rec.def.PinsDefinitions()}
}

// setCatalog sets a server's catalog entry, holding back the tools whose
// definition differs from the pinned one.
func (r *Registry) setCatalog(rec *record, e catalog.Entry) ([]catalog.Rejected, error) {
	if r.pins == nil {
		return r.cat.Set(e)
	}
	defer r.pins.lock(rec.id)()
	// The check writes pins and records changes: it must finish even if
	// the gateway is shutting down.
	e.Held = r.pins.keeper.Check(context.WithoutCancel(r.ctx), pinServer(rec), e.Tools)
	return r.cat.Set(e)
}

// Reapply sets a server's catalog entry again from its last discovery (or,
// never connected in this process, its last known tools), so that a change
// of its pins (an approval, here or on another replica) takes effect.
func (r *Registry) Reapply(name string) {
	rec := r.lookup(name)
	if rec == nil {
		return
	}
	if d, err := r.ups.Discovery(name); err == nil && d.Server != "" {
		r.onDiscovery(d)
		return
	}
	available := slices.Contains(r.cat.Snapshot().AvailableServers(), name)
	r.restoreTools(context.WithoutCancel(r.ctx), rec, available)
}

// pinRecordOf is the record of a tool's server, for the pin API.
func (r *Registry) pinRecordOf(t catalog.Tool) (*record, error) {
	rec := r.lookup(t.Server)
	if rec == nil || r.pins == nil {
		return nil, &api.Error{Status: http.StatusNotFound, Code: api.CodeServerNotFound,
			Message: fmt.Sprintf("server %q not found", t.Server)}
	}
	return rec, nil
}

// Pinned is the pin of a held-back tool (api.Pins).
func (r *Registry) Pinned(ctx context.Context, t catalog.Tool) (api.PinRecord, error) {
	rec, err := r.pinRecordOf(t)
	if err != nil {
		return api.PinRecord{}, err
	}
	pin, err := r.pins.keeper.Pin(ctx, rec.id, t.OriginalName)
	if errors.Is(err, store.ErrNotFound) {
		return api.PinRecord{}, nil // held by another replica's pin, removed since
	}
	if err != nil {
		return api.PinRecord{}, err
	}
	return pinRecord(pin), nil
}

// Approve pins a held-back tool's new definition and serves it, here and
// on the other replicas (api.Pins).
func (r *Registry) Approve(ctx context.Context, t catalog.Tool, hash, approvedBy string) (api.PinRecord, error) {
	rec, err := r.pinRecordOf(t)
	if err != nil {
		return api.PinRecord{}, err
	}
	pin, err := r.pins.keeper.Approve(ctx, pinning.Approval{Server: pinServer(rec), Tool: t, By: approvedBy, Hash: hash})
	if err != nil {
		// A successful approval is audited by the keeper, with the hashes.
		if r.o.Operation != nil {
			r.o.Operation(ctx, pinning.OpApprove, t.Server, "approving "+t.Name, err)
		}
		if errors.Is(err, pinning.ErrStale) {
			return api.PinRecord{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: err.Error()}
		}
		return api.PinRecord{}, err
	}
	r.Reapply(t.Server)
	r.publish("pins", t.Server)
	return pinRecord(pin), nil
}

func pinRecord(p store.ToolPin) api.PinRecord {
	return api.PinRecord{Hash: p.Hash, Definition: p.Definition, PinnedAt: p.PinnedAt, ApprovedBy: p.ApprovedBy, ChangedAt: p.ChangedAt}
}
