package servers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Update replaces the definition of a runtime-registered server, the way a
// reload replaces a config file's: the new definition is validated, built
// and — when the server is running or connects automatically — started
// next to the running one; only when it started is it stored and swapped
// in, and the old one stopped. A definition that is invalid or does not
// start leaves the server exactly as it was, and the error says why.
//
// The name cannot change here (Rename does that). An env or header value
// sent as config.RedactedValue (what views show in place of a secret)
// keeps the value it had, so a definition read from the API can be edited
// and sent back.
func (r *Registry) Update(ctx context.Context, idOrName string, def *config.Server, autoConnect bool) (api.Server, error) {
	r.reloadMu.Lock() // one swap at a time, reloads included
	defer r.reloadMu.Unlock()
	rec, err := r.find(idOrName)
	if err != nil {
		return api.Server{}, err
	}
	name := rec.def.Name
	switch {
	case rec.source == SourceConfig:
		return api.Server{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
			Message: fmt.Sprintf("server %q is defined in the config file; change it there", name)}
	case def.Name != "" && def.Name != name:
		return api.Server{}, &api.Error{Status: http.StatusBadRequest, Code: api.CodeBadRequest,
			Message: fmt.Sprintf("the name cannot change in an update (%q → %q): rename the server instead", name, def.Name)}
	}
	def = def.Clone()
	def.Name = name
	keepSecrets(def, rec.def)
	if err := def.NormalizeCommand(); err != nil {
		return api.Server{}, err
	}
	if err := config.ValidateServer(def); err != nil {
		return api.Server{}, err
	}
	if sameDefinition(rec.def, def) && rec.autoConnect == autoConnect {
		return r.view(rec, r.cat.Snapshot()), nil
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
	cfgJSON, err := r.encodeDef(def, autoConnect)
	if err != nil {
		return api.Server{}, err
	}
	st, _ := r.ups.Status(name)
	start := autoConnect || st.State == upstream.StateConnected || st.State == upstream.StateDegraded || st.State == upstream.StateConnecting
	staged, err := r.ups.Stage(ctx, expanded, start)
	if err != nil {
		return api.Server{}, &api.Error{Status: http.StatusUnprocessableEntity, Code: api.CodeValidation,
			Message: fmt.Sprintf("server %q: the new definition did not start, so the server keeps its previous one: %v", name, err)}
	}
	// RenameServer to the same name rewrites the stored definition.
	if err := r.db.RenameServer(ctx, rec.id, name, cfgJSON); err != nil {
		staged.Discard()
		if errors.Is(err, store.ErrNotFound) {
			return api.Server{}, &api.Error{Status: http.StatusNotFound, Code: api.CodeServerNotFound,
				Message: fmt.Sprintf("server %q not found", name)}
		}
		return api.Server{}, err
	}
	next := &record{id: rec.id, source: rec.source, def: def, autoConnect: autoConnect, registeredAt: rec.registeredAt}
	r.commit(ctx, &staging{def: def, st: staged, rec: next, started: start})
	r.changed()
	r.o.Events.Publish("server.updated", map[string]any{"server": name, "id": rec.id})
	r.publish("servers", "")
	return r.view(next, r.cat.Snapshot()), nil
}

// keepSecrets puts back into def the env and header values of old that
// def sends as config.RedactedValue.
func keepSecrets(def, old *config.Server) {
	for _, m := range []struct{ next, prev map[string]string }{{def.Env, old.Env}, {def.Headers, old.Headers}} {
		for k, v := range maps.Clone(m.next) {
			if prev, ok := m.prev[k]; ok && v == config.RedactedValue {
				m.next[k] = prev
			}
		}
	}
}
