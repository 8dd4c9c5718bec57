package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The state of the built-in OAuth authorization server (package
// authserver). Every step of a flow reads and writes it here, so that any
// replica serves any step. Nothing secret is stored in clear: client
// secrets, codes and refresh tokens are stored as the caller's hashes, the
// signing keys' private halves and the upstream sign-in's verifier as
// values the caller sealed. Errors never name a hash.

// Kinds of [OAuthClient].
const (
	// OAuthClientDynamic is a client registered through RFC 7591.
	OAuthClientDynamic = "dynamic"
	// OAuthClientDocument is a client whose ID is the URL of its client ID
	// metadata document, cached here.
	OAuthClientDocument = "metadata_document"
)

// OAuthClient is an OAuth client the authorization server knows (table
// oauth_clients).
type OAuthClient struct {
	ID           string
	Kind         string // OAuthClientDynamic or OAuthClientDocument
	SecretHash   string // "" for public clients
	AuthMethod   string // token_endpoint_auth_method
	Name         string
	RedirectURIs []string
	GrantTypes   []string
	Scope        string
	// Metadata is the registered or fetched document, without secrets.
	Metadata  json.RawMessage
	CreatedAt time.Time
	// FetchedAt and FreshUntil are those of a metadata document; zero for
	// dynamic clients.
	FetchedAt  time.Time
	FreshUntil time.Time
}

const oauthClientColumns = `client_id, kind, secret_hash, auth_method, name, redirect_uris, grant_types, scope, metadata,
	created_at, fetched_at, fresh_until`

func oauthClientArgs(c OAuthClient) ([]any, error) {
	uris, err := listArg(c.RedirectURIs)
	if err != nil {
		return nil, err
	}
	grants, err := listArg(c.GrantTypes)
	if err != nil {
		return nil, err
	}
	md := string(c.Metadata)
	if md == "" {
		md = "{}"
	}
	return []any{c.ID, c.Kind, c.SecretHash, c.AuthMethod, c.Name, uris, grants, c.Scope, md,
		toNanos(normalize(c.CreatedAt)), zeroNanos(c.FetchedAt), zeroNanos(c.FreshUntil)}, nil
}

func checkOAuthClient(c OAuthClient) error {
	if c.ID == "" || c.Kind == "" || c.AuthMethod == "" {
		return fmt.Errorf("id, kind and auth method are required: %w", ErrInvalid)
	}
	return nil
}

// CreateOAuthClient stores a new client; a taken ID is an error wrapping
// [ErrConflict]. A zero CreatedAt is stored as now.
func (db *DB) CreateOAuthClient(ctx context.Context, c OAuthClient) error {
	if err := checkOAuthClient(c); err != nil {
		return fmt.Errorf("creating OAuth client: %w", err)
	}
	args, err := oauthClientArgs(c)
	if err != nil {
		return fmt.Errorf("creating OAuth client %q: %w", c.ID, err)
	}
	err = db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO oauth_clients (`+oauthClientColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, args...)
		return err
	})
	if err != nil {
		if db.dialect.isConflict(err) {
			return fmt.Errorf("creating OAuth client %q: %w", c.ID, ErrConflict)
		}
		return fmt.Errorf("creating OAuth client %q: %w", c.ID, err)
	}
	return nil
}

// PutOAuthClient stores c, replacing the client with its ID if there is
// one (a refetched metadata document); the first CreatedAt is kept.
func (db *DB) PutOAuthClient(ctx context.Context, c OAuthClient) error {
	if err := checkOAuthClient(c); err != nil {
		return fmt.Errorf("putting OAuth client: %w", err)
	}
	args, err := oauthClientArgs(c)
	if err != nil {
		return fmt.Errorf("putting OAuth client %q: %w", c.ID, err)
	}
	err = db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO oauth_clients (`+oauthClientColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT (client_id) DO UPDATE SET kind = excluded.kind, secret_hash = excluded.secret_hash,
				auth_method = excluded.auth_method, name = excluded.name, redirect_uris = excluded.redirect_uris,
				grant_types = excluded.grant_types, scope = excluded.scope, metadata = excluded.metadata,
				fetched_at = excluded.fetched_at, fresh_until = excluded.fresh_until`, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("putting OAuth client %q: %w", c.ID, err)
	}
	return nil
}

// OAuthClient returns the client with the given ID, or an error wrapping
// [ErrNotFound].
func (db *DB) OAuthClient(ctx context.Context, id string) (OAuthClient, error) {
	c, err := scanOAuthClient(db.reader().QueryRowContext(ctx,
		`SELECT `+oauthClientColumns+` FROM oauth_clients WHERE client_id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return OAuthClient{}, fmt.Errorf("OAuth client %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return OAuthClient{}, fmt.Errorf("OAuth client %q: %w", id, err)
	}
	return c, nil
}

// OAuthClients lists the clients, oldest first.
func (db *DB) OAuthClients(ctx context.Context) ([]OAuthClient, error) {
	rows, err := db.reader().QueryContext(ctx, `SELECT `+oauthClientColumns+` FROM oauth_clients ORDER BY created_at, client_id`)
	if err != nil {
		return nil, fmt.Errorf("listing OAuth clients: %w", err)
	}
	defer rows.Close()
	out := []OAuthClient{}
	for rows.Next() {
		c, err := scanOAuthClient(rows)
		if err != nil {
			return nil, fmt.Errorf("listing OAuth clients: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing OAuth clients: %w", err)
	}
	return out, nil
}

// CountOAuthClients counts the clients of one kind, so that open
// registration can be capped.
func (db *DB) CountOAuthClients(ctx context.Context, kind string) (int, error) {
	var n int
	if err := db.reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM oauth_clients WHERE kind = $1`, kind).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting OAuth clients: %w", err)
	}
	return n, nil
}

// DeleteOAuthClient removes a client, its pending requests and codes, and
// revokes its grants (which stay listed, revoked, with reason) at at. An
// unknown ID is an error wrapping [ErrNotFound].
func (db *DB) DeleteOAuthClient(ctx context.Context, id, reason string, at time.Time) error {
	return db.Transact(ctx, func(tx *DB) error {
		res, err := tx.tx.ExecContext(ctx, `DELETE FROM oauth_clients WHERE client_id = $1`, id)
		if err != nil {
			return fmt.Errorf("deleting OAuth client %q: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = ErrNotFound
			}
			return fmt.Errorf("deleting OAuth client %q: %w", id, err)
		}
		for _, q := range []string{
			`DELETE FROM oauth_requests WHERE client_id = $1`,
			`DELETE FROM oauth_codes WHERE client_id = $1`,
			`DELETE FROM oauth_refresh_tokens WHERE grant_id IN (SELECT id FROM oauth_grants WHERE client_id = $1)`,
		} {
			if _, err := tx.tx.ExecContext(ctx, q, id); err != nil {
				return fmt.Errorf("deleting OAuth client %q: %w", id, err)
			}
		}
		if _, err := tx.tx.ExecContext(ctx, `UPDATE oauth_grants SET revoked_at = $2, revoked_reason = $3
			WHERE client_id = $1 AND revoked_at IS NULL`, id, toNanos(normalize(at)), reason); err != nil {
			return fmt.Errorf("deleting OAuth client %q: %w", id, err)
		}
		return nil
	})
}

func scanOAuthClient(sc scanner) (OAuthClient, error) {
	var c OAuthClient
	var uris, grants, md string
	var created int64
	var fetched, fresh sql.NullInt64
	if err := sc.Scan(&c.ID, &c.Kind, &c.SecretHash, &c.AuthMethod, &c.Name, &uris, &grants, &c.Scope, &md,
		&created, &fetched, &fresh); err != nil {
		return OAuthClient{}, err
	}
	var err error
	if c.RedirectURIs, err = parseList(uris); err != nil {
		return OAuthClient{}, err
	}
	if c.GrantTypes, err = parseList(grants); err != nil {
		return OAuthClient{}, err
	}
	c.Metadata = json.RawMessage(md)
	c.CreatedAt = fromNanos(created)
	c.FetchedAt = zeroTime(fetched)
	c.FreshUntil = zeroTime(fresh)
	return c, nil
}

// OAuthRequest is an authorization request between the authorization
// endpoint and the user's consent (table oauth_requests).
type OAuthRequest struct {
	ID          string
	BrowserHash string // hash of the cookie that binds the request to one browser
	ClientID    string
	Params      json.RawMessage // the validated request, as the caller encodes it
	// IdPStateHash and IdPSecret belong to a sign-in at an upstream
	// identity provider: the hash of the state sent there, and the sealed
	// PKCE verifier and nonce.
	IdPStateHash string
	IdPSecret    string
	// Subject is the signed-in user, nil until then.
	Subject   json.RawMessage
	CreatedAt time.Time
	ExpiresAt time.Time
}

const oauthRequestColumns = `id, browser_hash, client_id, params, idp_state_hash, idp_secret, subject, created_at, expires_at`

// CreateOAuthRequest stores r; a taken ID is an error wrapping
// [ErrConflict].
func (db *DB) CreateOAuthRequest(ctx context.Context, r OAuthRequest) error {
	if r.ID == "" || r.ClientID == "" || r.ExpiresAt.IsZero() {
		return fmt.Errorf("creating OAuth request: id, client and expiry are required: %w", ErrInvalid)
	}
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO oauth_requests (`+oauthRequestColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			r.ID, r.BrowserHash, r.ClientID, string(r.Params), r.IdPStateHash, r.IdPSecret, jsonArg(r.Subject),
			toNanos(normalize(r.CreatedAt)), toNanos(r.ExpiresAt))
		return err
	})
	if err != nil {
		if db.dialect.isConflict(err) {
			return fmt.Errorf("creating OAuth request: %w", ErrConflict)
		}
		return fmt.Errorf("creating OAuth request: %w", err)
	}
	return nil
}

