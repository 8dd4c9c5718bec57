package upstreamauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// Per-user credentials (`credentials: per_user`): each caller links an
// account of their own, by OAuth (an Authorizer whose grant is stored
// under the caller's subject) or as a personal static credential (bearer
// token, basic, an API key header). Both are sealed with the keyring in
// the same table as the server's own grant, one row per (server, subject):
// linking one replaces the other. Nothing here returns a credential to
// anyone but the transport that sends it.

// UserTokenStore is the part of the store per-user credentials need
// beyond [TokenStore]: *store.DB and [MemoryStore] implement it.
type UserTokenStore interface {
	TokenStore
	UserUpstreamTokens(ctx context.Context, server, subject string) ([]store.UpstreamToken, error)
	DeleteUpstreamToken(ctx context.Context, server, subject string) error
}

// Credential is what the gateway sends upstream as one caller: an OAuth
// handler, or static headers. Subject keys the caller's pooled sessions.
type Credential struct {
	Subject string
	OAuth   auth.OAuthHandler
	Headers map[string]string // SECRET
}

// NotLinkedError says that a caller has no usable credential of their own
// for a per_user server; Reason says why and how to link one. It never
// holds a secret.
type NotLinkedError struct {
	Server, Subject string
	Reason          string
}

func (e *NotLinkedError) Error() string {
	return fmt.Sprintf("server %q needs your own account: %s", e.Server, e.Reason)
}

// notLinked is the NotLinkedError of a caller with nothing linked.
func notLinked(server, subject string) *NotLinkedError {
	return &NotLinkedError{Server: server, Subject: subject, Reason: LinkHint(server)}
}

// LinkHint tells a caller how to link their account to server.
func LinkHint(server string) string {
	return fmt.Sprintf("link it with `switchboard connect-account %s` (OAuth), store a personal credential with `switchboard connect-account %s --bearer-env VAR` (or --basic-user, --header), or POST /api/v1/me/accounts/%s/connect", server, server, server)
}

// static is a personal credential as sealed: a row of upstream_tokens
// whose payload has "static" instead of a grant.
type static struct {
	Static api.PersonalCredential `json:"static"`
}

// validateStatic checks a personal credential; its messages never echo a
// value.
func validateStatic(c api.PersonalCredential) error {
	bad := func(format string, args ...any) error {
		return &api.Error{Status: http.StatusBadRequest, Code: api.CodeValidation, Message: fmt.Sprintf(format, args...)}
	}
	// Control characters would break the header (CR, LF: inject another).
	ctl := func(s string) bool {
		return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
	}
	switch c.Type {
	case api.CredentialBearer:
		if c.Token == "" || ctl(c.Token) || c.Username+c.Password+c.Header+c.Value != "" {
			return bad("type bearer takes token only, without control characters")
		}
	case api.CredentialBasic:
		if c.Username == "" || strings.Contains(c.Username, ":") || ctl(c.Username) || ctl(c.Password) || c.Token+c.Header+c.Value != "" {
			return bad("type basic takes username (without ':') and password only, without control characters")
		}
	case api.CredentialHeader:
		if !validHeader(c.Header) || c.Value == "" || ctl(c.Value) || c.Token+c.Username+c.Password != "" {
			return bad("type header takes header (a header name) and value only, without control characters")
		}
		switch http.CanonicalHeaderKey(c.Header) {
		case "Host", "Content-Length", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name":
			return bad("header %s is the protocol's, not a credential", c.Header)
		}
	default:
		return bad("type must be bearer, basic or header")
	}
	return nil
}

func validHeader(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) {
			return false
		}
	}
	return true
}

// headers is what c sends.
func headers(c api.PersonalCredential) map[string]string {
	switch c.Type {
	case api.CredentialBearer:
		return map[string]string{"Authorization": "Bearer " + c.Token}
	case api.CredentialBasic:
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(c.Username+":"+c.Password))}
	case api.CredentialHeader:
		return map[string]string{c.Header: c.Value}
	}
	return nil
}

// userStore is the Set's store with the per-user methods.
func (s *Set) userStore() (UserTokenStore, error) {
	us, ok := s.o.Authorizer.Store.(UserTokenStore)
	if !ok || s.o.Authorizer.Keyring == nil {
		return nil, errors.New("per-user credentials need the store and a secret key (SWITCHBOARD_SECRET_KEY)")
	}
	return us, nil
}

// perUserDef returns server's definition, or an error wrapping
// api.ErrNotPerUser.
func (s *Set) perUserDef(server string) (*config.Server, error) {
	def, err := s.o.Definition(server)
	if err != nil || def == nil || !def.PerUser() {
		return nil, fmt.Errorf("server %q: %w", server, api.ErrNotPerUser)
	}
	return def, nil
}

// userSpec is the OAuth client of a per_user server's accounts: its auth
// section, or by default the authorization-code grant with dynamic
// registration.
func userSpec(def *config.Server) Spec {
	if def.Auth == nil {
		return Spec{}
	}
	return SpecOf(def)
}

