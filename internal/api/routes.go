package api

import "net/http"

// routes lists the whole REST surface. The app authenticates every request
// but healthz and readyz before it gets here; authed and admin decide
// whether the caller may use the route (401 without an identity, 403 for a
// non-admin on an admin route).
func (h *handler) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", h.wrap(h.healthz))
	mux.Handle("GET /readyz", h.wrap(h.readyz))

	mux.Handle("GET /api/v1/aggregator/servers", h.authed(h.listServers))
	mux.Handle("POST /api/v1/aggregator/servers", h.admin(h.registerServer))
	mux.Handle("GET /api/v1/aggregator/servers/{id}", h.authed(h.getServer))
	mux.Handle("DELETE /api/v1/aggregator/servers/{id}", h.admin(h.removeServer))
	mux.Handle("PUT /api/v1/aggregator/servers/{id}", h.admin(h.updateServer))
	mux.Handle("PATCH /api/v1/aggregator/servers/{id}", h.admin(h.patchServer))
	mux.Handle("DELETE /api/v1/aggregator/servers/{id}/default_access", h.admin(h.resetDefaultAccess))
	mux.Handle("POST /api/v1/aggregator/servers/{id}/connect", h.admin(h.connectServer))
	mux.Handle("POST /api/v1/aggregator/servers/{id}/disconnect", h.admin(h.disconnectServer))
	mux.Handle("POST /api/v1/aggregator/servers/{id}/discover", h.admin(h.discoverServer))
	mux.Handle("POST /api/v1/aggregator/servers/{id}/auth", h.admin(h.upstreamAuth(true)))
	mux.Handle("GET /api/v1/aggregator/servers/{id}/auth", h.admin(h.upstreamAuth(false)))
	mux.Handle("GET /api/v1/aggregator/servers/{id}/history", h.authed(h.serverHistory))
	mux.Handle("GET /api/v1/aggregator/servers/{id}/capabilities", h.authed(h.serverCapabilities))
	mux.Handle("GET /api/v1/aggregator/servers/{id}/logs", h.admin(h.serverLogs))
	mux.Handle("GET /api/v1/whoami", h.authed(h.whoami))
	// Per-user credentials (credentials: per_user): each caller's own.
	mux.Handle("GET /api/v1/me/accounts", h.authed(h.myAccounts))
	mux.Handle("POST /api/v1/me/accounts/{server}/connect", h.authed(h.myAccount("connect")))
	mux.Handle("GET /api/v1/me/accounts/{server}", h.authed(h.myAccount("status")))
	mux.Handle("PUT /api/v1/me/accounts/{server}", h.authed(h.myAccount("put")))
	mux.Handle("DELETE /api/v1/me/accounts/{server}", h.authed(h.myAccount("delete")))
	mux.Handle("GET /api/v1/aggregator/servers/{id}/accounts", h.admin(h.serverAccounts))
	mux.Handle("DELETE /api/v1/aggregator/servers/{id}/accounts/{subject}", h.admin(h.deleteServerAccount))
	mux.Handle("GET /api/v1/cluster", h.admin(h.clusterView))

	mux.Handle("GET /api/v1/events", h.admin(h.streamEvents))
	// Tool listings are filtered per caller (Options.Visible).
	mux.Handle("GET /api/v1/tools", h.authed(h.listTools))
	mux.Handle("GET /api/v1/tools/{name}", h.authed(h.getTool))
	mux.Handle("POST /api/v1/tools/call", h.authed(h.callTool))
	// Tool pinning: the tools held back because their definition changed
	// since it was pinned, and their approval.
	mux.Handle("GET /api/v1/tools/quarantined", h.admin(h.listQuarantined))
	mux.Handle("POST /api/v1/tools/{name}/approve", h.admin(h.approveTool))

	mux.Handle("POST /api/v1/keys", h.admin(h.createKey))
	mux.Handle("GET /api/v1/keys", h.admin(h.listKeys))
	mux.Handle("DELETE /api/v1/keys/{id}", h.admin(h.revokeKey))

	// Seed 000's surface.
	mux.Handle("POST /api/v1/mcp/register", h.admin(h.registerManifest))
	mux.Handle("GET /api/v1/mcp/tools", h.authed(h.listMCPTools))
	mux.Handle("GET /api/v1/mcp/tools/{server_id}/{tool_name}", h.authed(h.getMCPTool))
	mux.Handle("POST /api/v1/mcp/invoke", h.authed(h.invokeTool))
	mux.Handle("POST /api/v1/mcp/policies/grant", h.admin(h.grant))
	mux.Handle("DELETE /api/v1/mcp/policies/grant/{id}", h.admin(h.revokeGrant))
	mux.Handle("GET /api/v1/mcp/policies", h.admin(h.allGrants))
	// An agent may read its own grants; agentGrants checks.
	mux.Handle("GET /api/v1/mcp/policies/{agent_id}", h.authed(h.agentGrants))
	mux.Handle("POST /api/v1/mcp/tokens", h.admin(h.issueToken))
	mux.Handle("DELETE /api/v1/mcp/tokens/{id}", h.admin(h.revokeToken))
	mux.Handle("GET /api/v1/mcp/circuit-breakers", h.admin(h.listBreakers))
	mux.Handle("GET /api/v1/mcp/metrics", h.admin(h.metrics))
	mux.Handle("GET /api/v1/audit", h.admin(h.queryAudit))
	// The last hour of traffic, in memory (docs/dashboard.md).
	mux.Handle("GET /api/v1/stats/timeseries", h.admin(h.timeseries))

	// Escalation and human approval (docs/escalation.md).
	mux.Handle("GET /api/v1/escalations", h.admin(h.listEscalations))
	mux.Handle("POST /api/v1/escalations/{id}/ack", h.admin(h.ackEscalation))
	mux.Handle("GET /api/v1/approvals", h.admin(h.listApprovals))
	mux.Handle("POST /api/v1/approvals/{id}/approve", h.admin(h.approveRequest))
	mux.Handle("POST /api/v1/approvals/{id}/deny", h.admin(h.denyRequest))

	// The built-in OAuth authorization server's clients and grants
	// (docs/auth.md#administration); 404 oauth_server_off without it.
	mux.Handle("GET /api/v1/oauth/clients", h.admin(h.listOAuthClients))
	mux.Handle("DELETE /api/v1/oauth/clients/{id}", h.admin(h.deleteOAuthClient))
	mux.Handle("GET /api/v1/oauth/grants", h.admin(h.listOAuthGrants))
	mux.Handle("DELETE /api/v1/oauth/grants/{id}", h.admin(h.revokeOAuthGrant))

	// Discovery (AG-US2, AG-US3): Search filters what each caller sees.
	mux.Handle("POST /api/v1/search", h.authed(h.search))
	mux.Handle("GET /api/v1/skills", h.authed(h.listSkills))
	mux.Handle("GET /api/v1/skills/{id}/tools", h.authed(h.skillTools))
	// Suggestions name tools the caller may not be allowed to see.
	mux.Handle("GET /api/v1/skills/suggestions", h.admin(h.skillSuggestions))

	// Anything else under /api/ answers in the API's error shape rather
	// than the mux's plain-text 404.
	mux.Handle("/api/", h.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no route " + r.Method + " " + r.URL.Path}
	}))
	return mux
}