// OAuthRequest returns the request with the given ID, or an error wrapping
// [ErrNotFound]. Expired requests are returned too.
func (db *DB) OAuthRequest(ctx context.Context, id string) (OAuthRequest, error) {
	return db.oauthRequestWhere(ctx, `id = $1`, id)
}

// OAuthRequestByIdPState returns the request whose upstream sign-in sent
// the state with this hash, or an error wrapping [ErrNotFound].
func (db *DB) OAuthRequestByIdPState(ctx context.Context, stateHash string) (OAuthRequest, error) {
	if stateHash == "" {
		return OAuthRequest{}, fmt.Errorf("OAuth request: %w", ErrNotFound)
	}
	return db.oauthRequestWhere(ctx, `idp_state_hash = $1`, stateHash)
}

func (db *DB) oauthRequestWhere(ctx context.Context, where, arg string) (OAuthRequest, error) {
	r, err := scanOAuthRequest(db.reader().QueryRowContext(ctx,
		`SELECT `+oauthRequestColumns+` FROM oauth_requests WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return OAuthRequest{}, fmt.Errorf("OAuth request: %w", ErrNotFound)
	}
	if err != nil {
		return OAuthRequest{}, fmt.Errorf("OAuth request: %w", err)
	}
	return r, nil
}

// SetOAuthRequestSubject records who signed in for the request. An
// unknown ID is an error wrapping [ErrNotFound].
func (db *DB) SetOAuthRequestSubject(ctx context.Context, id string, subject json.RawMessage) error {
	n, err := db.execCount(ctx, "signing in OAuth request",
		`UPDATE oauth_requests SET subject = $2 WHERE id = $1`, id, jsonArg(subject))
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("signing in OAuth request: %w", ErrNotFound)
	}
	return nil
}

// TakeOAuthRequest deletes the request and returns it, so that a consent
// is given (or refused) once: of concurrent callers, one gets the request,
// the others an error wrapping [ErrNotFound].
func (db *DB) TakeOAuthRequest(ctx context.Context, id string) (OAuthRequest, error) {
	var out OAuthRequest
	err := db.Transact(ctx, func(tx *DB) error {
		r, err := scanOAuthRequest(tx.tx.QueryRowContext(ctx,
			`SELECT `+oauthRequestColumns+` FROM oauth_requests WHERE id = $1`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("taking OAuth request: %w", ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("taking OAuth request: %w", err)
		}
		res, err := tx.tx.ExecContext(ctx, `DELETE FROM oauth_requests WHERE id = $1`, id)
		if err != nil {
			return fmt.Errorf("taking OAuth request: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			// Another replica took it between our read and our delete.
			return fmt.Errorf("taking OAuth request: %w", ErrNotFound)
		}
		out = r
		return nil
	})
	return out, err
}

func scanOAuthRequest(sc scanner) (OAuthRequest, error) {
	var r OAuthRequest
	var params string
	var subject sql.NullString
	var created, expires int64
	if err := sc.Scan(&r.ID, &r.BrowserHash, &r.ClientID, &params, &r.IdPStateHash, &r.IdPSecret, &subject,
		&created, &expires); err != nil {
		return OAuthRequest{}, err
	}
	r.Params = json.RawMessage(params)
	if subject.Valid && subject.String != "" {
		r.Subject = json.RawMessage(subject.String)
	}
	r.CreatedAt, r.ExpiresAt = fromNanos(created), fromNanos(expires)
	return r, nil
}

// OAuthCode is an authorization code (table oauth_codes), stored by hash.
type OAuthCode struct {
	Hash          string
	ClientID      string
	RedirectURI   string
	CodeChallenge string
	Scope         string
	Resource      string
	Subject       json.RawMessage
	CreatedAt     time.Time
	ExpiresAt     time.Time
	UsedAt        *time.Time
	// GrantID is the grant the code's exchange created.
	GrantID string
}

const oauthCodeColumns = `code_hash, client_id, redirect_uri, code_challenge, scope, resource, subject, created_at,
	expires_at, used_at, grant_id`

// CreateOAuthCode stores c; a taken hash is an error wrapping
// [ErrConflict].
func (db *DB) CreateOAuthCode(ctx context.Context, c OAuthCode) error {
	if c.Hash == "" || c.ClientID == "" || c.ExpiresAt.IsZero() || len(c.Subject) == 0 {
		return fmt.Errorf("creating OAuth code: hash, client, subject and expiry are required: %w", ErrInvalid)
	}
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO oauth_codes (`+oauthCodeColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			c.Hash, c.ClientID, c.RedirectURI, c.CodeChallenge, c.Scope, c.Resource, string(c.Subject),
			toNanos(normalize(c.CreatedAt)), toNanos(c.ExpiresAt), optNanos(c.UsedAt), c.GrantID)
		return err
	})
	if err != nil {
		if db.dialect.isConflict(err) {
			return fmt.Errorf("creating OAuth code for client %q: %w", c.ClientID, ErrConflict)
		}
		return fmt.Errorf("creating OAuth code for client %q: %w", c.ClientID, err)
	}
	return nil
}

