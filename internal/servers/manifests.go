package servers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// manifests holds the tool manifests registered with POST
// /api/v1/mcp/register (seed 000): per server, each declared tool's version
// and whether the version compatibility matrix (tool_versions:) accepts it.
// A tool registered with an incompatible version stays listed as disabled
// and its calls fail with tool_disabled. Manifests live in memory: an
// orchestrator re-registers after a gateway restart, as it does after its
// own.
type manifests struct {
	mu       sync.RWMutex
	byServer map[string]map[string]api.RegisteredTool // server -> original tool name
}

// ToolState is the pipeline's ToolState: enabled unless a manifest
// disabled it.
func (r *Registry) ToolState(t catalog.Tool) (bool, string) {
	m := &r.manifests
	m.mu.RLock()
	defer m.mu.RUnlock()
	if reg, ok := m.byServer[t.Server][t.OriginalName]; ok && !reg.Enabled {
		return false, reg.DisabledReason
	}
	return true, ""
}

// ToolStatus is the API's ToolStatus.
func (r *Registry) ToolStatus(t catalog.Tool) api.ToolStatus {
	m := &r.manifests
	m.mu.RLock()
	reg, ok := m.byServer[t.Server][t.OriginalName]
	m.mu.RUnlock()
	if !ok {
		st := api.ToolStatus{Enabled: true}
		if t.Def != nil {
			st.Version, _ = t.Def.Meta["version"].(string)
		}
		return st
	}
	return api.ToolStatus{Version: reg.Version, Enabled: reg.Enabled, DisabledReason: reg.DisabledReason}
}

// ExposedTools returns the original names of the tools server exposes, as
// last discovered, or nil and why they cannot be told.
func (r *Registry) ExposedTools(ctx context.Context, server string) ([]string, string) {
	tools := r.cat.Snapshot().ServerTools(server)
	if len(tools) == 0 {
		v, err := r.Get(ctx, server)
		switch {
		case err != nil:
			return nil, err.Error()
		case v.Status == string(upstream.StateConnected) || v.Status == string(upstream.StateDegraded):
			return []string{}, ""
		case v.ErrorMessage != "":
			return nil, fmt.Sprintf("server %q is %s (%s): its tools cannot be checked; connect it and register again", server, v.Status, v.ErrorMessage)
		default:
			return nil, fmt.Sprintf("server %q is %s and its tools were never discovered: they cannot be checked; connect it and register again", server, v.Status)
		}
	}
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.OriginalName
	}
	slices.Sort(out)
	return out, ""
}

// sameServer reports whether a manifest's definition b is the registered
// server a, so an orchestrator may re-send its whole registration (after a
// restart of its own) without a conflict. auto_connect and an unset
// default_access do not count.
func sameServer(a, b *config.Server) bool {
	a, b = a.Clone(), b.Clone()
	a.AutoStart, b.AutoStart = nil, nil
	if b.DefaultAccess == "" {
		b.DefaultAccess = a.DefaultAccess
	}
	return sameDefinition(a, b)
}

// listOrNone quotes names for a message.
func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// RegisterManifest registers m. A server_id the gateway does not know is
// registered first from the manifest's transport_type and connection_config
// (a 422 naming the missing field when there are none) and connected, so
// its tools can be checked; a known server given with a different
// definition is a conflict. Each declared tool must be one the upstream
// exposes (checked against the tools last discovered; none can be checked
// while the server has never been connected), have a valid input schema,
// and a version tool_versions accepts, else it is rejected or registered
// disabled with the reason.
func (r *Registry) RegisterManifest(ctx context.Context, m api.Manifest) (api.RegistrationResult, error) {
	rec, err := r.find(m.ServerID)
	var ae *api.Error
	notFound := errors.As(err, &ae) && ae.Code == api.CodeServerNotFound
	switch {
	case notFound && m.Server == nil:
		return api.RegistrationResult{}, config.Errors{{Field: "connection_config", Msg: fmt.Sprintf(
			"server %q is not registered: to register it with this manifest, add transport_type (HTTP, SSE or STDIO) and "+
				"connection_config (url for HTTP and SSE; command and args for STDIO), as POST /api/v1/aggregator/servers takes them",
			m.ServerID)}}
	case notFound:
		if _, err := r.Register(ctx, m.Server, true); err != nil {
			return api.RegistrationResult{}, err
		}
		// Connect now, so the declared tools are checked against what the
		// upstream really exposes. A failure leaves the server registered
		// (ERROR, with its reason, on its status) and every tool rejected.
		_, _ = r.Connect(ctx, m.ServerID, true) // the outcome is read from the catalog below
		if rec, err = r.find(m.ServerID); err != nil {
			return api.RegistrationResult{}, err
		}
	case err != nil:
		return api.RegistrationResult{}, err
	case m.Server != nil && !sameServer(rec.def, m.Server):
		return api.RegistrationResult{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict, Message: fmt.Sprintf(
			"server %q is already registered with another definition: omit transport_type and connection_config to "+
				"register a manifest for it, or remove it first", rec.def.Name)}
	}
	server := rec.def.Name
	res := api.RegistrationResult{ServerID: server, RegisteredTools: []api.RegisteredTool{}, RejectedTools: []api.RejectedManifestTool{}}
	r.mu.RLock()
	matrix := r.toolVersions[server]
	r.mu.RUnlock()
	exposed, why := r.ExposedTools(ctx, server)
	tools := map[string]api.RegisteredTool{}
	for _, t := range m.Tools {
		reject := func(format string, args ...any) {
			res.RejectedTools = append(res.RejectedTools, api.RejectedManifestTool{Name: t.Name, Version: t.Version, Reason: fmt.Sprintf(format, args...)})
		}
		switch {
		case strings.TrimSpace(t.Name) == "":
			reject("name is required")
			continue
		case tools[t.Name].Tool != "":
			reject("tool %q is listed twice", t.Name)
			continue
		}
		if bad := r.cat.CheckInputSchema(t.Schema); bad != "" {
			reject("invalid input schema: %s", bad)
			continue
		}
		switch {
		case exposed == nil:
			reject("%s", why)
			continue
		case !slices.Contains(exposed, t.Name):
			reject("server %q does not expose a tool %q (it exposes %s)", server, t.Name, listOrNone(exposed))
			continue
		}
		reg := api.RegisteredTool{ServerID: server, Tool: t.Name, Version: t.Version, Enabled: true}
		if ok := matrix[t.Name]; len(ok) > 0 && t.Version != "" && !slices.Contains(ok, t.Version) {
			reg.Enabled = false
			reg.DisabledReason = fmt.Sprintf("version %q is not compatible: tool_versions accepts %s", t.Version, strings.Join(ok, ", "))
		}
		tools[t.Name] = reg
		res.RegisteredTools = append(res.RegisteredTools, reg)
	}
	res.RegisteredCount, res.RejectedCount = len(res.RegisteredTools), len(res.RejectedTools)
	r.manifests.mu.Lock()
	if r.manifests.byServer == nil {
		r.manifests.byServer = map[string]map[string]api.RegisteredTool{}
	}
	r.manifests.byServer[server] = tools
	r.manifests.mu.Unlock()
	for _, t := range res.RegisteredTools {
		r.o.Events.Publish("tool.registered", map[string]any{"server": server, "tool": t.Tool, "version": t.Version,
			"enabled": t.Enabled, "source": "manifest"})
	}
	return res, nil
}
