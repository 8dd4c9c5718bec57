package api

import "net/http"

// routes lists the whole REST surface.
func (h *handler) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", h.wrap(h.healthz))
	mux.Handle("GET /readyz", h.wrap(h.readyz))

	mux.Handle("GET /api/v1/aggregator/servers", h.wrap(h.listServers))
	mux.Handle("POST /api/v1/aggregator/servers", h.wrap(h.registerServer))
	mux.Handle("GET /api/v1/aggregator/servers/{id}", h.wrap(h.getServer))
	mux.Handle("DELETE /api/v1/aggregator/servers/{id}", h.wrap(h.removeServer))
	mux.Handle("PATCH /api/v1/aggregator/servers/{id}", h.wrap(h.patchServer))
	mux.Handle("POST /api/v1/aggregator/servers/{id}/connect", h.wrap(h.connectServer))
	mux.Handle("POST /api/v1/aggregator/servers/{id}/disconnect", h.wrap(h.disconnectServer))
	mux.Handle("POST /api/v1/aggregator/servers/{id}/discover", h.wrap(h.discoverServer))
	mux.Handle("GET /api/v1/aggregator/servers/{id}/history", h.wrap(h.serverHistory))
	mux.Handle("GET /api/v1/aggregator/servers/{id}/capabilities", h.wrap(h.serverCapabilities))

	mux.Handle("GET /api/v1/events", h.wrap(h.streamEvents))
	mux.Handle("GET /api/v1/tools", h.wrap(h.listTools))
	mux.Handle("GET /api/v1/tools/{name}", h.wrap(h.getTool))
	mux.Handle("POST /api/v1/tools/call", h.wrap(h.callTool))

	// Anything else under /api/ answers in the API's error shape rather
	// than the mux's plain-text 404.
	mux.Handle("/api/", h.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no route " + r.Method + " " + r.URL.Path}
	}))
	return mux
}
