// Package servers is the server registry: register, remove, rename,
// connect, disconnect, load, reload as a diff; the persistence and sealing
// of definitions; tool manifests and pins. It owns the upstream manager and
// is its sink for discoveries and transitions, which it turns into catalog
// entries, stored tools and connection history.
package servers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/pinning"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Where a server was defined: its source in the store and the API.
const (
	SourceConfig = "config" // the config file
	SourceAPI    = "api"    // registered at run time
)

// storedDef is how a server definition is persisted: API-registered servers
// keep their ${VAR} references unexpanded, so the secret values stay in the
// environment and are resolved at each start.
type storedDef struct {
	*config.Server
	AutoConnect bool `json:"auto_connect"`
}

// record is one server the registry knows.
type record struct {
	id           string
	source       string
	def          *config.Server // as defined (API: unexpanded; config: expanded)
	autoConnect  bool
	registeredAt time.Time
	catalogErr   error // the catalog refused the server's names (collision)
	// startErr says why the server cannot be started at all (a ${VAR} of a
	// stored definition no longer resolves); nil when it can.
	startErr error
	// override replaces the config file's default_access until it is reset
	// (config servers only; nil = none).
	override *store.AccessOverride
}

// access is the default_access in force for the server: its override, else
// its definition's.
func (rec *record) access() string {
	if rec.override != nil {
		return rec.override.DefaultAccess
	}
	return rec.def.DefaultAccess
}

// Options are the registry's collaborators and hooks. Every field is
// optional.
type Options struct {
	Logger *slog.Logger
	// Getenv resolves the ${VAR} references of runtime-registered servers
	// at each start; default os.Getenv.
	Getenv func(string) string
	// Keys encrypts the literal secrets of stored definitions; nil: such a
	// definition is refused.
	Keys *secrets.Keyring
	// Guard refuses servers whose URLs the SSRF policy denies.
	Guard *netguard.Guard
	// RequireTLS refuses the registration of a server reached over plain
	// http:// at a non-loopback host (settings.require_tls_upstreams);
	// false only warns. The config file is checked by config.Parse.
	RequireTLS bool
	Metrics    *telemetry.Metrics
	Series     *telemetry.TimeSeries
	Events     *telemetry.Bus
	// Pins holds back the tools whose definition changed since it was
	// pinned; nil sets entries as discovered.
	Pins *pinning.Keeper
	// ToolVersions is the version compatibility matrix of manifests
	// (tool_versions: of the config); replaced on reload.
	ToolVersions map[string]map[string][]string

	// OnChange is told that the set of servers or their definitions
	// changed (the authorization policy follows their default_access).
	OnChange func()
	// OnRemove is told of a server removed at runtime.
	OnRemove func(name string)
	// OnAnnounced is told of a server's list_changed that changed none of
	// the lists the gateway serves.
	OnAnnounced func(server string, c upstream.ListChanges)
	// OnRename is told of a server renamed at runtime, once the new name
	// is registered (circuit breakers keyed "server:tool" follow it).
	OnRename func(ctx context.Context, from, to string)
	// Publish tells the other replicas that kind ("servers", "pins")
	// changed, after a change made through the API.
	Publish func(kind, key string)
	// Operation audits an administrative action that failed.
	Operation func(ctx context.Context, op, server, detail string, err error)
}

// Registry ties the upstream supervisors, the catalog and the store
// together: it is the API's view of servers and the upstreams' sink for
// discoveries and transitions. It owns the upstream manager.
type Registry struct {
	db  *store.DB
	ups *upstream.Manager
	cat *catalog.Catalog
	o   Options
	// logger is o.Logger, used everywhere.
	logger *slog.Logger
	pins   *pinGate // nil: no pinning

	ctx context.Context // cancelled on close; background connects use it
	wg  sync.WaitGroup  // background connects

	reloadMu sync.Mutex // one reload at a time

	mu      sync.RWMutex
	servers map[string]*record // by name
	// toolVersions is Options.ToolVersions, replaced on reload; under mu.
	toolVersions map[string]map[string][]string

	manifests manifests
}

// New builds the registry and the upstream manager it feeds from up (whose
// OnTransition and OnDiscovery it sets). Background connects live as long
// as ctx. Nothing is loaded until Load.
func New(ctx context.Context, db *store.DB, cat *catalog.Catalog, up *upstream.Options, opts *Options) *Registry {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Events == nil {
		o.Events = telemetry.NewBus()
	}
	r := &Registry{db: db, cat: cat, o: o, logger: o.Logger, ctx: ctx, servers: map[string]*record{}, toolVersions: o.ToolVersions}
	if o.Pins != nil {
		r.pins = &pinGate{keeper: o.Pins}
	}
	var uo upstream.Options
	if up != nil {
		uo = *up
	}
	uo.OnTransition, uo.OnDiscovery = r.onTransition, r.onDiscovery
	r.ups = upstream.NewManager(&uo)
	return r
}

// Upstreams is the upstream manager the registry feeds.
func (r *Registry) Upstreams() *upstream.Manager { return r.ups }

// publish tells the other replicas of a change made here.
func (r *Registry) publish(kind, key string) {
	if r.o.Publish != nil {
		r.o.Publish(kind, key)
	}
}

