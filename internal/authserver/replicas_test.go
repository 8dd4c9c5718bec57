package authserver

import (
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// TestTwoReplicas: two gateways share one store behind a round-robin
// balancer, so every step of a flow (registration, authorize, sign-in,
// consent, code exchange, refresh, revocation, the resource's check) lands
// on the other replica than the step before. SQLite (one file, two
// handles) and PostgreSQL.
func TestTwoReplicas(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) []*store.DB{
		"sqlite": func(t *testing.T) []*store.DB {
			path := filepath.Join(t.TempDir(), "shared.db")
			return []*store.DB{openStore(t, path), openStore(t, path)}
		},
		"postgres": func(t *testing.T) []*store.DB {
			dsn := storetest.StartPostgres(t)
			return []*store.DB{openStore(t, dsn), openStore(t, dsn)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, &harnessOpts{dbs: open(t)})
			key := h.keys.add(t, "alice", nil)
			c := h.register(t, nil)
			for i := range 3 {
				// The balancer's phase moves with each flow's request count.
				h.next.Add(int64(i))
				tk := h.flow(t, c, key)
				for range 2 {
					if r := h.call(t, "/mcp", tk.AccessToken); r.status != http.StatusOK {
						t.Fatalf("flow %d: access token on a replica: %d %s", i, r.status, r.body)
					}
				}
				tk2 := decodeTokens(t, h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken}, "client_id": {c.ID}}, nil))
				// Reuse on the other replica revokes the family on both.
				r := h.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tk.RefreshToken}, "client_id": {c.ID}}, nil)
				if oauthErr(t, r) != errInvalidGrant {
					t.Fatalf("flow %d: reuse: %d %s", i, r.status, r.body)
				}
				// The replica that did not see the reuse learns of it from
				// the store's notification (on PostgreSQL, asynchronously).
				waitFor(t, func() bool {
					a, b := h.call(t, "/mcp", tk2.AccessToken), h.call(t, "/mcp", tk2.AccessToken)
					return a.status == http.StatusUnauthorized && b.status == http.StatusUnauthorized
				})
			}
			// Both replicas sign with the same key and publish the same set.
			a, err := h.replicas[0].srv.KeySet(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			b, err := h.replicas[1].srv.KeySet(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if string(a) != string(b) {
				t.Errorf("replicas publish different key sets:\n%s\n%s", a, b)
			}
			keys, _ := h.db.OAuthSigningKeys(t.Context())
			if len(keys) != 1 {
				t.Errorf("%d signing keys made by two replicas, want 1", len(keys))
			}
		})
	}
}

// TestRevocationReachesOtherReplica: a grant revoked through one replica's
// admin API is refused by the other at once, although the other cached it
// as active: the store's notification tells it.
func TestRevocationReachesOtherReplica(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	h := newHarness(t, &harnessOpts{dbs: []*store.DB{openStore(t, dsn), openStore(t, dsn)}})
	key := h.keys.add(t, "alice", nil)
	c := h.register(t, nil)
	tk := h.flow(t, c, key)
	claims := claimsOf(t, tk.AccessToken)
	// Both replicas have checked the grant (and cached it as active).
	for _, rep := range h.replicas {
		if err := rep.srv.CheckToken(t.Context(), claims); err != nil {
			t.Fatal(err)
		}
	}
	grant, _ := claims[claimGrant].(string)
	if err := h.replicas[0].srv.RevokeGrant(t.Context(), grant, "admin"); err != nil {
		t.Fatal(err)
	}
	// The clock does not move: only the notification can clear the cache.
	waitFor(t, func() bool { return h.replicas[1].srv.CheckToken(t.Context(), claims) != nil })
}

// waitFor polls cond until it holds, failing after 10 s: notifications
// travel through the database, asynchronously.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
