package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// testOAuthClients: clients are created once, replaced by Put (metadata
// documents, keeping their first CreatedAt), listed, and deleted with
// their grants revoked and their tokens gone.
func testOAuthClients(t *testing.T, db *store.DB) {
	ctx := t.Context()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	dyn := store.OAuthClient{
		ID: "c_dyn", Kind: store.OAuthClientDynamic, SecretHash: "h1", AuthMethod: "client_secret_basic", Name: "Dyn",
		RedirectURIs: []string{"http://127.0.0.1/cb"}, GrantTypes: []string{"authorization_code", "refresh_token"},
		Scope: "mcp", Metadata: json.RawMessage(`{"client_name":"Dyn"}`), CreatedAt: t0,
	}
	if err := db.CreateOAuthClient(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateOAuthClient(ctx, dyn); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second CreateOAuthClient = %v, want ErrConflict", err)
	}
	if err := db.CreateOAuthClient(ctx, store.OAuthClient{ID: "x"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CreateOAuthClient without kind = %v, want ErrInvalid", err)
	}
	got, err := db.OAuthClient(ctx, "c_dyn")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dyn, got); diff != "" {
		t.Errorf("OAuthClient (-want +got):\n%s", diff)
	}
	doc := store.OAuthClient{
		ID: "https://app.example/client.json", Kind: store.OAuthClientDocument, AuthMethod: "none",
		RedirectURIs: []string{"https://app.example/cb"}, GrantTypes: []string{"authorization_code"},
		Metadata: json.RawMessage(`{}`), CreatedAt: t0.Add(time.Minute), FetchedAt: t0.Add(time.Minute),
		FreshUntil: t0.Add(time.Hour),
	}
	if err := db.PutOAuthClient(ctx, doc); err != nil {
		t.Fatal(err)
	}
	refetched := doc
	refetched.CreatedAt = t0.Add(2 * time.Hour)
	refetched.FetchedAt, refetched.FreshUntil = t0.Add(2*time.Hour), t0.Add(3*time.Hour)
	refetched.Name = "App"
	if err := db.PutOAuthClient(ctx, refetched); err != nil {
		t.Fatal(err)
	}
	refetched.CreatedAt = doc.CreatedAt
	list, err := db.OAuthClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.OAuthClient{dyn, refetched}, list); diff != "" {
		t.Errorf("OAuthClients (-want +got):\n%s", diff)
	}
	if n, err := db.CountOAuthClients(ctx, store.OAuthClientDynamic); err != nil || n != 1 {
		t.Errorf("CountOAuthClients(dynamic) = %d, %v", n, err)
	}

	g := mustGrant(t, db, "g1", "c_dyn", t0)
	if err := db.CreateOAuthRefreshToken(ctx, store.OAuthRefreshToken{Hash: "rt1", GrantID: g.ID, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteOAuthClient(ctx, "c_dyn", "client deleted", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteOAuthClient(ctx, "c_dyn", "again", t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second DeleteOAuthClient = %v, want ErrNotFound", err)
	}
	if _, err := db.OAuthClient(ctx, "c_dyn"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted client: %v", err)
	}
	got2, err := db.OAuthGrant(ctx, "g1")
	if err != nil || got2.RevokedAt == nil || got2.RevokedReason != "client deleted" {
		t.Errorf("grant of a deleted client = %+v, %v; want revoked", got2, err)
	}
	if _, err := db.UseOAuthRefreshToken(ctx, "rt1", t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refresh token of a deleted client: %v, want ErrNotFound", err)
	}
}

func mustGrant(t *testing.T, db *store.DB, id, client string, at time.Time) store.OAuthGrant {
	t.Helper()
	g := store.OAuthGrant{ID: id, ClientID: client, Subject: "alice", Identity: json.RawMessage(`{"agent_id":"alice"}`),
		Scope: "mcp", Resource: "https://gw.example/mcp", CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
	if err := db.CreateOAuthGrant(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	return g
}

// testOAuthRequests: a pending authorization request is found by ID and
// by its upstream state hash, signed in, and taken exactly once however
// many callers race for it.
func testOAuthRequests(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := store.OAuthRequest{ID: "r1", BrowserHash: "bh", ClientID: "c", Params: json.RawMessage(`{"state":"s"}`),
		IdPStateHash: "sh", IdPSecret: "enc:v1:x", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	if err := db.CreateOAuthRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateOAuthRequest(ctx, r); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second CreateOAuthRequest = %v, want ErrConflict", err)
	}
	for name, get := range map[string]func() (store.OAuthRequest, error){
		"by id":    func() (store.OAuthRequest, error) { return db.OAuthRequest(ctx, "r1") },
		"by state": func() (store.OAuthRequest, error) { return db.OAuthRequestByIdPState(ctx, "sh") },
	} {
		got, err := get()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if _, err := db.OAuthRequestByIdPState(ctx, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("empty state hash: %v, want ErrNotFound", err)
	}
	subject := json.RawMessage(`{"agent_id":"alice"}`)
	if err := db.SetOAuthRequestSubject(ctx, "r1", subject); err != nil {
		t.Fatal(err)
	}
	if err := db.SetOAuthRequestSubject(ctx, "nope", subject); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetOAuthRequestSubject(unknown) = %v", err)
	}
	var mu sync.Mutex
	var taken []store.OAuthRequest
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			got, err := db.TakeOAuthRequest(ctx, "r1")
			switch {
			case err == nil:
				mu.Lock()
				taken = append(taken, got)
				mu.Unlock()
			case !errors.Is(err, store.ErrNotFound):
				t.Errorf("TakeOAuthRequest: %v", err)
			}
		})
	}
	wg.Wait()
	if len(taken) != 1 || string(taken[0].Subject) != string(subject) {
		t.Fatalf("takers got %+v, want one request with its subject", taken)
	}
	if _, err := db.OAuthRequest(ctx, "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a taken request is still there: %v", err)
	}
}

