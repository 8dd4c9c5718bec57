package app

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// withPeer hands the calling downstream session to the upstream side.
func withPeer(ctx context.Context, p *front.Peer) context.Context { return upstream.WithPeer(ctx, p) }

// frontSet holds the transparent per-server fronts (/servers/{name}/...),
// built on first use: most servers are only ever reached through /mcp.
type frontSet struct {
	build func(server string) *front.Front

	mu       sync.Mutex
	fronts   map[string]*front.Front
	handlers map[string]http.Handler // "server endpoint" -> handler
}

func newFrontSet(build func(string) *front.Front) *frontSet {
	return &frontSet{build: build, fronts: map[string]*front.Front{}, handlers: map[string]http.Handler{}}
}

// handler serves one endpoint kind of the transparent fronts, 404 for a
// server the registry does not know. endpoint builds the front's handler.
func (s *frontSet) handler(reg *registry, opts *front.HTTPOptions, endpoint func(*front.Front, *front.HTTPOptions) http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if reg.lookup(name) == nil {
			api.WriteError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeServerNotFound,
				Message: fmt.Sprintf("server %q not found", name)})
			return
		}
		key := name + " " + r.URL.Path[len(r.URL.Path)-4:] // "/mcp" or "/sse"
		s.mu.Lock()
		h, ok := s.handlers[key]
		if !ok {
			f, ok := s.fronts[name]
			if !ok {
				f = s.build(name)
				s.fronts[name] = f
			}
			h = endpoint(f, opts)
			s.handlers[key] = h
		}
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// drop forgets a removed server's front.
func (s *frontSet) drop(server string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.fronts[server]; ok {
		f.Close()
		delete(s.fronts, server)
	}
	for _, k := range []string{server + " /mcp", server + " /sse"} {
		delete(s.handlers, k)
	}
}

func (s *frontSet) resourceUpdated(ctx context.Context, server string, p *mcp.ResourceUpdatedNotificationParams) {
	s.mu.Lock()
	f := s.fronts[server]
	s.mu.Unlock()
	if f != nil {
		f.ResourceUpdated(ctx, server, p)
	}
}

func (s *frontSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, f := range s.fronts {
		f.Close()
		delete(s.fronts, name)
	}
}

// existing returns the server's transparent front if one was built.
func (s *frontSet) existing(server string) *front.Front {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fronts[server]
}