// onTransition persists a status change and flips the availability of the
// server's catalog items.
func (r *Registry) onTransition(t upstream.Transition) {
	r.o.Events.Publish("server.status_changed", map[string]any{"server": t.Server, "from": t.From, "to": t.To, "error": t.Error, "at": t.At})
	// A server started on demand is DISCONNECTED yet callable: its tools
	// stay listed, and the first call starts it.
	r.cat.SetAvailable(t.Server, t.Callable)
	if r.o.Metrics != nil {
		r.o.Metrics.SetState(t.Server, string(t.To))
		if st, err := r.ups.Status(t.Server); err == nil {
			r.o.Metrics.Restarts(t.Server, st.Restarts)
		}
	}
	rec := r.lookup(t.Server)
	if rec == nil {
		return
	}
	ev := &store.ConnectionEvent{ServerID: rec.id, ServerName: t.Server, FromStatus: string(t.From),
		ToStatus: string(t.To), Error: t.Error, At: t.At}
	// The transition happened whether or not we manage to record it.
	if err := r.db.AppendConnectionEvent(context.WithoutCancel(r.ctx), ev); err != nil {
		r.logger.Warn("recording connection history", "server", t.Server, "error", err)
	}
	if t.To == upstream.StateError {
		r.logger.Warn("upstream failed", "server", t.Server, "from", t.From, "reason", t.Error)
	} else {
		r.logger.Info("upstream status", "server", t.Server, "from", t.From, "to", t.To)
	}
}

// onDiscovery puts what a server offers into the catalog and the store.
func (r *Registry) onDiscovery(d upstream.Discovery) {
	rec := r.lookup(d.Server)
	if rec == nil {
		return
	}
	st, _ := r.ups.Status(d.Server)
	beforeSnap := r.cat.Snapshot()
	before := beforeSnap.ServerTools(d.Server)
	defer func() {
		// The server said a list changed, and the lists the gateway serves
		// did not: say so downstream all the same, as the server would to
		// a client of its own (clients re-list; nothing is lost).
		if d.Announced.Any() && r.cat.Snapshot().Version() == beforeSnap.Version() && r.o.OnAnnounced != nil {
			r.o.OnAnnounced(d.Server, d.Announced)
		}
	}()
	rejected, err := r.setCatalog(rec, catalog.Entry{
		Server:    d.Server,
		Prefix:    rec.def.Prefix,
		Available: st.State == upstream.StateConnected || st.State == upstream.StateDegraded,
		Tools:     d.Tools,
		Resources: d.Resources,
		Templates: d.Templates,
		Prompts:   d.Prompts,
	})
	r.mu.Lock()
	rec.catalogErr = err
	r.mu.Unlock()
	if err != nil {
		r.logger.Error("server not added to the catalog", "server", d.Server, "error", err)
		return
	}
	for _, rj := range rejected {
		r.logger.Warn("item rejected", "server", d.Server, "kind", rj.Kind, "name", rj.OriginalName, "reason", rj.Reason)
	}
	known := make(map[string]bool, len(before))
	for _, t := range before {
		known[t.Name] = true
	}
	for _, t := range r.cat.Snapshot().ServerTools(d.Server) {
		if !known[t.Name] {
			r.o.Events.Publish("tool.registered", map[string]any{"server": d.Server, "tool": t.Name, "original_name": t.OriginalName})
		}
	}
	r.o.Events.Publish("server.discovered", map[string]any{"server": d.Server,
		"tools": len(r.cat.Snapshot().ServerTools(d.Server)), "rejected": len(rejected),
		"resources": len(d.Resources), "prompts": len(d.Prompts)})
	r.logger.Info("discovered", "server", d.Server, "tools", len(r.cat.Snapshot().ServerTools(d.Server)),
		"rejected", len(rejected), "resources", len(d.Resources), "prompts", len(d.Prompts))
	r.persistTools(rec.id, d, rejected)
}

func (r *Registry) persistTools(serverID string, d upstream.Discovery, rejected []catalog.Rejected) {
	snap := r.cat.Snapshot()
	why := map[string]string{}
	for _, rj := range rejected {
		if rj.Kind == catalog.KindTool {
			why[rj.OriginalName] = rj.Reason
		}
	}
	now := time.Now()
	rows := make([]*store.Tool, 0, len(d.Tools))
	for _, t := range d.Tools {
		if t == nil {
			continue
		}
		def, _ := json.Marshal(t)
		row := &store.Tool{ServerID: serverID, OriginalName: t.Name, Description: t.Description,
			Definition: def, IsExternal: true, Valid: true, DiscoveredAt: now}
		if reason, bad := why[t.Name]; bad {
			row.Valid, row.RejectReason, row.Name = false, reason, t.Name
		} else if ct, ok := snap.ToolByOriginal(d.Server, t.Name); ok {
			row.Name = ct.Name
		} else {
			row.Name = t.Name
		}
		rows = append(rows, row)
	}
	if err := r.db.ReplaceServerTools(context.WithoutCancel(r.ctx), serverID, rows); err != nil {
		r.logger.Warn("persisting tools", "server", d.Server, "error", err)
	}
}

func (r *Registry) lookup(name string) *record {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.servers[name]
}

// find resolves an id or a name.
func (r *Registry) find(idOrName string) (*record, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if rec, ok := r.servers[idOrName]; ok {
		return rec, nil
	}
	for _, rec := range r.servers {
		if rec.id == idOrName {
			return rec, nil
		}
	}
	return nil, &api.Error{Status: http.StatusNotFound, Code: api.CodeServerNotFound,
		Message: fmt.Sprintf("server %q not found", idOrName)}
}

