package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/cluster"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// A stateless caller's calls reuse its sessions on classic upstreams.
var _ upstream.PooledPeer = (*front.Peer)(nil)

// withPeer hands the calling downstream session to the upstream side.
func withPeer(ctx context.Context, p *front.Peer) context.Context { return upstream.WithPeer(ctx, p) }

// frontDeps are what the fronts are built on.
type frontDeps struct {
	cat           *catalog.Catalog
	pipe          *invoke.Pipeline
	keys          *secrets.Keyring // seals stateless callers' requestState; nil: a per-process key
	cluster       *cluster.Cluster
	search        front.Searcher
	visible       func(authz.Identity, catalog.Tool) bool
	serverVisible func(authz.Identity, string) bool
	tracer        trace.Tracer
	logger        *slog.Logger
	version       string
}

// newFronts builds the MCP front of /mcp and /sse and the set of
// transparent per-server fronts.
func newFronts(cfg *config.Config, d frontDeps) (*front.Front, *frontSet) {
	// requestState of stateless callers is sealed with the secret key when
	// there is one, so that replicas sharing it accept each other's.
	var sealer front.Sealer
	if d.keys != nil {
		sealer = d.keys
	}
	inputTimeout := time.Duration(cfg.Front.InputTimeoutSeconds) * time.Second
	sep := cfg.Settings.ToolNameSeparator
	main := front.New(d.cat, d.pipe, &front.Options{
		Sealer:         sealer,
		InputTimeout:   inputTimeout,
		Replica:        d.cluster.ID(),
		ReplicaAddr:    d.cluster.ReplicaAddr,
		Spend:          d.cluster.SpendOnce,
		ToolExposure:   cfg.Front.ToolExposure,
		MetaToolPrefix: cfg.Front.MetaToolPrefix,
		Searcher:       d.search,
		Logger:         d.logger,
		Implementation: &mcp.Implementation{Name: "switchboard", Title: "switchboard MCP gateway", Version: d.version},
		Instructions: "switchboard aggregates several MCP servers. Tool, prompt and resource names are " +
			"namespaced by server: <server>" + sep + "<name>.",
		WithPeer:      withPeer,
		Visible:       d.visible,
		ServerVisible: d.serverVisible,
		Tracer:        d.tracer,
	})
	set := newFrontSet(func(server string) *front.Front {
		return front.New(d.cat, d.pipe, &front.Options{
			Logger:         d.logger.With("endpoint", server),
			Implementation: &mcp.Implementation{Name: "switchboard/" + server, Version: d.version},
			Server:         server,
			Sealer:         sealer,
			InputTimeout:   inputTimeout,
			Replica:        d.cluster.ID(),
			ReplicaAddr:    d.cluster.ReplicaAddr,
			Spend:          d.cluster.SpendOnce,
			WithPeer:       withPeer,
			Visible:        d.visible,
			ServerVisible:  d.serverVisible,
			Tracer:         d.tracer,
		})
	})
	return main, set
}

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
func (s *frontSet) handler(reg *servers.Registry, opts *front.HTTPOptions, endpoint func(*front.Front, *front.HTTPOptions) http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if _, ok := reg.Lookup(name); !ok {
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