// testOAuthCodesAndTokens: a code and a refresh token are used exactly
// once under concurrency; a second use returns the row with ErrTokenUsed so
// that the caller can revoke; revoking a grant ends its token family.
func testOAuthCodesAndTokens(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := store.OAuthCode{Hash: "ch", ClientID: "c", RedirectURI: "http://127.0.0.1/cb", CodeChallenge: "cc",
		Scope: "mcp", Resource: "https://gw.example/mcp", Subject: json.RawMessage(`{"agent_id":"alice"}`),
		CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
	if err := db.CreateOAuthCode(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateOAuthCode(ctx, c); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second CreateOAuthCode = %v, want ErrConflict", err)
	}
	var mu sync.Mutex
	wins, reuses := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			got, err := db.UseOAuthCode(ctx, "ch", now)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrTokenUsed) && got.ClientID == "c":
				reuses++
			default:
				t.Errorf("UseOAuthCode = %+v, %v", got, err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || reuses != 3 {
		t.Errorf("code used %d times, %d reuses; want 1 and 3", wins, reuses)
	}
	if err := db.SetOAuthCodeGrant(ctx, "ch", "g1"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.UseOAuthCode(ctx, "ch", now); !errors.Is(err, store.ErrTokenUsed) || got.GrantID != "g1" || got.UsedAt == nil {
		t.Errorf("reused code = %+v, %v; want its grant and ErrTokenUsed", got, err)
	}
	if _, err := db.UseOAuthCode(ctx, "unknown", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown code: %v", err)
	}

	g := mustGrant(t, db, "g1", "c", now)
	if err := db.CreateOAuthGrant(ctx, g); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second CreateOAuthGrant = %v, want ErrConflict", err)
	}
	for _, h := range []string{"rt1", "rt2"} {
		if err := db.CreateOAuthRefreshToken(ctx, store.OAuthRefreshToken{Hash: h, GrantID: "g1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	wins, reuses = 0, 0
	for range 4 {
		wg.Go(func() {
			got, err := db.UseOAuthRefreshToken(ctx, "rt1", now)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && got.GrantID == "g1":
				wins++
			case errors.Is(err, store.ErrTokenUsed) && got.GrantID == "g1":
				reuses++
			default:
				t.Errorf("UseOAuthRefreshToken = %+v, %v", got, err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || reuses != 3 {
		t.Errorf("refresh token used %d times, %d reuses; want 1 and 3", wins, reuses)
	}
	later := now.Add(time.Minute)
	if err := db.RefreshOAuthGrant(ctx, "g1", later, later.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _ := db.OAuthGrant(ctx, "g1")
	if got.RefreshedAt == nil || !got.RefreshedAt.Equal(later) || !got.ExpiresAt.Equal(later.Add(48*time.Hour)) {
		t.Errorf("refreshed grant = %+v", got)
	}
	if active, err := db.OAuthGrants(ctx, store.OAuthGrantFilter{ActiveAt: later}); err != nil || len(active) != 1 {
		t.Errorf("active grants = %+v, %v", active, err)
	}
	revoked, err := db.RevokeOAuthGrant(ctx, "g1", "refresh token reused", later)
	if err != nil || !revoked {
		t.Fatalf("RevokeOAuthGrant = %v, %v", revoked, err)
	}
	if revoked, err := db.RevokeOAuthGrant(ctx, "g1", "again", later); err != nil || revoked {
		t.Errorf("second RevokeOAuthGrant = %v, %v; want false, nil", revoked, err)
	}
	if _, err := db.RevokeOAuthGrant(ctx, "nope", "x", later); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeOAuthGrant(unknown) = %v", err)
	}
	if _, err := db.UseOAuthRefreshToken(ctx, "rt2", later); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a token of a revoked family: %v, want ErrNotFound", err)
	}
	got, _ = db.OAuthGrant(ctx, "g1")
	if got.RevokedAt == nil || got.RevokedReason != "refresh token reused" {
		t.Errorf("revoked grant = %+v", got)
	}
	if active, _ := db.OAuthGrants(ctx, store.OAuthGrantFilter{ActiveAt: later}); len(active) != 0 {
		t.Errorf("active grants after revoke = %+v", active)
	}
	mustGrant(t, db, "g2", "other", now.Add(time.Second))
	for _, tc := range []struct {
		f    store.OAuthGrantFilter
		want []string
	}{
		{store.OAuthGrantFilter{}, []string{"g2", "g1"}},
		{store.OAuthGrantFilter{ClientID: "c"}, []string{"g1"}},
		{store.OAuthGrantFilter{Subject: "alice", Limit: 1}, []string{"g2"}},
		{store.OAuthGrantFilter{Subject: "bob"}, []string{}},
	} {
		list, err := db.OAuthGrants(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, g := range list {
			ids = append(ids, g.ID)
		}
		if diff := cmp.Diff(tc.want, ids); diff != "" {
			t.Errorf("OAuthGrants(%+v) (-want +got):\n%s", tc.f, diff)
		}
	}
}

// testOAuthSigningKeys: one key per generation (two replicas rotating at
// once make one successor), and a purge keeps the newest key and unexpired
// state while deleting the rest.
func testOAuthSigningKeys(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	key := func(id string, gen int64, from time.Time) store.OAuthSigningKey {
		return store.OAuthSigningKey{ID: id, Generation: gen, Alg: "ES256", PrivateKey: "enc:v1:" + id,
			PublicJWK: json.RawMessage(`{"kid":"` + id + `"}`), CreatedAt: from, ActiveFrom: from,
			RetireAt: from.Add(time.Hour), ExpiresAt: from.Add(2 * time.Hour)}
	}
	k1 := key("k1", 1, now)
	if err := db.CreateOAuthSigningKey(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateOAuthSigningKey(ctx, key("k1b", 1, now)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second key of generation 1 = %v, want ErrConflict", err)
	}
	k2 := key("k2", 2, now.Add(time.Hour))
	if err := db.CreateOAuthSigningKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	keys, err := db.OAuthSigningKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.OAuthSigningKey{k1, k2}, keys); diff != "" {
		t.Errorf("OAuthSigningKeys (-want +got):\n%s", diff)
	}

	// Purge far in the future: k1 expired, k2 too but is the newest.
	if err := db.CreateOAuthRequest(ctx, store.OAuthRequest{ID: "r", ClientID: "c", Params: json.RawMessage(`{}`), ExpiresAt: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	mustGrant(t, db, "g", "c", now)
	later := now.Add(10 * time.Hour)
	n, err := db.PurgeOAuth(ctx, later, 30*24*time.Hour)
	if err != nil || n != 2 {
		t.Errorf("PurgeOAuth = %d, %v; want the request and k1 deleted", n, err)
	}
	keys, _ = db.OAuthSigningKeys(ctx)
	if len(keys) != 1 || keys[0].ID != "k2" {
		t.Errorf("keys after purge = %+v, want k2 alone", keys)
	}
	if _, err := db.OAuthGrant(ctx, "g"); err != nil {
		t.Errorf("a grant expired within keep was purged: %v", err)
	}
	if _, err := db.PurgeOAuth(ctx, later.Add(31*24*time.Hour), 30*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := db.OAuthGrant(ctx, "g"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a grant expired beyond keep survived: %v", err)
	}
}