// UseOAuthCode marks the code used at at and returns it. It is one
// conditional UPDATE, so of concurrent exchanges exactly one succeeds; the
// others, and every later one, get the code with an error wrapping
// [ErrTokenUsed] (the caller revokes what the first exchange issued). An
// unknown hash is an error wrapping [ErrNotFound].
func (db *DB) UseOAuthCode(ctx context.Context, hash string, at time.Time) (OAuthCode, error) {
	n, err := db.execCount(ctx, "using OAuth code",
		`UPDATE oauth_codes SET used_at = $2 WHERE code_hash = $1 AND used_at IS NULL`, hash, toNanos(normalize(at)))
	if err != nil {
		return OAuthCode{}, err
	}
	c, err := scanOAuthCode(db.reader().QueryRowContext(ctx, `SELECT `+oauthCodeColumns+` FROM oauth_codes WHERE code_hash = $1`, hash))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return OAuthCode{}, fmt.Errorf("using OAuth code: %w", ErrNotFound)
	case err != nil:
		return OAuthCode{}, fmt.Errorf("using OAuth code: %w", err)
	case n == 0:
		return c, fmt.Errorf("using OAuth code: %w", ErrTokenUsed)
	}
	return c, nil
}

// SetOAuthCodeGrant records the grant a code's exchange created.
func (db *DB) SetOAuthCodeGrant(ctx context.Context, hash, grantID string) error {
	_, err := db.execCount(ctx, "linking OAuth code to its grant",
		`UPDATE oauth_codes SET grant_id = $2 WHERE code_hash = $1`, hash, grantID)
	return err
}