// Load registers the config file's servers and the API-registered servers
// kept in the store, restoring each one's last known tools as unavailable.
// It returns the servers to start.
func (r *Registry) Load(ctx context.Context, cfg *config.Config) ([]string, error) {
	stored, err := r.db.ListServers(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing stored servers: %w", err)
	}
	inFile := map[string]bool{}
	var start []string
	for _, def := range cfg.Servers {
		inFile[def.Name] = true
		auto, err := r.addConfigServer(ctx, def, cfg.Settings)
		if err != nil {
			return nil, err
		}
		if auto {
			start = append(start, def.Name)
		}
	}
	for _, s := range stored {
		switch {
		case s.Source == SourceConfig && !inFile[s.Name]:
			// Removed from the file since the last run.
			if err := r.db.DeleteServer(ctx, s.ID); err != nil {
				r.logger.Warn("forgetting server removed from config", "server", s.Name, "error", err)
			}
			continue
		case s.Source == SourceConfig:
			continue
		case inFile[s.Name]:
			r.logger.Warn("server defined both in the config file and through the API; the file wins", "server", s.Name)
			continue
		}
		rec, err := r.addStored(ctx, s)
		if err != nil {
			return nil, err
		}
		if rec != nil && rec.autoConnect && rec.startErr == nil {
			start = append(start, s.Name)
		}
	}
	return start, nil
}

// addStored registers an API-registered server read from the store. A
// definition that cannot be read is skipped (nil record); one whose
// secrets cannot be resolved is registered with the reason and not started.
func (r *Registry) addStored(ctx context.Context, s *store.Server) (*record, error) {
	sd, err := r.decodeDef(s.Config)
	if err != nil {
		r.logger.Error("stored server definition unreadable; skipping", "server", s.Name, "error", err)
		return nil, nil
	}
	sd.Server.Name = s.Name
	rec := &record{id: s.ID, source: SourceAPI, def: sd.Server, autoConnect: sd.AutoConnect, registeredAt: s.CreatedAt}
	expanded, err := r.expand(sd.Server)
	if err != nil {
		// Registered, listed with the reason, never started with
		// unresolved secrets.
		r.logger.Error("stored server cannot start", "server", s.Name, "error", err)
		rec.startErr = fmt.Errorf("cannot start: %w", err)
		expanded = sd.Server.Redacted()
	}
	if err := r.add(ctx, rec, expanded); err != nil {
		return nil, err
	}
	return rec, nil
}

// decodeDef reads a stored definition.
func (r *Registry) decodeDef(raw []byte) (storedDef, error) {
	var sd storedDef
	if err := json.Unmarshal(raw, &sd); err != nil {
		return sd, err
	}
	if sd.Server == nil {
		return sd, errors.New("no server definition")
	}
	return sd, r.unseal(sd.Server)
}

// encodeDef is the stored form of a runtime-registered definition, its
// literal secrets sealed.
func (r *Registry) encodeDef(def *config.Server, auto bool) ([]byte, error) {
	sealed, err := r.seal(def)
	if err != nil {
		return nil, err
	}
	return json.Marshal(storedDef{Server: sealed, AutoConnect: auto})
}

// seal returns a copy of def whose literal header and env values (secrets
// a ${VAR} reference does not keep out of the store) are encrypted with the
// keyring; the env entries def.PlainEnv names are settings, stored as they
// are. Without a keyring such a definition is refused: the store would
// hold the secret in plaintext.
//
// A value that merely looks sealed is a literal like any other: decodeDef
// opens every sealed-looking value it reads back, so storing one as it is
// would make the definition unreadable (and the server vanish at the next
// start), or hand the server something else than what was registered.
func (r *Registry) seal(def *config.Server) (*config.Server, error) {
	cp := def.Clone()
	for i, m := range []map[string]string{cp.Headers, cp.Env} {
		for k, v := range m {
			looksSealed := secrets.IsSealed(v)
			plain := i == 1 && slices.Contains(cp.PlainEnv, k)
			if !(secrets.NeedsSealing(v) || looksSealed) || (plain && !looksSealed) {
				continue
			}
			if r.o.Keys == nil {
				return nil, &api.Error{Status: http.StatusUnprocessableEntity, Code: api.CodeValidation,
					Message: fmt.Sprintf("server %q has a literal secret value (%q): refusing to store it in plaintext. "+
						"Reference an environment variable instead (\"${VAR}\"), or configure a secret key so the gateway encrypts it: %v",
						def.Name, k, secrets.ErrNoKey)}
			}
			sealed, err := r.o.Keys.Seal(v)
			if err != nil {
				return nil, fmt.Errorf("encrypting %q of server %q: %w", k, def.Name, err)
			}
			m[k] = sealed
		}
	}
	return cp, nil
}

// unseal decrypts def's sealed values in place.
func (r *Registry) unseal(def *config.Server) error {
	for _, m := range []map[string]string{def.Headers, def.Env} {
		for k, v := range m {
			if !secrets.IsSealed(v) {
				continue
			}
			if r.o.Keys == nil {
				return fmt.Errorf("%q is encrypted and no secret key is configured: %w", k, secrets.ErrNoKey)
			}
			plain, _, err := r.o.Keys.Open(v)
			if err != nil {
				return fmt.Errorf("decrypting %q: %w", k, err)
			}
			m[k] = plain
		}
	}
	return nil
}

