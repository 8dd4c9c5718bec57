package signkeys_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/signkeys"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// TestRingsShareOneTable: rings of several replicas on one table make one
// key, one successor per rotation, and publish the same keys; a ring whose
// secret key cannot open the active key refuses to make another. (The
// built-in authorization server's TestKeyRotation and TestKeySealedElsewhere
// cover the schedule in detail.)
func TestRingsShareOneTable(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "sb.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	kr, _ := secrets.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ring := func(seal signkeys.Sealer) *signkeys.Ring {
		return signkeys.New(signkeys.Options{List: db.UpstreamSigningKeys, Create: db.CreateUpstreamSigningKey, Seal: seal, Clock: clock,
			Rotation: time.Hour, Lead: 10 * time.Minute, Keep: time.Minute, What: "test key"})
	}
	rings := []*signkeys.Ring{ring(kr), ring(kr), ring(kr)}

	var wg sync.WaitGroup
	kids := make([]string, len(rings))
	for i, r := range rings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := r.Signer(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			kids[i] = k.Row.ID
		}()
	}
	wg.Wait()
	if kids[0] == "" || kids[0] != kids[1] || kids[1] != kids[2] {
		t.Fatalf("the replicas sign with %v, want one key", kids)
	}
	mu.Lock()
	now = now.Add(55 * time.Minute) // within Lead of retirement
	mu.Unlock()
	for _, r := range rings {
		if k, err := r.Signer(t.Context()); err != nil || k.Row.ID != kids[0] {
			t.Fatalf("before retirement: %v %v, want the first key", k.Row.ID, err)
		}
	}
	rows, _ := db.UpstreamSigningKeys(t.Context())
	if len(rows) != 2 {
		t.Fatalf("%d keys stored, want the key and one successor", len(rows))
	}
	keys, _ := rings[0].Load(t.Context(), true)
	doc, _ := signkeys.JWKS(keys, clock())
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil || len(set.Keys) != 2 || set.Keys[0]["d"] != "" {
		t.Fatalf("JWKS %s: want both public keys", doc)
	}

	other, _ := secrets.NewKeyring([]byte("another-secret-key-of-32-bytes!!"))
	if _, err := ring(other).Signer(t.Context()); err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_SECRET_KEY") {
		t.Errorf("a ring with another secret key: %v, want a refusal naming SWITCHBOARD_SECRET_KEY", err)
	}
}