func scanOAuthCode(sc scanner) (OAuthCode, error) {
	var c OAuthCode
	var subject string
	var created, expires int64
	var used sql.NullInt64
	if err := sc.Scan(&c.Hash, &c.ClientID, &c.RedirectURI, &c.CodeChallenge, &c.Scope, &c.Resource, &subject,
		&created, &expires, &used, &c.GrantID); err != nil {
		return OAuthCode{}, err
	}
	c.Subject = json.RawMessage(subject)
	c.CreatedAt, c.ExpiresAt, c.UsedAt = fromNanos(created), fromNanos(expires), optTime(used)
	return c, nil
}

// OAuthGrant is what one consent gave one client for one user (table
// oauth_grants): the family of its refresh tokens, and the grant every
// access token issued under it names.
type OAuthGrant struct {
	ID       string
	ClientID string
	Subject  string // the user, as the access tokens' sub
	// Identity is the user's identity as the caller encodes it.
	Identity    json.RawMessage
	Scope       string
	Resource    string
	CreatedAt   time.Time
	RefreshedAt *time.Time
	// ExpiresAt is when its last token expires, unless refreshed again.
	ExpiresAt     time.Time
	RevokedAt     *time.Time
	RevokedReason string
}

const oauthGrantColumns = `id, client_id, subject, identity, scope, resource, created_at, refreshed_at, expires_at,
	revoked_at, revoked_reason`