// SyncFromStore brings the runtime-registered servers in line with the
// store, where another replica may have added, removed, renamed or changed
// some. Servers from the config file are every replica's own.
func (r *Registry) SyncFromStore(ctx context.Context) error {
	stored, err := r.db.ListServers(ctx)
	if err != nil {
		return err
	}
	byID := map[string]*store.Server{}
	for _, s := range stored {
		if s.Source == SourceAPI {
			byID[s.ID] = s
		}
	}
	current := map[string]*record{}
	r.mu.RLock()
	for _, rec := range r.servers {
		if rec.source == SourceAPI {
			current[rec.id] = rec
		}
	}
	r.mu.RUnlock()
	for id, rec := range current {
		s, ok := byID[id]
		if ok {
			sd, err := r.decodeDef(s.Config)
			if err == nil {
				sd.Server.Name = s.Name
			}
			if err == nil && s.Name == rec.def.Name && sameDefinition(rec.def, sd.Server) && sd.AutoConnect == rec.autoConnect {
				delete(byID, id) // unchanged
				continue
			}
		}
		if err := r.forgetLocal(ctx, rec); err != nil {
			return err
		}
	}
	for _, s := range byID {
		rec, err := r.addStored(ctx, s)
		if err != nil {
			return err
		}
		if rec != nil && rec.autoConnect && rec.startErr == nil {
			r.connectInBackground(rec.def.Name)
		}
	}
	return r.syncOverrides(ctx)
}

// syncOverrides brings the default_access overrides of the config file's
// servers in line with the store, where another replica may have set or
// reset one.
func (r *Registry) syncOverrides(ctx context.Context) error {
	overrides, err := r.db.AccessOverrides(ctx)
	if err != nil {
		return err
	}
	changed := false
	r.mu.Lock()
	for name, rec := range r.servers {
		if rec.source != SourceConfig {
			continue
		}
		o, has := overrides[rec.id]
		if (rec.override == nil && !has) || (rec.override != nil && has && *rec.override == o) {
			continue
		}
		// Records are read without the lock: publish a new one, never edit.
		next := *rec
		next.override = nil
		if has {
			next.override = &o
		}
		r.servers[name] = &next
		changed = true
	}
	r.mu.Unlock()
	if changed {
		r.changed()
	}
	return nil
}

// addConfigServer persists and registers a server of the config file and
// reports whether it starts automatically.
func (r *Registry) addConfigServer(ctx context.Context, def *config.Server, settings config.Settings) (bool, error) {
	rec, err := r.configRecord(ctx, r.db, def, settings)
	if err != nil {
		return false, err
	}
	if err := r.add(ctx, rec, def); err != nil {
		return false, err
	}
	_ = r.checkTransport(def) // the file passed config.Parse: this only warns
	return rec.autoConnect, nil
}

// configRecord stores a config file server's row (created or updated; its
// id stays) and returns its record, with its default_access override.
func (r *Registry) configRecord(ctx context.Context, db *store.DB, def *config.Server, settings config.Settings) (*record, error) {
	auto := def.AutoStartOr(settings.AutoStartDefault)
	row := &store.Server{Name: def.Name, Source: SourceConfig, Transport: def.Transport, Description: def.Description}
	// Config servers are defined by the file; the store keeps a redacted
	// copy for history and ids only.
	row.Config, _ = json.Marshal(storedDef{Server: def.Redacted(), AutoConnect: auto})
	if err := db.UpsertServer(ctx, row); err != nil {
		return nil, fmt.Errorf("storing server %q: %w", def.Name, err)
	}
	rec := &record{id: row.ID, source: SourceConfig, def: def, autoConnect: auto, registeredAt: row.CreatedAt}
	switch o, err := db.AccessOverride(ctx, row.ID); {
	case err == nil:
		rec.override = &o
		if o.DefaultAccess != def.DefaultAccess {
			r.logger.Info("default_access overridden at run time", "server", def.Name, "file", def.DefaultAccess,
				"override", o.DefaultAccess, "set_by", o.SetBy, "set_at", o.SetAt)
		}
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("reading the default_access override of %q: %w", def.Name, err)
	}
	return rec, nil
}

// checkTransport warns of a server reached over plain http:// at a
// non-loopback host, or refuses it when settings.require_tls_upstreams is
// set. The warning is logged at each registration (and each start, for
// the config file's servers); the server's status carries
// insecure_transport for as long as it is registered.
func (r *Registry) checkTransport(def *config.Server) error {
	if !def.InsecureTransport() {
		return nil
	}
	if r.o.RequireTLS {
		return config.Errors{{Field: "servers." + def.Name + ".url", Msg: config.InsecureTransportRefused}}
	}
	r.logger.Warn("upstream reached over plain http:// at a non-loopback host: its traffic and credentials cross the "+
		"network unencrypted; use https://, or set settings.require_tls_upstreams to refuse such servers",
		"server", def.Name)
	return nil
}

