package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
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

// state is the pipeline's ToolState: enabled unless a manifest disabled it.
func (m *manifests) state(t catalog.Tool) (bool, string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if r, ok := m.byServer[t.Server][t.OriginalName]; ok && !r.Enabled {
		return false, r.DisabledReason
	}
	return true, ""
}

// status is the API's ToolStatus.
func (m *manifests) status(t catalog.Tool) api.ToolStatus {
	m.mu.RLock()
	r, ok := m.byServer[t.Server][t.OriginalName]
	m.mu.RUnlock()
	if !ok {
		st := api.ToolStatus{Enabled: true}
		if t.Def != nil {
			st.Version, _ = t.Def.Meta["version"].(string)
		}
		return st
	}
	return api.ToolStatus{Version: r.Version, Enabled: r.Enabled, DisabledReason: r.DisabledReason}
}

// apiRegistrar registers manifests for the API.
type apiRegistrar struct{ a *App }

func (r apiRegistrar) RegisterManifest(ctx context.Context, m api.Manifest) (api.RegistrationResult, error) {
	a := r.a
	rec, err := a.reg.find(m.ServerID)
	if err != nil {
		return api.RegistrationResult{}, err
	}
	server := rec.def.Name
	res := api.RegistrationResult{ServerID: server, RegisteredTools: []api.RegisteredTool{}, RejectedTools: []api.RejectedManifestTool{}}
	matrix := a.cfg.ToolVersions[server]
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
		if why := a.cat.CheckInputSchema(t.Schema); why != "" {
			reject("invalid input schema: %s", why)
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
	a.manifests.mu.Lock()
	if a.manifests.byServer == nil {
		a.manifests.byServer = map[string]map[string]api.RegisteredTool{}
	}
	a.manifests.byServer[server] = tools
	a.manifests.mu.Unlock()
	for _, t := range res.RegisteredTools {
		a.events.Publish("tool.registered", map[string]any{"server": server, "tool": t.Tool, "version": t.Version,
			"enabled": t.Enabled, "source": "manifest"})
	}
	return res, nil
}