// CreateOAuthGrant stores g; a taken ID is an error wrapping [ErrConflict].
func (db *DB) CreateOAuthGrant(ctx context.Context, g OAuthGrant) error {
	if g.ID == "" || g.ClientID == "" || g.ExpiresAt.IsZero() || len(g.Identity) == 0 {
		return fmt.Errorf("creating OAuth grant: id, client, identity and expiry are required: %w", ErrInvalid)
	}
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO oauth_grants (`+oauthGrantColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			g.ID, g.ClientID, g.Subject, string(g.Identity), g.Scope, g.Resource, toNanos(normalize(g.CreatedAt)),
			optNanos(g.RefreshedAt), toNanos(g.ExpiresAt), optNanos(g.RevokedAt), g.RevokedReason)
		return err
	})
	if err != nil {
		if db.dialect.isConflict(err) {
			return fmt.Errorf("creating OAuth grant %q: %w", g.ID, ErrConflict)
		}
		return fmt.Errorf("creating OAuth grant %q: %w", g.ID, err)
	}
	return nil
}

// OAuthGrant returns the grant with the given ID, or an error wrapping
// [ErrNotFound].
func (db *DB) OAuthGrant(ctx context.Context, id string) (OAuthGrant, error) {
	g, err := scanOAuthGrant(db.reader().QueryRowContext(ctx, `SELECT `+oauthGrantColumns+` FROM oauth_grants WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return OAuthGrant{}, fmt.Errorf("OAuth grant %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return OAuthGrant{}, fmt.Errorf("OAuth grant %q: %w", id, err)
	}
	return g, nil
}

// OAuthGrantFilter selects grants; zero fields select everything.
type OAuthGrantFilter struct {
	ClientID string
	Subject  string
	// ActiveAt, when set, keeps the grants neither revoked nor expired at
	// that time.
	ActiveAt time.Time
	// Limit bounds the answer; 0 means 1000.
	Limit int
}

// OAuthGrants lists grants, newest first.
func (db *DB) OAuthGrants(ctx context.Context, f OAuthGrantFilter) ([]OAuthGrant, error) {
	q := `SELECT ` + oauthGrantColumns + ` FROM oauth_grants WHERE 1 = 1`
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		q += fmt.Sprintf(` AND `+cond, len(args))
	}
	if f.ClientID != "" {
		add(`client_id = $%d`, f.ClientID)
	}
	if f.Subject != "" {
		add(`subject = $%d`, f.Subject)
	}
	if !f.ActiveAt.IsZero() {
		add(`revoked_at IS NULL AND expires_at > $%d`, toNanos(f.ActiveAt))
	}
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	args = append(args, f.Limit)
	q += fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT $%d`, len(args))
	rows, err := db.reader().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing OAuth grants: %w", err)
	}
	defer rows.Close()
	out := []OAuthGrant{}
	for rows.Next() {
		g, err := scanOAuthGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("listing OAuth grants: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing OAuth grants: %w", err)
	}
	return out, nil
}

// RefreshOAuthGrant records a refresh of the grant at at, extending it to
// expires.
func (db *DB) RefreshOAuthGrant(ctx context.Context, id string, at, expires time.Time) error {
	_, err := db.execCount(ctx, "refreshing OAuth grant",
		`UPDATE oauth_grants SET refreshed_at = $2, expires_at = $3 WHERE id = $1`,
		id, toNanos(normalize(at)), toNanos(expires))
	return err
}

// RevokeOAuthGrant revokes the grant at at with a reason, and deletes its
// refresh tokens, so that the whole family ends. It reports whether the
// grant was active; an unknown ID is an error wrapping [ErrNotFound].
func (db *DB) RevokeOAuthGrant(ctx context.Context, id, reason string, at time.Time) (bool, error) {
	var revoked bool
	err := db.Transact(ctx, func(tx *DB) error {
		res, err := tx.tx.ExecContext(ctx, `UPDATE oauth_grants SET revoked_at = $2, revoked_reason = $3
			WHERE id = $1 AND revoked_at IS NULL`, id, toNanos(normalize(at)), reason)
		if err != nil {
			return fmt.Errorf("revoking OAuth grant %q: %w", id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("revoking OAuth grant %q: %w", id, err)
		}
		if n == 0 {
			var exists int
			if err := tx.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM oauth_grants WHERE id = $1`, id).Scan(&exists); err != nil {
				return fmt.Errorf("revoking OAuth grant %q: %w", id, err)
			}
			if exists == 0 {
				return fmt.Errorf("revoking OAuth grant %q: %w", id, ErrNotFound)
			}
		}
		revoked = n > 0
		if _, err := tx.tx.ExecContext(ctx, `DELETE FROM oauth_refresh_tokens WHERE grant_id = $1`, id); err != nil {
			return fmt.Errorf("revoking OAuth grant %q: %w", id, err)
		}
		return nil
	})
	return revoked, err
}