// sameDefinition compares two server definitions, secrets included (in
// memory only), positions in the file excluded.
func sameDefinition(a, b *config.Server) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// forget stops a server and removes it from the catalog, the registry and
// the store.
func (r *Registry) forget(ctx context.Context, rec *record) error {
	if err := r.forgetLocal(ctx, rec); err != nil {
		return err
	}
	if err := r.db.DeleteServer(ctx, rec.id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// forgetLocal stops a server and removes it from the catalog and the
// registry, leaving the store alone (another replica removed it there).
func (r *Registry) forgetLocal(ctx context.Context, rec *record) error {
	if err := r.ups.Remove(ctx, rec.def.Name); err != nil && !errors.Is(err, upstream.ErrNotFound) {
		return err
	}
	r.cat.Remove(rec.def.Name)
	r.mu.Lock()
	delete(r.servers, rec.def.Name)
	r.mu.Unlock()
	r.changed()
	if r.o.OnRemove != nil {
		r.o.OnRemove(rec.def.Name)
	}
	if r.o.Metrics != nil {
		r.o.Metrics.Forget(rec.def.Name)
	}
	if r.o.Series != nil {
		r.o.Series.Forget(rec.def.Name)
	}
	r.o.Events.Publish("server.removed", map[string]any{"server": rec.def.Name, "id": rec.id})
	return nil
}

// add registers rec with the upstream manager and restores its last known
// tools (unavailable until it connects).
func (r *Registry) add(ctx context.Context, rec *record, expanded *config.Server) error {
	if err := r.ups.Add(expanded); err != nil {
		return fmt.Errorf("adding upstream %q: %w", rec.def.Name, err)
	}
	r.mu.Lock()
	r.servers[rec.def.Name] = rec
	r.mu.Unlock()
	r.changed()
	r.restoreTools(ctx, rec, false)
	return nil
}

// restoreTools sets the server's last known tools (as stored at its last
// discovery) in the catalog.
func (r *Registry) restoreTools(ctx context.Context, rec *record, available bool) {
	rows, err := r.db.ListTools(ctx, rec.id)
	if err != nil {
		r.logger.Warn("loading last known tools", "server", rec.def.Name, "error", err)
		return
	}
	var tools []*mcp.Tool
	for _, row := range rows {
		if !row.Valid {
			continue
		}
		var t mcp.Tool
		if json.Unmarshal(row.Definition, &t) == nil {
			tools = append(tools, &t)
		}
	}
	if len(tools) > 0 {
		if _, err := r.setCatalog(rec, catalog.Entry{Server: rec.def.Name, Prefix: rec.def.Prefix, Available: available, Tools: tools}); err != nil {
			r.logger.Warn("restoring last known tools", "server", rec.def.Name, "error", err)
		}
	}
}

// changed tells onChange that the servers changed.
func (r *Registry) changed() {
	if r.o.OnChange != nil {
		r.o.OnChange()
	}
}

// ServerForPrefix is the server whose tools are namespaced with prefix
// (its name unless it sets another prefix); prefix itself when none is.
func (r *Registry) ServerForPrefix(prefix string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, ok := r.servers[prefix]; ok {
		return prefix
	}
	for name, rec := range r.servers {
		if rec.def.Prefix != nil && *rec.def.Prefix == prefix {
			return name
		}
	}
	return prefix
}

// DefaultAccess is every server's default_access in force ("allow" or
// "deny"), overrides included.
func (r *Registry) DefaultAccess() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m := make(map[string]string, len(r.servers))
	for name, rec := range r.servers {
		if a := rec.access(); a != "" {
			m[name] = a
		}
	}
	return m
}

// expand resolves ${VAR} references of a copy of def; def keeps them.
func (r *Registry) expand(def *config.Server) (*config.Server, error) {
	cp := def.Clone()
	if err := cp.Expand(r.o.Getenv); err != nil {
		return nil, err
	}
	return cp, nil
}

// ConnectAll connects the named servers concurrently and returns when every
// attempt has finished, successful or not.
func (r *Registry) ConnectAll(ctx context.Context, names []string) {
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			if err := r.ups.Connect(ctx, n); err != nil {
				r.logger.Warn("auto-start failed", "server", n, "error", err)
			}
		})
	}
	wg.Wait()
}

// connectInBackground starts a connect owned by the registry (waited for in
// close).
func (r *Registry) connectInBackground(name string) {
	r.wg.Go(func() {
		if err := r.ups.Connect(r.ctx, name); err != nil {
			r.logger.Warn("connect failed", "server", name, "error", err)
		}
	})
}

// Close waits for the background connects; cancel the context given to New
// first.
func (r *Registry) Close() { r.wg.Wait() }

// --- api.Servers ---

func (r *Registry) List(ctx context.Context) ([]api.Server, error) {
	r.mu.RLock()
	recs := make([]*record, 0, len(r.servers))
	for _, rec := range r.servers {
		recs = append(recs, rec)
	}
	r.mu.RUnlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].def.Name < recs[j].def.Name })
	snap := r.cat.Snapshot()
	out := make([]api.Server, 0, len(recs))
	for _, rec := range recs {
		out = append(out, r.view(rec, snap))
	}
	return out, nil
}

func (r *Registry) Get(ctx context.Context, idOrName string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	return r.view(rec, r.cat.Snapshot()), nil
}

