package upstreamoauth

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// assertNoSecrets checks that none of the secrets of a run is in clear
// anywhere the gateways put things: the client secrets, every access and
// refresh token the provider issued (as it reports them), in the logs of
// every gateway, their API answers (servers, the auth state, the audit
// log), /metrics, the SQLite files matching sqliteGlob and a pg_dump of
// dsn (either may be "").
func assertNoSecrets(t *testing.T, p *idp, up *protectedDemo, gws []*gateway, sqliteGlob, dsn string) {
	t.Helper()
	tokens := p.tokens(t)
	// The check can fail: the tokens the resource server saw are among
	// those the provider reports.
	reported := map[string]bool{}
	for _, tok := range tokens {
		reported[tok] = true
	}
	presented := up.presented()
	for _, tok := range presented {
		if !reported[tok] {
			t.Fatalf("the resource server saw a token the provider did not report: the secret list is incomplete")
		}
	}
	if len(presented) == 0 || len(tokens) <= len(presented) {
		t.Fatalf("%d tokens issued, %d presented: want refresh tokens too", len(tokens), len(presented))
	}
	secrets := append([]string{p.clientSecret, p.rsSecret}, tokens...)
	check := func(where, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds a secret in clear (%d bytes, starting %.4s…)", where, len(s), s)
				return
			}
		}
	}
	for i, g := range gws {
		check("gateway log", g.logs.String())
		for _, path := range []string{"/api/v1/aggregator/servers", "/api/v1/aggregator/servers/prot", "/api/v1/aggregator/servers/prot/auth",
			"/api/v1/audit?limit=1000", "/api/v1/aggregator/servers/prot/history", "/metrics"} {
			check(fmt.Sprintf("gateway %d GET %s", i, path), g.raw(t, path))
		}
	}
	if sqliteGlob != "" {
		files, _ := filepath.Glob(sqliteGlob)
		if len(files) == 0 {
			t.Fatalf("no SQLite file matches %s", sqliteGlob)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			check(f, string(raw))
		}
	}
	if dsn != "" {
		dump := storetest.Dump(t, dsn)
		if !strings.Contains(dump, "upstream_tokens") {
			t.Fatalf("pg_dump has no upstream_tokens table")
		}
		check("pg_dump", dump)
	}
}

// raw GETs path as the admin and returns the body; the answer must be 200.
func (g *gateway) raw(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.url()+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(body)
}