func scanOAuthGrant(sc scanner) (OAuthGrant, error) {
	var g OAuthGrant
	var identity string
	var created, expires int64
	var refreshed, revoked sql.NullInt64
	if err := sc.Scan(&g.ID, &g.ClientID, &g.Subject, &identity, &g.Scope, &g.Resource, &created, &refreshed,
		&expires, &revoked, &g.RevokedReason); err != nil {
		return OAuthGrant{}, err
	}
	g.Identity = json.RawMessage(identity)
	g.CreatedAt, g.RefreshedAt, g.ExpiresAt, g.RevokedAt = fromNanos(created), optTime(refreshed), fromNanos(expires), optTime(revoked)
	return g, nil
}

// OAuthRefreshToken is a refresh token of a grant (table
// oauth_refresh_tokens), stored by hash.
type OAuthRefreshToken struct {
	Hash      string
	GrantID   string
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
}

// CreateOAuthRefreshToken stores t; a taken hash is an error wrapping
// [ErrConflict].
func (db *DB) CreateOAuthRefreshToken(ctx context.Context, t OAuthRefreshToken) error {
	if t.Hash == "" || t.GrantID == "" || t.ExpiresAt.IsZero() {
		return fmt.Errorf("creating OAuth refresh token: hash, grant and expiry are required: %w", ErrInvalid)
	}
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO oauth_refresh_tokens (token_hash, grant_id, created_at, expires_at, used_at)
			VALUES ($1, $2, $3, $4, $5)`,
			t.Hash, t.GrantID, toNanos(normalize(t.CreatedAt)), toNanos(t.ExpiresAt), optNanos(t.UsedAt))
		return err
	})
	if err != nil {
		if db.dialect.isConflict(err) {
			return fmt.Errorf("creating OAuth refresh token of grant %q: %w", t.GrantID, ErrConflict)
		}
		return fmt.Errorf("creating OAuth refresh token of grant %q: %w", t.GrantID, err)
	}
	return nil
}

// UseOAuthRefreshToken marks the token used (rotated) at at and returns
// it. Of concurrent callers exactly one succeeds; the others, and every
// later one, get the token with an error wrapping [ErrTokenUsed], a reuse.
// An unknown hash (or one whose grant was revoked, which deletes its
// tokens) is an error wrapping [ErrNotFound].
func (db *DB) UseOAuthRefreshToken(ctx context.Context, hash string, at time.Time) (OAuthRefreshToken, error) {
	n, err := db.execCount(ctx, "using OAuth refresh token",
		`UPDATE oauth_refresh_tokens SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL`, hash, toNanos(normalize(at)))
	if err != nil {
		return OAuthRefreshToken{}, err
	}
	var t OAuthRefreshToken
	var created, expires int64
	var used sql.NullInt64
	err = db.reader().QueryRowContext(ctx, `SELECT token_hash, grant_id, created_at, expires_at, used_at
		FROM oauth_refresh_tokens WHERE token_hash = $1`, hash).Scan(&t.Hash, &t.GrantID, &created, &expires, &used)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return OAuthRefreshToken{}, fmt.Errorf("using OAuth refresh token: %w", ErrNotFound)
	case err != nil:
		return OAuthRefreshToken{}, fmt.Errorf("using OAuth refresh token: %w", err)
	}
	t.CreatedAt, t.ExpiresAt, t.UsedAt = fromNanos(created), fromNanos(expires), optTime(used)
	if n == 0 {
		return t, fmt.Errorf("using OAuth refresh token: %w", ErrTokenUsed)
	}
	return t, nil
}

// OAuthSigningKey is a key the authorization server signs tokens with
// (table oauth_signing_keys).
type OAuthSigningKey struct {
	ID         string // the JWK's kid
	Generation int64  // unique: one successor per key, however many replicas rotate
	Alg        string
	PrivateKey string // sealed by the caller
	PublicJWK  json.RawMessage
	CreatedAt  time.Time // published from
	ActiveFrom time.Time // signs from
	RetireAt   time.Time // signs until
	ExpiresAt  time.Time // published until
}

// CreateOAuthSigningKey stores k. A taken ID or generation is an error
// wrapping [ErrConflict]: another replica rotated first.
func (db *DB) CreateOAuthSigningKey(ctx context.Context, k OAuthSigningKey) error {
	return db.createSigningKey(ctx, "oauth_signing_keys", "OAuth signing key", k)
}

// OAuthSigningKeys lists the signing keys, oldest generation first.
func (db *DB) OAuthSigningKeys(ctx context.Context) ([]OAuthSigningKey, error) {
	return db.signingKeys(ctx, "oauth_signing_keys", "OAuth signing keys")
}

// createSigningKey stores k in table (oauth_signing_keys or
// upstream_signing_keys, of the same shape); what names it in errors.
func (db *DB) createSigningKey(ctx context.Context, table, what string, k OAuthSigningKey) error {
	if k.ID == "" || k.PrivateKey == "" || len(k.PublicJWK) == 0 || k.ActiveFrom.IsZero() || k.RetireAt.IsZero() || k.ExpiresAt.IsZero() {
		return fmt.Errorf("creating %s: id, keys and times are required: %w", what, ErrInvalid)
	}
	err := db.atomic(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, `INSERT INTO `+table+` (id, generation, alg, private_key, public_jwk, created_at,
			active_from, retire_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			k.ID, k.Generation, k.Alg, k.PrivateKey, string(k.PublicJWK), toNanos(normalize(k.CreatedAt)),
			toNanos(k.ActiveFrom), toNanos(k.RetireAt), toNanos(k.ExpiresAt))
		return err
	})
	if err != nil {
		if db.dialect.isConflict(err) {
			return fmt.Errorf("creating %s generation %d: %w", what, k.Generation, ErrConflict)
		}
		return fmt.Errorf("creating %s generation %d: %w", what, k.Generation, err)
	}
	return nil
}