func (r *Registry) Register(ctx context.Context, def *config.Server, autoConnect bool) (api.Server, error) {
	if err := def.NormalizeCommand(); err != nil {
		return api.Server{}, err
	}
	if err := config.ValidateServer(def); err != nil {
		return api.Server{}, err
	}
	if r.lookup(def.Name) != nil {
		return api.Server{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
			Message: fmt.Sprintf("server %q already exists", def.Name)}
	}
	expanded, err := r.expand(def)
	if err != nil {
		return api.Server{}, err
	}
	if err := r.checkOutbound(ctx, expanded); err != nil {
		return api.Server{}, err
	}
	if err := r.checkTransport(expanded); err != nil {
		return api.Server{}, err
	}
	row := &store.Server{Name: def.Name, Source: SourceAPI, Transport: def.Transport, Description: def.Description}
	row.Config, err = r.encodeDef(def, autoConnect)
	if err != nil {
		return api.Server{}, err
	}
	if err := r.db.CreateServer(ctx, row); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return api.Server{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
				Message: fmt.Sprintf("server %q already exists", def.Name)}
		}
		return api.Server{}, err
	}
	rec := &record{id: row.ID, source: SourceAPI, def: def, autoConnect: autoConnect, registeredAt: row.CreatedAt}
	if err := r.add(ctx, rec, expanded); err != nil {
		_ = r.db.DeleteServer(context.WithoutCancel(ctx), row.ID) // undo; the add error is what matters
		return api.Server{}, err
	}
	v := r.view(rec, r.cat.Snapshot())
	r.o.Events.Publish("server.registered", map[string]any{"server": def.Name, "id": rec.id})
	r.publish("servers", "")
	if autoConnect {
		r.connectInBackground(def.Name)
		v.Status = string(upstream.StateConnecting)
	}
	return v, nil
}

func (r *Registry) Remove(ctx context.Context, idOrName string) error {
	rec, err := r.find(idOrName)
	if err != nil {
		return err
	}
	if rec.source == SourceConfig {
		return &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
			Message: fmt.Sprintf("server %q is defined in the config file; remove it there", rec.def.Name)}
	}
	if err := r.forget(ctx, rec); err != nil {
		return err
	}
	r.publish("servers", "")
	return nil
}

// Logs returns the last stderr lines of a stdio server.
func (r *Registry) Logs(_ context.Context, idOrName string, max int) ([]string, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return nil, err
	}
	lines := r.ups.Stderr(rec.def.Name)
	if len(lines) > max {
		lines = lines[len(lines)-max:]
	}
	return lines, nil
}

// SetDefaultAccess changes a server's default_access without restarting
// it; the authorization policy follows at once. A runtime-registered
// server's stored definition changes. A config-file server gets an
// override, kept in the store (so it survives restarts and reaches every
// replica) and shown as overriding the file until ResetDefaultAccess.
func (r *Registry) SetDefaultAccess(ctx context.Context, idOrName, access string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	if rec.source == SourceConfig {
		id, _ := authz.IdentityFrom(ctx)
		by := id.AgentID
		if by == "" {
			by = id.ID
		}
		o, err := r.db.SetAccessOverride(ctx, store.AccessOverride{ServerID: rec.id, DefaultAccess: access, SetBy: by})
		if err != nil {
			return api.Server{}, err
		}
		next := r.replace(rec, func(n *record) { n.override = &o })
		r.logger.Info("default_access overridden at run time", "server", rec.def.Name, "file", rec.def.DefaultAccess,
			"override", access, "set_by", by)
		r.changed()
		r.publish("servers", "")
		return r.view(next, r.cat.Snapshot()), nil
	}
	def := rec.def.Clone()
	def.DefaultAccess = access
	cfgJSON, err := r.encodeDef(def, rec.autoConnect)
	if err != nil {
		return api.Server{}, err
	}
	// RenameServer to the same name rewrites the stored definition.
	if err := r.db.RenameServer(ctx, rec.id, def.Name, cfgJSON); err != nil {
		return api.Server{}, err
	}
	// Records are read without the lock: publish a new one, never edit.
	next := *rec
	next.def = def
	r.mu.Lock()
	r.servers[def.Name] = &next
	r.mu.Unlock()
	r.changed()
	r.publish("servers", "")
	return r.view(&next, r.cat.Snapshot()), nil
}

// ResetDefaultAccess drops a config-file server's default_access override:
// the file's value applies again, at once.
func (r *Registry) ResetDefaultAccess(ctx context.Context, idOrName string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	if rec.source != SourceConfig {
		return api.Server{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
			Message: fmt.Sprintf("server %q was registered through the API: its default_access is its definition's, with no config file value to return to; change it with PATCH", rec.def.Name)}
	}
	if _, err := r.db.ClearAccessOverride(ctx, rec.id); err != nil {
		return api.Server{}, err
	}
	next := rec
	if rec.override != nil {
		next = r.replace(rec, func(n *record) { n.override = nil })
		r.logger.Info("default_access override reset", "server", rec.def.Name, "file", rec.def.DefaultAccess)
		r.changed()
	}
	r.publish("servers", "")
	return r.view(next, r.cat.Snapshot()), nil
}

// replace publishes a copy of rec changed by edit in rec's place (records
// are read without the lock: never edit one) and returns it.
func (r *Registry) replace(rec *record, edit func(*record)) *record {
	next := *rec
	edit(&next)
	r.mu.Lock()
	if r.servers[rec.def.Name] == rec {
		r.servers[rec.def.Name] = &next
	}
	r.mu.Unlock()
	return &next
}