// userAuthorizer returns the Authorizer of subject's account on def's
// server, made again when the definition changed.
func (s *Set) userAuthorizer(def *config.Server, subject string) (*Authorizer, error) {
	spec := userSpec(def)
	key := FlowKey(def.Name, subject)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == nil {
		s.users = map[string]*entry{}
	}
	if e := s.users[key]; e != nil && e.url == def.URL && reflect.DeepEqual(e.spec, spec) {
		return e.a, e.err
	}
	if old := s.users[key]; old != nil && old.a != nil {
		s.retired = append(s.retired, old.a)
	}
	o := s.o.Authorizer
	o.Subject = subject
	e := &entry{url: def.URL, spec: spec}
	e.a, e.err = New(def.Name, def.URL, spec, &o)
	s.users[key] = e
	return e.a, e.err
}

// open reads a row sealed by this package: a grant, or a static credential.
func (s *Set) openRow(row store.UpstreamToken) (*static, *grant, error) {
	plain, _, err := s.o.Authorizer.Keyring.Open(row.Sealed)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the credential of %q for %q: %w", row.Server, row.Subject, err)
	}
	if strings.HasPrefix(plain, `{"static":`) {
		var st static
		if err := json.Unmarshal([]byte(plain), &st); err != nil {
			return nil, nil, fmt.Errorf("decoding the credential of %q for %q: %w", row.Server, row.Subject, err)
		}
		return &st, nil, nil
	}
	var g grant
	if err := json.Unmarshal([]byte(plain), &g); err != nil {
		return nil, nil, fmt.Errorf("decoding the grant of %q for %q: %w", row.Server, row.Subject, err)
	}
	g.problem = row.Problem
	return nil, &g, nil
}

// UserCredential is what the gateway sends to def's server as subject: a
// *NotLinkedError when subject linked nothing usable.
func (s *Set) UserCredential(ctx context.Context, def *config.Server, subject string) (Credential, error) {
	if subject == "" {
		return Credential{}, &NotLinkedError{Server: def.Name, Reason: "the call carries no identity to use an account of"}
	}
	us, err := s.userStore()
	if err != nil {
		return Credential{}, err
	}
	row, err := us.UpstreamToken(ctx, def.Name, subject)
	if errors.Is(err, store.ErrNotFound) {
		return Credential{}, notLinked(def.Name, subject)
	}
	if err != nil {
		return Credential{}, err
	}
	return s.credentialOf(def, row)
}

func (s *Set) credentialOf(def *config.Server, row store.UpstreamToken) (Credential, error) {
	st, g, err := s.openRow(row)
	if err != nil {
		return Credential{}, err
	}
	if st != nil {
		return Credential{Subject: row.Subject, Headers: headers(st.Static)}, nil
	}
	if g.problem != "" {
		return Credential{}, &NotLinkedError{Server: def.Name, Subject: row.Subject,
			Reason: g.problem + "; link the account again: " + LinkHint(def.Name)}
	}
	a, err := s.userAuthorizer(def, row.Subject)
	if err != nil {
		return Credential{}, err
	}
	return Credential{Subject: row.Subject, OAuth: a}, nil
}

// DiscoveryCredential is the credential a per_user server's own session
// (the one that lists its tools) connects with: the most recently linked
// usable account. A *NotLinkedError when nobody linked one yet.
func (s *Set) DiscoveryCredential(ctx context.Context, def *config.Server) (Credential, error) {
	us, err := s.userStore()
	if err != nil {
		return Credential{}, err
	}
	rows, err := us.UserUpstreamTokens(ctx, def.Name, "")
	if err != nil {
		return Credential{}, err
	}
	for _, row := range rows {
		if row.Problem != "" {
			continue
		}
		if c, err := s.credentialOf(def, row); err == nil {
			s.mu.Lock()
			if s.discovery == nil {
				s.discovery = map[string]string{}
			}
			s.discovery[def.Name] = c.Subject
			s.mu.Unlock()
			return c, nil
		}
	}
	return Credential{}, &NotLinkedError{Server: def.Name,
		Reason: "no user has linked an account yet, so the server's tools cannot be listed: " + LinkHint(def.Name)}
}

// DiscoverySubject is whose account the server's own session last
// connected with ([Set.DiscoveryCredential]); "" before it did.
func (s *Set) DiscoverySubject(server string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discovery[server]
}

var _ api.UserAccounts = (*Set)(nil)

// StartUserAuth implements [api.UserAccounts].
func (s *Set) StartUserAuth(ctx context.Context, server, subject string) (api.UpstreamAuthFlow, error) {
	def, err := s.perUserDef(server)
	if err != nil {
		return api.UpstreamAuthFlow{}, err
	}
	if _, err := s.userStore(); err != nil {
		return api.UpstreamAuthFlow{}, err
	}
	a, err := s.userAuthorizer(def, subject)
	if err != nil {
		return api.UpstreamAuthFlow{}, err
	}
	f, err := s.userFlows.Start(ctx, a)
	if f == nil {
		return api.UpstreamAuthFlow{}, err
	}
	return s.UserAuthStatus(ctx, server, subject)
}

