package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

const (
	sourceConfig = "config"
	sourceAPI    = "api"
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

// registry ties the upstream supervisors, the catalog and the store
// together: it is the API's view of servers and the upstreams' sink for
// discoveries and transitions.
type registry struct {
	db     *store.DB
	ups    *upstream.Manager
	cat    *catalog.Catalog
	logger *slog.Logger
	getenv func(string) string

	metrics *telemetry.Metrics
	series  *telemetry.TimeSeries
	events  *telemetry.Bus
	// guard refuses servers whose URLs the SSRF policy denies.
	guard *netguard.Guard
	// requireTLS refuses the registration of a server reached over plain
	// http:// at a non-loopback host (settings.require_tls_upstreams);
	// false only warns. The config file is checked by config.Parse.
	requireTLS bool

	// onRemove is told of a server removed at runtime.
	onRemove func(name string)
	// onAnnounced is told of a server's list_changed that changed none of
	// the lists the gateway serves.
	onAnnounced func(server string, c upstream.ListChanges)
	// onRename is told of a server renamed at runtime, once the new name
	// is registered (circuit breakers keyed "server:tool" follow it).
	onRename func(ctx context.Context, from, to string)
	// keys encrypts the literal secrets of stored definitions; nil when no
	// secret key is configured.
	keys *secrets.Keyring
	// onChange is told that the set of servers or their definitions
	// changed (the authorization policy follows their default_access).
	onChange func()
	// pins holds back the tools whose definition changed since it was
	// pinned; nil sets entries as discovered.
	pins *pinGate

	ctx context.Context // cancelled on close; background connects use it
	wg  sync.WaitGroup  // background connects

	mu      sync.RWMutex
	servers map[string]*record // by name
}

func newRegistry(ctx context.Context, db *store.DB, cat *catalog.Catalog, logger *slog.Logger, getenv func(string) string) *registry {
	return &registry{db: db, cat: cat, logger: logger, getenv: getenv, ctx: ctx, servers: map[string]*record{}}
}

// onTransition persists a status change and flips the availability of the
// server's catalog items.
func (r *registry) onTransition(t upstream.Transition) {
	r.events.Publish("server.status_changed", map[string]any{"server": t.Server, "from": t.From, "to": t.To, "error": t.Error, "at": t.At})
	// A server started on demand is DISCONNECTED yet callable: its tools
	// stay listed, and the first call starts it.
	r.cat.SetAvailable(t.Server, t.Callable)
	if r.metrics != nil {
		r.metrics.SetState(t.Server, string(t.To))
		if st, err := r.ups.Status(t.Server); err == nil {
			r.metrics.Restarts(t.Server, st.Restarts)
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
func (r *registry) onDiscovery(d upstream.Discovery) {
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
		if d.Announced.Any() && r.cat.Snapshot().Version() == beforeSnap.Version() && r.onAnnounced != nil {
			r.onAnnounced(d.Server, d.Announced)
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
			r.events.Publish("tool.registered", map[string]any{"server": d.Server, "tool": t.Name, "original_name": t.OriginalName})
		}
	}
	r.events.Publish("server.discovered", map[string]any{"server": d.Server,
		"tools": len(r.cat.Snapshot().ServerTools(d.Server)), "rejected": len(rejected),
		"resources": len(d.Resources), "prompts": len(d.Prompts)})
	r.logger.Info("discovered", "server", d.Server, "tools", len(r.cat.Snapshot().ServerTools(d.Server)),
		"rejected", len(rejected), "resources", len(d.Resources), "prompts", len(d.Prompts))
	r.persistTools(rec.id, d, rejected)
}

func (r *registry) persistTools(serverID string, d upstream.Discovery, rejected []catalog.Rejected) {
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

func (r *registry) lookup(name string) *record {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.servers[name]
}

// find resolves an id or a name.
func (r *registry) find(idOrName string) (*record, error) {
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

// load registers the config file's servers and the API-registered servers
// kept in the store, restoring each one's last known tools as unavailable.
// It returns the servers to start.
func (r *registry) load(ctx context.Context, cfg *config.Config) ([]string, error) {
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
		case s.Source == sourceConfig && !inFile[s.Name]:
			// Removed from the file since the last run.
			if err := r.db.DeleteServer(ctx, s.ID); err != nil {
				r.logger.Warn("forgetting server removed from config", "server", s.Name, "error", err)
			}
			continue
		case s.Source == sourceConfig:
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
func (r *registry) addStored(ctx context.Context, s *store.Server) (*record, error) {
	sd, err := r.decodeDef(s.Config)
	if err != nil {
		r.logger.Error("stored server definition unreadable; skipping", "server", s.Name, "error", err)
		return nil, nil
	}
	sd.Server.Name = s.Name
	rec := &record{id: s.ID, source: sourceAPI, def: sd.Server, autoConnect: sd.AutoConnect, registeredAt: s.CreatedAt}
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
func (r *registry) decodeDef(raw []byte) (storedDef, error) {
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
func (r *registry) encodeDef(def *config.Server, auto bool) ([]byte, error) {
	sealed, err := r.seal(def)
	if err != nil {
		return nil, err
	}
	return json.Marshal(storedDef{Server: sealed, AutoConnect: auto})
}

// seal returns a copy of def whose literal header and env values (secrets
// a ${VAR} reference does not keep out of the store) are encrypted with the
// keyring; the env entries def.PlainEnv names are settings, stored as they are. Without a keyring such a definition is refused: the store would
// hold the secret in plaintext.
func (r *registry) seal(def *config.Server) (*config.Server, error) {
	cp := def.Clone()
	for i, m := range []map[string]string{cp.Headers, cp.Env} {
		for k, v := range m {
			if !secrets.NeedsSealing(v) || (i == 1 && slices.Contains(cp.PlainEnv, k)) {
				continue
			}
			if r.keys == nil {
				return nil, &api.Error{Status: http.StatusUnprocessableEntity, Code: api.CodeValidation,
					Message: fmt.Sprintf("server %q has a literal secret value (%q): refusing to store it in plaintext. "+
						"Reference an environment variable instead (\"${VAR}\"), or configure a secret key so the gateway encrypts it: %v",
						def.Name, k, secrets.ErrNoKey)}
			}
			sealed, err := r.keys.Seal(v)
			if err != nil {
				return nil, fmt.Errorf("encrypting %q of server %q: %w", k, def.Name, err)
			}
			m[k] = sealed
		}
	}
	return cp, nil
}

// unseal decrypts def's sealed values in place.
func (r *registry) unseal(def *config.Server) error {
	for _, m := range []map[string]string{def.Headers, def.Env} {
		for k, v := range m {
			if !secrets.IsSealed(v) {
				continue
			}
			if r.keys == nil {
				return fmt.Errorf("%q is encrypted and no secret key is configured: %w", k, secrets.ErrNoKey)
			}
			plain, _, err := r.keys.Open(v)
			if err != nil {
				return fmt.Errorf("decrypting %q: %w", k, err)
			}
			m[k] = plain
		}
	}
	return nil
}

// syncFromStore brings the runtime-registered servers in line with the
// store, where another replica may have added, removed, renamed or changed
// some. Servers from the config file are every replica's own.
func (r *registry) syncFromStore(ctx context.Context) error {
	stored, err := r.db.ListServers(ctx)
	if err != nil {
		return err
	}
	byID := map[string]*store.Server{}
	for _, s := range stored {
		if s.Source == sourceAPI {
			byID[s.ID] = s
		}
	}
	current := map[string]*record{}
	r.mu.RLock()
	for _, rec := range r.servers {
		if rec.source == sourceAPI {
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
func (r *registry) syncOverrides(ctx context.Context) error {
	overrides, err := r.db.AccessOverrides(ctx)
	if err != nil {
		return err
	}
	changed := false
	r.mu.Lock()
	for name, rec := range r.servers {
		if rec.source != sourceConfig {
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
func (r *registry) addConfigServer(ctx context.Context, def *config.Server, settings config.Settings) (bool, error) {
	auto := def.AutoStartOr(settings.AutoStartDefault)
	row := &store.Server{Name: def.Name, Source: sourceConfig, Transport: def.Transport, Description: def.Description}
	// Config servers are defined by the file; the store keeps a redacted
	// copy for history and ids only.
	row.Config, _ = json.Marshal(storedDef{Server: def.Redacted(), AutoConnect: auto})
	if err := r.db.UpsertServer(ctx, row); err != nil {
		return false, fmt.Errorf("storing server %q: %w", def.Name, err)
	}
	rec := &record{id: row.ID, source: sourceConfig, def: def, autoConnect: auto, registeredAt: row.CreatedAt}
	switch o, err := r.db.AccessOverride(ctx, row.ID); {
	case err == nil:
		rec.override = &o
		if o.DefaultAccess != def.DefaultAccess {
			r.logger.Info("default_access overridden at run time", "server", def.Name, "file", def.DefaultAccess,
				"override", o.DefaultAccess, "set_by", o.SetBy, "set_at", o.SetAt)
		}
	case !errors.Is(err, store.ErrNotFound):
		return false, fmt.Errorf("reading the default_access override of %q: %w", def.Name, err)
	}
	if err := r.add(ctx, rec, def); err != nil {
		return false, err
	}
	_ = r.checkTransport(def) // the file passed config.Parse: this only warns
	return auto, nil
}

// checkTransport warns of a server reached over plain http:// at a
// non-loopback host, or refuses it when settings.require_tls_upstreams is
// set. The warning is logged at each registration (and each start, for
// the config file's servers); the server's status carries
// insecure_transport for as long as it is registered.
func (r *registry) checkTransport(def *config.Server) error {
	if !def.InsecureTransport() {
		return nil
	}
	if r.requireTLS {
		return config.Errors{{Field: "servers." + def.Name + ".url", Msg: config.InsecureTransportRefused}}
	}
	r.logger.Warn("upstream reached over plain http:// at a non-loopback host: its traffic and credentials cross the "+
		"network unencrypted; use https://, or set settings.require_tls_upstreams to refuse such servers",
		"server", def.Name)
	return nil
}

// reloadReport says what a reload changed.
type reloadReport struct {
	Added, Removed, Changed, Unchanged []string
}

// reload applies a new config file's servers: new ones are added, removed
// ones stopped and forgotten, changed ones restarted; unchanged ones are not
// touched, so their processes and sessions live on. It returns the servers
// to start.
func (r *registry) reload(ctx context.Context, cfg *config.Config) (reloadReport, []string, error) {
	var rep reloadReport
	r.mu.RLock()
	current := map[string]*record{}
	apiNames := map[string]bool{}
	for name, rec := range r.servers {
		if rec.source == sourceConfig {
			current[name] = rec
		} else {
			apiNames[name] = true
		}
	}
	r.mu.RUnlock()

	next := map[string]*config.Server{}
	for _, def := range cfg.Servers {
		next[def.Name] = def
	}
	for name, rec := range current {
		if _, ok := next[name]; !ok {
			if err := r.forget(ctx, rec); err != nil {
				return rep, nil, err
			}
			rep.Removed = append(rep.Removed, name)
		}
	}
	var start []string
	for _, def := range cfg.Servers {
		rec, exists := current[def.Name]
		auto := def.AutoStartOr(cfg.Settings.AutoStartDefault)
		switch {
		case !exists && apiNames[def.Name]:
			r.logger.Warn("config file adds a server already registered through the API; remove one of them", "server", def.Name)
			continue
		case exists && sameDefinition(rec.def, def) && rec.autoConnect == auto:
			rep.Unchanged = append(rep.Unchanged, def.Name)
			continue
		case exists:
			// Restart under the new definition; the store row (and id) stays.
			if err := r.ups.Remove(ctx, def.Name); err != nil && !errors.Is(err, upstream.ErrNotFound) {
				return rep, nil, fmt.Errorf("stopping %q: %w", def.Name, err)
			}
			r.cat.Remove(def.Name)
			r.mu.Lock()
			delete(r.servers, def.Name)
			r.mu.Unlock()
			rep.Changed = append(rep.Changed, def.Name)
		default:
			rep.Added = append(rep.Added, def.Name)
		}
		started, err := r.addConfigServer(ctx, def, cfg.Settings)
		if err != nil {
			return rep, nil, err
		}
		if started {
			start = append(start, def.Name)
		}
	}
	slices.Sort(rep.Removed)
	return rep, start, nil
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
func (r *registry) forget(ctx context.Context, rec *record) error {
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
func (r *registry) forgetLocal(ctx context.Context, rec *record) error {
	if err := r.ups.Remove(ctx, rec.def.Name); err != nil && !errors.Is(err, upstream.ErrNotFound) {
		return err
	}
	r.cat.Remove(rec.def.Name)
	r.mu.Lock()
	delete(r.servers, rec.def.Name)
	r.mu.Unlock()
	r.changed()
	if r.onRemove != nil {
		r.onRemove(rec.def.Name)
	}
	if r.metrics != nil {
		r.metrics.Forget(rec.def.Name)
	}
	if r.series != nil {
		r.series.Forget(rec.def.Name)
	}
	r.events.Publish("server.removed", map[string]any{"server": rec.def.Name, "id": rec.id})
	return nil
}

// add registers rec with the upstream manager and restores its last known
// tools (unavailable until it connects).
func (r *registry) add(ctx context.Context, rec *record, expanded *config.Server) error {
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
func (r *registry) restoreTools(ctx context.Context, rec *record, available bool) {
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
func (r *registry) changed() {
	if r.onChange != nil {
		r.onChange()
	}
}

// serverForPrefix is the server whose tools are namespaced with prefix
// (its name unless it sets another prefix); prefix itself when none is.
func (r *registry) serverForPrefix(prefix string) string {
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

// defaultAccess is every server's default_access in force ("allow" or
// "deny"), overrides included.
func (r *registry) defaultAccess() map[string]string {
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
func (r *registry) expand(def *config.Server) (*config.Server, error) {
	cp := def.Clone()
	if err := cp.Expand(r.getenv); err != nil {
		return nil, err
	}
	return cp, nil
}

// connectAll connects the named servers concurrently and returns when every
// attempt has finished, successful or not.
func (r *registry) connectAll(ctx context.Context, names []string) {
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
func (r *registry) connectInBackground(name string) {
	r.wg.Go(func() {
		if err := r.ups.Connect(r.ctx, name); err != nil {
			r.logger.Warn("connect failed", "server", name, "error", err)
		}
	})
}

func (r *registry) close() { r.wg.Wait() }

// --- api.Servers ---

func (r *registry) List(ctx context.Context) ([]api.Server, error) {
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

func (r *registry) Get(ctx context.Context, idOrName string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	return r.view(rec, r.cat.Snapshot()), nil
}

func (r *registry) Register(ctx context.Context, def *config.Server, autoConnect bool) (api.Server, error) {
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
	row := &store.Server{Name: def.Name, Source: sourceAPI, Transport: def.Transport, Description: def.Description}
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
	rec := &record{id: row.ID, source: sourceAPI, def: def, autoConnect: autoConnect, registeredAt: row.CreatedAt}
	if err := r.add(ctx, rec, expanded); err != nil {
		_ = r.db.DeleteServer(context.WithoutCancel(ctx), row.ID) // undo; the add error is what matters
		return api.Server{}, err
	}
	v := r.view(rec, r.cat.Snapshot())
	r.events.Publish("server.registered", map[string]any{"server": def.Name, "id": rec.id})
	if autoConnect {
		r.connectInBackground(def.Name)
		v.Status = string(upstream.StateConnecting)
	}
	return v, nil
}

func (r *registry) Remove(ctx context.Context, idOrName string) error {
	rec, err := r.find(idOrName)
	if err != nil {
		return err
	}
	if rec.source == sourceConfig {
		return &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
			Message: fmt.Sprintf("server %q is defined in the config file; remove it there", rec.def.Name)}
	}
	return r.forget(ctx, rec)
}

// Logs returns the last stderr lines of a stdio server.
func (r *registry) Logs(_ context.Context, idOrName string, max int) ([]string, error) {
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
func (r *registry) SetDefaultAccess(ctx context.Context, idOrName, access string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	if rec.source == sourceConfig {
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
	return r.view(&next, r.cat.Snapshot()), nil
}

// ResetDefaultAccess drops a config-file server's default_access override:
// the file's value applies again, at once.
func (r *registry) ResetDefaultAccess(ctx context.Context, idOrName string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	if rec.source != sourceConfig {
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
	return r.view(next, r.cat.Snapshot()), nil
}

// replace publishes a copy of rec changed by edit in rec's place (records
// are read without the lock: never edit one) and returns it.
func (r *registry) replace(rec *record, edit func(*record)) *record {
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
func (r *registry) Rename(ctx context.Context, idOrName, newName string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	old := rec.def.Name
	if newName == old {
		return r.view(rec, r.cat.Snapshot()), nil
	}
	if rec.source == sourceConfig {
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
	if r.onRemove != nil {
		r.onRemove(old)
	}
	next := &record{id: rec.id, source: rec.source, def: def, autoConnect: rec.autoConnect, registeredAt: rec.registeredAt}
	if err := r.add(ctx, next, expanded); err != nil {
		return api.Server{}, err
	}
	if r.onRename != nil {
		r.onRename(ctx, old, newName)
	}
	v := r.view(next, r.cat.Snapshot())
	if active {
		r.connectInBackground(newName)
		v.Status = string(upstream.StateConnecting)
	}
	return v, nil
}

func (r *registry) Connect(ctx context.Context, idOrName string, wait bool) (api.Server, error) {
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

func (r *registry) Disconnect(ctx context.Context, idOrName string) (api.Server, int, error) {
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
func (r *registry) Discover(ctx context.Context, idOrName string) (api.Server, error) {
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	if _, err := r.ups.Rediscover(ctx, rec.def.Name); err != nil {
		return api.Server{}, err
	}
	return r.view(rec, r.cat.Snapshot()), nil
}

func (r *registry) History(ctx context.Context, idOrName string, limit int) ([]api.ConnectionEvent, error) {
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

func (r *registry) Capabilities(ctx context.Context, idOrName string) (api.Capabilities, error) {
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
func (r *registry) view(rec *record, snap *catalog.Snapshot) api.Server {
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
		RegisteredAt:   rec.registeredAt,
		Status:         string(upstream.StateDisconnected),
		// rec.def, not the redacted copy: redaction may rewrite the URL.
		InsecureTransport: rec.def.InsecureTransport(),
	}
	switch {
	case rec.override != nil:
		v.DefaultAccessSource, v.FileDefaultAccess = "override", def.DefaultAccess
		at := rec.override.SetAt
		v.DefaultAccessSetAt, v.DefaultAccessSetBy = &at, rec.override.SetBy
	case rec.source == sourceConfig:
		v.DefaultAccessSource = sourceConfig
	default:
		v.DefaultAccessSource = sourceAPI
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