// Rename gives a runtime-registered server a new name: its tools' namespaced
// names follow (AG-US7 AC6), its id and history stay. A connected server is
// restarted under its new name.
func (r *Registry) Rename(ctx context.Context, idOrName, newName string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	old := rec.def.Name
	if newName == old {
		return r.view(rec, r.cat.Snapshot()), nil
	}
	if rec.source == SourceConfig {
		return api.Server{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
			Message: fmt.Sprintf("server %q is defined in the config file; rename it there", old)}
	}
	def := rec.def.Clone()
	def.Name = newName
	if err := config.ValidateServer(def); err != nil {
		return api.Server{}, err
	}
	if r.lookup(newName) != nil {
		return api.Server{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
			Message: fmt.Sprintf("server %q already exists", newName)}
	}
	expanded, err := r.expand(def)
	if err != nil {
		return api.Server{}, err
	}
	cfgJSON, err := r.encodeDef(def, rec.autoConnect)
	if err != nil {
		return api.Server{}, err
	}
	if err := r.db.RenameServer(ctx, rec.id, newName, cfgJSON); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return api.Server{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
				Message: fmt.Sprintf("server %q already exists", newName)}
		}
		return api.Server{}, err
	}
	st, _ := r.ups.Status(old)
	active := st.State == upstream.StateConnected || st.State == upstream.StateDegraded || st.State == upstream.StateConnecting
	if err := r.ups.Remove(ctx, old); err != nil && !errors.Is(err, upstream.ErrNotFound) {
		return api.Server{}, err
	}
	r.cat.Remove(old)
	r.mu.Lock()
	delete(r.servers, old)
	r.mu.Unlock()
	if r.o.OnRemove != nil {
		r.o.OnRemove(old)
	}
	next := &record{id: rec.id, source: rec.source, def: def, autoConnect: rec.autoConnect, registeredAt: rec.registeredAt}
	if err := r.add(ctx, next, expanded); err != nil {
		return api.Server{}, err
	}
	if r.o.OnRename != nil {
		r.o.OnRename(ctx, old, newName)
	}
	v := r.view(next, r.cat.Snapshot())
	if active {
		r.connectInBackground(newName)
		v.Status = string(upstream.StateConnecting)
	}
	r.publish("servers", "")
	return v, nil
}

func (r *Registry) Connect(ctx context.Context, idOrName string, wait bool) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	if rec.startErr != nil {
		return api.Server{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
			Message: fmt.Sprintf("server %q %v", rec.def.Name, rec.startErr)}
	}
	if !wait {
		r.connectInBackground(rec.def.Name)
		v := r.view(rec, r.cat.Snapshot())
		if v.Status != string(upstream.StateConnected) {
			v.Status = string(upstream.StateConnecting)
		}
		return v, nil
	}
	// The outcome (CONNECTED or ERROR with its reason) is in the view.
	_ = r.ups.Connect(ctx, rec.def.Name)
	return r.view(rec, r.cat.Snapshot()), nil
}

func (r *Registry) Disconnect(ctx context.Context, idOrName string) (api.Server, int, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, 0, err
	}
	pending, err := r.ups.Disconnect(ctx, rec.def.Name)
	if err != nil {
		return api.Server{}, 0, err
	}
	return r.view(rec, r.cat.Snapshot()), pending, nil
}

// Discover re-lists a connected server now; the catalog follows through
// onDiscovery.
func (r *Registry) Discover(ctx context.Context, idOrName string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	if _, err := r.ups.Rediscover(ctx, rec.def.Name); err != nil {
		return api.Server{}, err
	}
	return r.view(rec, r.cat.Snapshot()), nil
}

func (r *Registry) History(ctx context.Context, idOrName string, limit int) ([]api.ConnectionEvent, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return nil, err
	}
	evs, err := r.db.ListConnectionEvents(ctx, rec.id, limit)
	if err != nil {
		return nil, err
	}
	out := make([]api.ConnectionEvent, 0, len(evs))
	for _, e := range evs {
		out = append(out, api.ConnectionEvent{From: e.FromStatus, To: e.ToStatus, Error: e.Error, At: e.At})
	}
	return out, nil
}

func (r *Registry) Capabilities(ctx context.Context, idOrName string) (api.Capabilities, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Capabilities{}, err
	}
	name := rec.def.Name
	st, err := r.ups.Status(name)
	if err != nil {
		return api.Capabilities{}, err
	}
	c := api.Capabilities{Server: name, Status: string(st.State), ServerInfo: st.ServerInfo,
		ProtocolVersion: st.ProtocolVersion, Capabilities: st.Capabilities, Instructions: st.Instructions}
	if d, err := r.ups.Discovery(name); err == nil {
		c.Tools, c.Resources, c.Templates, c.Prompts = len(d.Tools), len(d.Resources), len(d.Templates), len(d.Prompts)
	}
	return c, nil
}

