package upstreamoauth

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// The refresh scenario of issue 19's acceptance: access tokens that live
// 20 s, refreshed 8 s before they expire, under 3 minutes of calls at 10
// per second through two replicas sharing a PostgreSQL store.
const (
	refreshTTL    = 20 * time.Second
	refreshMargin = 8 * time.Second
	loadDuration  = 3 * time.Minute
	loadInterval  = 100 * time.Millisecond // 10 calls per second
)

// TestRefreshUnderLoadTwoReplicas: with the provider's access tokens
// living 20 s, 3 minutes of calls at 10/s spread over two gateway
// replicas on one PostgreSQL store all succeed; the provider's own log of
// the tokens it issued shows each refresh before the previous token
// expired and exactly one refresh per token (the provider rotates refresh
// tokens and revokes the grant if one is used twice, so a second refresh
// by the other replica would have failed every later call); the
// resource server never saw an expired token; and no token or client
// secret is in clear in either replica's logs, API answers, metrics or a
// pg_dump.
func TestRefreshUnderLoadTwoReplicas(t *testing.T) {
	t.Parallel()
	dsn := storetest.StartPostgres(t)
	lnA, lnB := listen(t), listen(t)
	p := startIdP(t, []string{"http://" + lnA.Addr().String() + "/oauth/upstream/callback",
		"http://" + lnB.Addr().String() + "/oauth/upstream/callback"}, refreshTTL)
	up := newProtectedDemo(t, p)
	yaml := "settings:\n  listen: LISTEN\nauth:\n  mode: keys\nservers:\n" + up.serverYAML()
	yaml = replaceMargin(yaml, int(refreshMargin.Seconds()))
	env := map[string]string{"UP_SECRET": p.clientSecret}
	a := startGatewayOn(t, lnA, yaml, env, dsn)
	b := startGatewayOn(t, lnB, yaml, env, dsn)

	authorize(t, a)
	// The other replica uses the grant the first one stored.
	if code, body := b.rest(t, adminKey, "POST", "/api/v1/aggregator/servers/prot/connect", nil); code >= 300 {
		t.Fatalf("connect on replica b: %d %v", code, body)
	}
	waitFor(t, "prot CONNECTED on replica b", func() bool { return b.serverByName(t, adminKey, "prot")["status"] == "CONNECTED" })

	// The calls go through the REST API, on the replicas' shared upstream
	// sessions: an MCP client of the 2026-07-28 revision is stateless, and
	// each of its calls would open (and authorize) an upstream session of
	// its own, which measures the machine rather than the refresh.
	key := a.newKey(t, "load")
	gateways := []*gateway{a, b}
	var calls, failed atomic.Int64
	var failMu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < int(loadDuration/loadInterval); i++ {
		// On a schedule, not after the previous call: a slow call does
		// not slow the load down.
		time.Sleep(time.Until(start.Add(time.Duration(i) * loadInterval)))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			calls.Add(1)
			text := fmt.Sprintf("call %d", i)
			code, body, err := gateways[i%2].tryRest(t.Context(), key, "POST", "/api/v1/mcp/invoke",
				map[string]any{"server_id": "prot", "tool_name": "echo", "params": map[string]any{"text": text}})
			if err == nil && code == http.StatusOK && body["success"] == true && strings.Contains(fmt.Sprint(body["result"]), text) {
				return
			}
			failed.Add(1)
			failMu.Lock()
			defer failMu.Unlock()
			failures = append(failures, fmt.Sprintf("%s on replica %c: %d %v %v", text, 'a'+i%2, code, body, err))
		}(i)
	}
	wg.Wait()
	t.Logf("%d calls in %s, %d failed", calls.Load(), time.Since(start).Round(time.Second), failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d of %d calls failed; first: %v", failed.Load(), calls.Load(), failures[:min(5, len(failures))])
	}
	if n := up.rejected.Load(); n != 0 {
		t.Errorf("the resource server refused %d requests for their token: a token was used after it expired", n)
	}

	// The provider's log: the authorization, then refreshes, each before
	// the previous token expired and none twice for the same token.
	issued := p.issued(t)
	if len(issued) == 0 || issued[0].GrantType != "authorization_code" {
		t.Fatalf("token log %+v: want the authorization first", issued)
	}
	refreshes := 0
	for i, is := range issued {
		at := time.UnixMilli(is.At)
		if i == 0 {
			t.Logf("token issue log: %s %s (expires_in %d s)", at.Format("15:04:05.000"), is.GrantType, is.ExpiresIn)
			continue
		}
		prev := issued[i-1]
		gap := at.Sub(time.UnixMilli(prev.At))
		expiredAt := time.UnixMilli(prev.At).Add(time.Duration(prev.ExpiresIn) * time.Second)
		t.Logf("token issue log: %s %s (expires_in %d s), %s after the previous, %s before it expired",
			at.Format("15:04:05.000"), is.GrantType, is.ExpiresIn, gap.Round(time.Millisecond), expiredAt.Sub(at).Round(time.Millisecond))
		if is.GrantType != "refresh_token" {
			t.Errorf("issue %d is a %s, want refresh_token", i, is.GrantType)
			continue
		}
		refreshes++
		if !at.Before(expiredAt) {
			t.Errorf("refresh %d came %s after the previous token expired", i, at.Sub(expiredAt))
		}
		// A refresh starts once the token is within the margin of its
		// expiry: a second refresh of the same token would follow the
		// first at once, not a token lifetime minus the margin later.
		if earliest := refreshTTL - refreshMargin - 2*time.Second; gap < earliest {
			t.Errorf("refresh %d came %s after the previous issue: two refreshes of one token", i, gap)
		}
	}
	// Who refreshed: each replica logs its own refreshes; together, one
	// per token.
	byA := strings.Count(a.logs.String(), `msg="upstream token refreshed"`)
	byB := strings.Count(b.logs.String(), `msg="upstream token refreshed"`)
	t.Logf("refreshes: %d by the provider's log; %d by replica a, %d by replica b", refreshes, byA, byB)
	if byA+byB != refreshes {
		t.Errorf("the replicas logged %d refreshes, the provider issued %d", byA+byB, refreshes)
	}
	if want := int(loadDuration / refreshTTL); refreshes < want {
		t.Errorf("%d refreshes in %s of calls, want at least %d", refreshes, loadDuration, want)
	}
	assertNoSecrets(t, p, up, []*gateway{a, b}, "", dsn)
	if code, _ := a.rest(t, adminKey, "GET", "/api/v1/aggregator/servers/prot/auth", nil); code != http.StatusOK {
		t.Errorf("GET auth on replica a: %d", code)
	}
}

// replaceMargin sets refresh_margin_seconds in a server definition.
func replaceMargin(yaml string, seconds int) string {
	return replaceOnce(yaml, "refresh_margin_seconds: 5", fmt.Sprintf("refresh_margin_seconds: %d", seconds))
}
