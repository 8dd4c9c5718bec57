package upstreamauth

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

// SetOptions configures a [Set].
type SetOptions struct {
	// Authorizer is given to every [Authorizer] the Set makes (Store,
	// Keyring, HTTPClient, RedirectURL, Logger); Fetcher and Progress are
	// ignored: the gateway's flows are started by an operator.
	Authorizer Options
	// Definition returns a server's current definition, expanded (the
	// client secret read); an error or nil for an unknown server.
	Definition func(server string) (*config.Server, error)
	// FlowTimeout bounds an operator's authorization; default
	// [DefaultFlowTimeout].
	FlowTimeout time.Duration
	// PublicURL is the gateway's URL as browsers reach it (see
	// [PublicURL]); RedirectURL defaults to it + [CallbackPath].
	PublicURL string
	// OnAuthorized, if set, is called when an operator's flow stored a
	// grant, from the flow's goroutine: the gateway connects the server.
	OnAuthorized func(server string)
	// OnUserLinked, if set, is called when a caller's own credential for
	// a per_user server changed (linked, replaced or unlinked): the
	// gateway closes their pooled sessions and connects a server that
	// waited for its first account.
	OnUserLinked func(server, subject string)
}

// Set holds the gateway's OAuth clients of its upstream servers: one
// [Authorizer] per server with `auth`, made on first use and made again
// when the server's definition changes, with the [Callbacks] and [Flows]
// operators' authorizations go through. It is safe for concurrent use;
// Close it with the gateway.
type Set struct {
	o         SetOptions
	cb        *Callbacks
	flows     *Flows
	userFlows *Flows // callers linking their own accounts (per_user)
	mux       *http.ServeMux

	mu      sync.Mutex
	auths   map[string]*entry
	retired []*Authorizer     // replaced by a changed definition; closed by Close
	urls    map[string]string // the authorization URL of each server's last flow
	users   map[string]*entry // callers' Authorizers, by FlowKey
	// discovery is, by server, whose account the server's own session of
	// a per_user server connected with.
	discovery map[string]string
}

// entry is the Authorizer of one server and the definition it was made for.
type entry struct {
	url  string
	spec Spec
	a    *Authorizer
	err  error
}

// NewSet returns an empty Set.
func NewSet(o SetOptions) *Set {
	if o.Authorizer.RedirectURL == "" && o.PublicURL != "" {
		o.Authorizer.RedirectURL = strings.TrimSuffix(o.PublicURL, "/") + CallbackPath
	}
	s := &Set{o: o, cb: NewCallbacks(), auths: map[string]*entry{}, urls: map[string]string{}, mux: http.NewServeMux()}
	s.o.Authorizer.Fetcher, s.o.Authorizer.Progress = nil, nil
	s.flows = NewFlows(s.cb, o.FlowTimeout, func(server string, err error) {
		if err == nil && o.OnAuthorized != nil {
			o.OnAuthorized(server)
		}
	})
	s.userFlows = NewFlows(s.cb, o.FlowTimeout, nil)
	s.userFlows.onDoneFlow = func(f *Flow) {
		if f.err == nil {
			s.linked(f.Server, f.Subject)
		}
	}
	s.mux.Handle(CallbackPath, s.cb)
	if r := o.Authorizer.RedirectURL; r != "" {
		base := r[:len(r)-len(CallbackPath)]
		s.mux.Handle(ClientMetadataPath, ClientMetadataHandler(base+ClientMetadataPath, orDefault(o.Authorizer.ClientName, "switchboard"), r))
	}
	return s
}

// Handler serves [CallbackPath] and [ClientMetadataPath]. Mount it without
// authentication: the state parameter is the callback's credential, and
// the metadata document is public.
func (s *Set) Handler() http.Handler { return s.mux }

// Register mounts [Set.Handler] on mux at its two paths.
func (s *Set) Register(mux *http.ServeMux) {
	mux.Handle(CallbackPath, s.mux)
	mux.Handle(ClientMetadataPath, s.mux)
}

// PublicURL is the gateway's URL as a browser reaches it: auth.oauth.resource
// when set, else scheme://listen.
func PublicURL(cfg *config.Config, scheme, listen string) string {
	if a := cfg.Auth; a != nil && a.OAuth != nil && a.OAuth.Resource != "" {
		return a.OAuth.Resource
	}
	return scheme + "://" + listen
}

// SpecOf is the Spec of a server's `auth`, with the client secret Expand
// read.
func SpecOf(def *config.Server) Spec {
	a := def.Auth
	return Spec{Grant: Grant(a.Grant), ClientID: a.ClientID, ClientSecret: def.AuthClientSecret(),
		ClientMetadataURL: a.ClientMetadataURL, TokenEndpointAuthMethod: a.TokenEndpointAuthMethod,
		Scopes: slices.Clone(a.Scopes), Issuer: a.Issuer, RefreshMargin: time.Duration(a.RefreshMarginSeconds) * time.Second,
		MaxStepUps: a.MaxStepUps}
}

// authorizer returns the Authorizer of a server's current definition
// (SetOptions.Definition); an error wrapping api.ErrNoUpstreamAuth for a
// server without `auth`.
func (s *Set) authorizer(server string) (*entry, error) {
	def, err := s.o.Definition(server)
	if err != nil || def == nil || def.Auth == nil {
		s.drop(server)
		return nil, fmt.Errorf("server %q: %w", server, api.ErrNoUpstreamAuth)
	}
	return s.entryFor(def), nil
}