// view renders a server for the API, secrets masked.
func (r *Registry) view(rec *record, snap *catalog.Snapshot) api.Server {
	def := rec.def.Redacted()
	v := api.Server{
		ID:             rec.id,
		Name:           def.Name,
		Description:    def.Description,
		TransportType:  strings.ToUpper(def.Transport),
		Source:         rec.source,
		AutoConnect:    rec.autoConnect,
		HealthCheckURL: def.HealthCheckURL,
		Prefix:         def.Prefix,
		DefaultAccess:  rec.access(),
		PinDefinitions: def.PinDefinitions,
		Auth:           def.Auth,
		Identity:       def.Identity,

		RestartOnFailure:      def.RestartOnFailure,
		MaxRestartAttempts:    def.MaxRestartAttempts,
		StartupTimeoutSeconds: def.StartupTimeout.Duration().Seconds(),
		RegisteredAt:          rec.registeredAt,
		Status:                string(upstream.StateDisconnected),
		// rec.def, not the redacted copy: redaction may rewrite the URL.
		InsecureTransport: rec.def.InsecureTransport(),
	}
	if def.PerUser() {
		v.Credentials, v.UserSessionIdleSeconds = def.Credentials, def.UserSessionIdle.Duration().Seconds()
	}
	switch {
	case rec.override != nil:
		v.DefaultAccessSource, v.FileDefaultAccess = "override", def.DefaultAccess
		at := rec.override.SetAt
		v.DefaultAccessSetAt, v.DefaultAccessSetBy = &at, rec.override.SetBy
	case rec.source == SourceConfig:
		v.DefaultAccessSource = SourceConfig
	default:
		v.DefaultAccessSource = SourceAPI
	}
	cc := map[string]any{}
	switch def.Transport {
	case "stdio":
		cc["command"] = def.Command
		cc["args"] = nonNil(def.Args)
		if len(def.Env) > 0 {
			cc["env"] = def.Env
		}
		if len(def.EnvPassthrough) > 0 {
			cc["env_passthrough"] = def.EnvPassthrough
		}
		if def.Cwd != "" {
			cc["cwd"] = def.Cwd
		}
	default:
		cc["url"] = def.URL
		if len(def.Headers) > 0 {
			cc["headers"] = def.Headers
		}
		if len(def.HeadersFromEnv) > 0 {
			cc["headers_from_env"] = def.HeadersFromEnv
		}
		if def.BearerTokenEnvVar != "" {
			cc["bearer_token_env_var"] = def.BearerTokenEnvVar
		}
	}
	v.ConnectionConfig = cc
	if st, err := r.ups.Status(def.Name); err == nil {
		v.Status = string(st.State)
		v.ErrorMessage = st.LastError
		v.StatusDetail = st.Detail
		v.PID = st.PID
		v.ServerInfo = st.ServerInfo
		v.ProtocolVersion = st.ProtocolVersion
		if !st.Since.IsZero() {
			since := st.Since
			v.StatusSince = &since
		}
		if !st.ConnectedAt.IsZero() && (st.State == upstream.StateConnected || st.State == upstream.StateDegraded) {
			at := st.ConnectedAt
			v.ConnectedAt = &at
		}
		if !st.StartedAt.IsZero() {
			at := st.StartedAt
			v.StartedAt = &at
			v.UptimeSeconds = float64(time.Since(at).Milliseconds()) / 1e3
		}
		if !st.NextRestartAt.IsZero() {
			at := st.NextRestartAt
			v.NextRestartAt = &at
		}
		v.Restarts, v.LastExit, v.Draining, v.InFlight, v.StartOnDemand = st.Restarts, st.LastExit, st.Draining, st.InFlight, st.OnDemand
		h := st.Health
		v.Health = &api.Health{Method: h.Method, LastCheckOK: h.LastCheckOK, LastCheckPassive: h.LastCheckPassive,
			LastCheckError: h.LastCheckError, ResponseTimeMS: float64(h.ResponseTime.Microseconds()) / 1e3,
			ConsecutiveFailures: h.ConsecutiveFailures, ChecksTotal: h.ChecksTotal, ChecksFailed: h.ChecksFailed,
			ErrorRate: h.ErrorRate, WindowCalls: h.WindowCalls}
		if !h.LastCheck.IsZero() {
			at := h.LastCheck
			v.Health.LastCheck = &at
		}
	}
	r.mu.RLock()
	cerr := rec.catalogErr
	r.mu.RUnlock()
	if cerr != nil {
		v.Status = string(upstream.StateError)
		v.ErrorMessage = cerr.Error()
	}
	if rec.startErr != nil {
		v.Status = string(upstream.StateError)
		v.ErrorMessage = rec.startErr.Error()
	}
	v.ToolCount = len(snap.ServerTools(def.Name))
	for _, rj := range snap.Rejected(def.Name) {
		v.RejectedTools = append(v.RejectedTools, api.RejectedTool{Name: rj.OriginalName, Kind: string(rj.Kind), Reason: rj.Reason})
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// checkOutbound refuses a server definition registered at runtime whose url
// or health_check_url the guard refuses, before anything is stored or
// started. A host that does not resolve (yet) is accepted: the connect
// checks again, and so does every dial.
func (r *Registry) checkOutbound(ctx context.Context, def *config.Server) error {
	if r.o.Guard == nil || def.Transport == config.TransportStdio {
		return nil
	}
	for _, f := range []struct{ field, url string }{{"url", def.URL}, {"health_check_url", def.HealthCheckURL}} {
		if f.url == "" {
			continue
		}
		if err := r.o.Guard.CheckURL(ctx, f.url); errors.Is(err, netguard.ErrBlocked) {
			return fmt.Errorf("servers.%s.%s: %w", def.Name, f.field, err)
		}
	}
	return nil
}

// Info is what the rest of the gateway needs to know of a registered
// server.
type Info struct {
	ID, Name, Description string
	// Source is SourceConfig or SourceAPI.
	Source string
}

func (rec *record) info() Info {
	return Info{ID: rec.id, Name: rec.def.Name, Description: rec.def.Description, Source: rec.source}
}

// Lookup returns the server registered under name.
func (r *Registry) Lookup(name string) (Info, bool) {
	rec := r.lookup(name)
	if rec == nil {
		return Info{}, false
	}
	return rec.info(), true
}

// Resolve returns the server whose id or name is idOrName.
func (r *Registry) Resolve(idOrName string) (Info, bool) {
	rec, err := r.find(idOrName)
	if err != nil {
		return Info{}, false
	}
	return rec.info(), true
}