// signingKeys lists the keys of table, oldest generation first.
func (db *DB) signingKeys(ctx context.Context, table, what string) ([]OAuthSigningKey, error) {
	rows, err := db.reader().QueryContext(ctx, `SELECT id, generation, alg, private_key, public_jwk, created_at, active_from,
		retire_at, expires_at FROM `+table+` ORDER BY generation`)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", what, err)
	}
	defer rows.Close()
	out := []OAuthSigningKey{}
	for rows.Next() {
		var k OAuthSigningKey
		var jwk string
		var created, active, retire, expires int64
		if err := rows.Scan(&k.ID, &k.Generation, &k.Alg, &k.PrivateKey, &jwk, &created, &active, &retire, &expires); err != nil {
			return nil, fmt.Errorf("listing %s: %w", what, err)
		}
		k.PublicJWK = json.RawMessage(jwk)
		k.CreatedAt, k.ActiveFrom, k.RetireAt, k.ExpiresAt = fromNanos(created), fromNanos(active), fromNanos(retire), fromNanos(expires)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing %s: %w", what, err)
	}
	return out, nil
}

// oauthCodeKeep is how long past its expiry a code is kept.
const oauthCodeKeep = time.Hour

// PurgeOAuth deletes what can no longer serve at now: expired requests,
// codes (an hour after), refresh tokens and signing keys, and grants that expired or were
// revoked before now minus keep (kept that long for the admin view). It
// returns how many rows it deleted. The newest signing key is never
// deleted.
func (db *DB) PurgeOAuth(ctx context.Context, now time.Time, keep time.Duration) (int64, error) {
	at, old := toNanos(now), toNanos(now.Add(-keep))
	// A used code is kept a while past its expiry, so that a late second
	// exchange is still seen as a reuse and revokes what the first issued.
	codes := toNanos(now.Add(-oauthCodeKeep))
	var total int64
	err := db.Transact(ctx, func(tx *DB) error {
		for _, st := range []struct {
			q    string
			args []any
		}{
			{`DELETE FROM oauth_requests WHERE expires_at <= $1`, []any{at}},
			{`DELETE FROM oauth_codes WHERE expires_at <= $1`, []any{codes}},
			{`DELETE FROM oauth_refresh_tokens WHERE expires_at <= $1`, []any{at}},
			{`DELETE FROM oauth_signing_keys WHERE expires_at <= $1
				AND generation < (SELECT MAX(generation) FROM oauth_signing_keys)`, []any{at}},
			{`DELETE FROM oauth_grants WHERE expires_at <= $1 OR revoked_at <= $1`, []any{old}},
		} {
			res, err := tx.tx.ExecContext(ctx, st.q, st.args...)
			if err != nil {
				return fmt.Errorf("purging OAuth state: %w", err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("purging OAuth state: %w", err)
			}
			total += n
		}
		return nil
	})
	return total, err
}