// entryFor returns the Authorizer of def, made again when def's URL or
// auth differ from those it was made for. The one it replaces is closed
// only with the Set: during a reload the running server keeps using it
// until the new definition's server replaces it (or the reload fails).
func (s *Set) entryFor(def *config.Server) *entry {
	spec := SpecOf(def)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.auths[def.Name]; e != nil && e.url == def.URL && reflect.DeepEqual(e.spec, spec) {
		return e
	}
	if old := s.auths[def.Name]; old != nil && old.a != nil {
		s.retired = append(s.retired, old.a)
	}
	e := &entry{url: def.URL, spec: spec}
	e.a, e.err = New(def.Name, def.URL, spec, &s.o.Authorizer)
	s.auths[def.Name] = e
	return e
}

// drop forgets the Authorizer of a server that is gone or lost its
// `auth` (closed with the Set, as in entryFor).
func (s *Set) drop(server string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.auths[server]; e != nil {
		if e.a != nil {
			s.retired = append(s.retired, e.a)
		}
		delete(s.auths, server)
	}
}

// For is the OAuth handler of the server def defines, for its transport
// (upstream.Options.OAuth): a true nil for a server without `auth`. One
// that cannot have an Authorizer (no secret key for the grants) gets a
// handler that fails with a [NeedsAuthError] saying why.
func (s *Set) For(def *config.Server) auth.OAuthHandler {
	if def == nil || def.Auth == nil {
		return nil
	}
	e := s.entryFor(def)
	if e.err != nil {
		return broken{&NeedsAuthError{Server: def.Name, Reason: e.err.Error()}}
	}
	return e.a
}

// broken is the handler of a server whose Authorizer could not be made.
type broken struct{ err *NeedsAuthError }

func (b broken) TokenSource(context.Context) (oauth2.TokenSource, error) { return nil, b.err }
func (b broken) Authorize(context.Context, *http.Request, *http.Response) error {
	return b.err
}

var _ api.UpstreamAuth = (*Set)(nil)

// StartAuth starts an operator's authorization of server. A failure before
// the URL (discovery, registration, a refused client credentials grant) is
// the flow's error, state failed, not an error of the call.
func (s *Set) StartAuth(ctx context.Context, server string) (api.UpstreamAuthFlow, error) {
	e, err := s.authorizer(server)
	if err != nil {
		return api.UpstreamAuthFlow{}, err
	}
	if def, _ := s.o.Definition(server); def != nil && def.PerUser() {
		// A grant of the server's own would never be sent.
		return api.UpstreamAuthFlow{}, &api.Error{Status: http.StatusConflict, Code: api.CodeConflict,
			Message: fmt.Sprintf("server %q has credentials: per_user: each caller links their own account (`switchboard connect-account %s`)", server, server)}
	}
	if e.err != nil {
		return api.UpstreamAuthFlow{}, e.err
	}
	f, err := s.flows.Start(ctx, e.a)
	if f == nil {
		return api.UpstreamAuthFlow{}, err
	}
	s.mu.Lock()
	s.urls[server] = f.URL
	s.mu.Unlock()
	return s.AuthStatus(ctx, server)
}

// AuthStatus is the last flow of server started on this replica and its
// stored grant.
func (s *Set) AuthStatus(ctx context.Context, server string) (api.UpstreamAuthFlow, error) {
	e, err := s.authorizer(server)
	if err != nil {
		return api.UpstreamAuthFlow{}, err
	}
	out := api.UpstreamAuthFlow{Server: server, State: api.FlowNone}
	if e.err != nil {
		out.Grant.Problem = e.err.Error()
		return out, nil
	}
	if f, ok := s.flows.Get(server); ok {
		started := f.Started
		out.Started = &started
		s.mu.Lock()
		out.AuthorizationURL = s.urls[server]
		s.mu.Unlock()
		select {
		case <-f.Done():
			out.State = api.FlowDone
			if err := f.Err(); err != nil {
				out.State, out.Error = api.FlowFailed, err.Error()
			}
		default:
			out.State = api.FlowPending
		}
	}
	st, err := e.a.Status(ctx)
	if err != nil {
		return out, fmt.Errorf("reading the grant of %q: %w", server, err)
	}
	out.Grant = api.UpstreamGrant{Authorized: st.Authorized, Type: string(st.Grant), Issuer: st.Issuer,
		Refreshable: st.Refreshable, Scopes: st.Scopes, Problem: st.Problem}
	if !st.ExpiresAt.IsZero() {
		out.Grant.ExpiresAt = &st.ExpiresAt
	}
	return out, nil
}

// Close ends the flows in progress and the Authorizers' waits. A nil Set
// may be closed (a gateway whose construction failed early).
func (s *Set) Close() {
	if s == nil {
		return
	}
	s.flows.Close()
	s.userFlows.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, e := range s.users {
		if e.a != nil {
			e.a.Close()
		}
		delete(s.users, key)
	}
	for name, e := range s.auths {
		if e.a != nil {
			e.a.Close()
		}
		delete(s.auths, name)
	}
	for _, a := range s.retired {
		a.Close()
	}
	s.retired = nil
}