// UserFlow starts subject's OAuth flow on server like StartUserAuth and
// returns it, for a caller that waits for its end (an elicitation).
func (s *Set) UserFlow(ctx context.Context, server, subject string) (*Flow, error) {
	def, err := s.perUserDef(server)
	if err != nil {
		return nil, err
	}
	a, err := s.userAuthorizer(def, subject)
	if err != nil {
		return nil, err
	}
	f, err := s.userFlows.Start(ctx, a)
	if err != nil {
		return nil, err
	}
	if f.URL == "" {
		return nil, errors.New("the authorization flow gave no URL")
	}
	return f, nil
}

// UserAuthStatus implements [api.UserAccounts].
func (s *Set) UserAuthStatus(ctx context.Context, server, subject string) (api.UpstreamAuthFlow, error) {
	def, err := s.perUserDef(server)
	if err != nil {
		return api.UpstreamAuthFlow{}, err
	}
	out := api.UpstreamAuthFlow{Server: server, State: api.FlowNone}
	if f, ok := s.userFlows.Get(FlowKey(server, subject)); ok {
		started := f.Started
		out.Started, out.AuthorizationURL = &started, f.URL
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
	accts, err := s.LinkedAccounts(ctx, def.Name, subject)
	if err != nil {
		return out, err
	}
	if len(accts) == 1 {
		a := accts[0]
		out.Grant = api.UpstreamGrant{Authorized: true, Type: a.Kind, Issuer: a.Issuer, ExpiresAt: a.ExpiresAt, Problem: a.Problem}
		if a.Kind == "oauth" {
			out.Grant.Type = string(GrantAuthorizationCode)
		}
	}
	return out, nil
}

// PutPersonalCredential implements [api.UserAccounts].
func (s *Set) PutPersonalCredential(ctx context.Context, server, subject string, c api.PersonalCredential) error {
	if _, err := s.perUserDef(server); err != nil {
		return err
	}
	if err := validateStatic(c); err != nil {
		return err
	}
	us, err := s.userStore()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(static{Static: c})
	if err != nil {
		return err
	}
	sealed, err := s.o.Authorizer.Keyring.Seal(string(raw))
	if err != nil {
		return fmt.Errorf("sealing the credential: %w", err)
	}
	if _, err := us.PutUpstreamToken(ctx, store.UpstreamToken{Server: server, Subject: subject, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
		return err
	}
	s.linked(server, subject)
	return nil
}

// Unlink implements [api.UserAccounts].
func (s *Set) Unlink(ctx context.Context, server, subject string) error {
	if subject == "" {
		return &api.Error{Status: http.StatusBadRequest, Code: api.CodeValidation, Message: "no account named"}
	}
	us, err := s.userStore()
	if err != nil {
		return err
	}
	if err := us.DeleteUpstreamToken(ctx, server, subject); err != nil {
		return err
	}
	s.mu.Lock()
	if e := s.users[FlowKey(server, subject)]; e != nil {
		// Closed with the Set: a session may still hold it.
		if e.a != nil {
			s.retired = append(s.retired, e.a)
		}
		delete(s.users, FlowKey(server, subject))
	}
	s.mu.Unlock()
	s.linked(server, subject)
	return nil
}

// linked tells the gateway that subject's credential for server changed:
// their pooled sessions go, and a server waiting for its first account
// connects.
func (s *Set) linked(server, subject string) {
	if s.o.OnUserLinked != nil {
		s.o.OnUserLinked(server, subject)
	}
}

// LinkedAccounts implements [api.UserAccounts].
func (s *Set) LinkedAccounts(ctx context.Context, server, subject string) ([]api.LinkedAccount, error) {
	us, err := s.userStore()
	if err != nil {
		return nil, err
	}
	rows, err := us.UserUpstreamTokens(ctx, server, subject)
	if err != nil {
		return nil, err
	}
	var out []api.LinkedAccount
	for _, row := range rows {
		la := api.LinkedAccount{Server: row.Server, Subject: row.Subject, Problem: row.Problem, UpdatedAt: row.UpdatedAt}
		if !row.ExpiresAt.IsZero() {
			exp := row.ExpiresAt
			la.ExpiresAt = &exp
		}
		st, g, err := s.openRow(row)
		switch {
		case err != nil:
			la.Kind, la.Problem = "unreadable", "sealed with a key this gateway no longer has: link it again"
		case st != nil:
			la.Kind = st.Static.Type
			if st.Static.Type == api.CredentialHeader {
				la.Header = st.Static.Header
			}
		default:
			la.Kind, la.Issuer = "oauth", g.Issuer
		}
		out = append(out, la)
	}
	return out, nil
}
