package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// npmRegistry is the public registry the proxy below forwards to.
const npmRegistry = "https://registry.npmjs.org"

// registryProxy forwards npm's requests to the public registry and can
// hold back the tarballs of chosen packages, as a slow network does, until
// released.
type registryProxy struct {
	*httptest.Server
	mu      sync.Mutex
	hold    map[string]bool // package name → its tarballs wait
	release chan struct{}
	held    chan string // told of each tarball held
}

func newRegistryProxy(t *testing.T) *registryProxy {
	p := &registryProxy{hold: map[string]bool{}, release: make(chan struct{}), held: make(chan string, 64)}
	client := &http.Client{Timeout: 2 * time.Minute}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Tarballs are /<name>/-/<file>.tgz, names possibly scoped.
		if name, _, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/-/"); ok {
			p.mu.Lock()
			hold, release := p.hold[name], p.release
			p.mu.Unlock()
			if hold {
				select {
				case p.held <- name:
				default:
				}
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, npmRegistry+r.URL.RequestURI(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for _, h := range []string{"Accept", "Accept-Encoding", "User-Agent", "Npm-Command"} {
			if v := r.Header.Get(h); v != "" {
				req.Header.Set(h, v)
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(p.Close)
	return p
}

// holdTarballs makes the tarballs of the named packages wait until Release.
func (p *registryProxy) holdTarballs(names ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range names {
		p.hold[n] = true
	}
}

func (p *registryProxy) releaseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.release)
	p.hold = map[string]bool{}
}

// TestNpxFirstStartEmptyCache is issue 20's first-run criterion with a real
// `npx -y` and the real registry: a server started through npx on an empty
// npm cache reaches CONNECTED with the default settings; a start that
// times out in the middle of the download (its tarballs held back by a
// proxy) is killed, and the cache it leaves lets the next start connect.
func TestNpxFirstStartEmptyCache(t *testing.T) {
	if _, err := exec.LookPath("npx"); err != nil {
		if os.Getenv("SWITCHBOARD_REQUIRE_NPM") == "1" {
			t.Fatal("npx is not on PATH")
		}
		t.Skip("npx is not on PATH")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, npmRegistry+"/-/ping", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		if os.Getenv("SWITCHBOARD_REQUIRE_NETWORK") == "1" {
			t.Fatalf("the npm registry cannot be reached: %v", err)
		}
		t.Skipf("the npm registry cannot be reached (set SWITCHBOARD_REQUIRE_NETWORK=1 to fail instead): %v", err)
	} else {
		resp.Body.Close()
	}
	version := npmLockVersion(t, "@modelcontextprotocol/server-memory")
	dir := t.TempDir()
	server := func(name, cache string, proxy *registryProxy, extra string) string {
		return fmt.Sprintf(`
  %s:
    command: npx
    args: [-y, "@modelcontextprotocol/server-memory@%s"]
    env:
      npm_config_cache: %q
      npm_config_registry: %q
      npm_config_update_notifier: "false"
      npm_config_fund: "false"
      npm_config_audit: "false"
      MEMORY_FILE_PATH: %q
    auto_start: true
%s`, name, version, cache, proxy.URL+"/", filepath.Join(dir, name+".jsonl"), extra)
	}
	cacheA, cacheB := filepath.Join(dir, "cache-a"), filepath.Join(dir, "cache-b")

	// fresh has the default settings; slow's registry holds back the
	// tarball of one dependency, so its first start times out (startup
	// 2 s, 8 s with the first-start allowance) in the middle of its install
	// and its processes are killed.
	open, held := newRegistryProxy(t), newRegistryProxy(t)
	held.holdTarballs("zod")
	g := startGateway(t, "servers:"+server("fresh", cacheA, open, "")+
		server("slow", cacheB, held, "    startup_timeout_seconds: 2\n    restart_on_failure: false\n"), nil)
	waitForLong(t, 2*time.Minute, "fresh to connect", func() bool { return g.serverByName(t, "fresh")["status"] == "CONNECTED" })
	waitForLong(t, 2*time.Minute, "slow to time out", func() bool {
		s := g.serverByName(t, "slow")
		return s["status"] == "ERROR" && strings.Contains(fmt.Sprint(s["error_message"]), "timed out")
	})
	held.releaseAll()

	// The cache the killed install left behind serves the next start.
	if code, body := g.rest(t, "POST", "/api/v1/aggregator/servers/slow/connect?wait=true", nil); code != 200 {
		t.Fatalf("connect slow: %d %v", code, body)
	}
	if s := g.serverByName(t, "slow"); s["status"] != "CONNECTED" {
		t.Fatalf("after a killed install, the next start of slow: %v (%v)", s["status"], s["error_message"])
	}
	cs := g.connect(t, "/mcp")
	for _, tool := range []string{"fresh.read_graph", "slow.read_graph"} {
		if _, res := callText(t, cs, tool, map[string]any{}); res.IsError {
			t.Errorf("%s failed: %+v", tool, res.Content)
		}
	}
}

// waitForLong is waitFor with a deadline of its own, for steps that
// download packages.
func waitForLong(t *testing.T, max time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(max)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// npmLockVersion is the version of an npm package pinned in
// testdata/npm/package-lock.json, so the test downloads what the other
// tests run.
func npmLockVersion(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdeps.RepoRoot(), "testdata", "npm", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatal(err)
	}
	v := lock.Packages["node_modules/"+name].Version
	if v == "" {
		t.Fatalf("%s is not in testdata/npm/package-lock.json", name)
	}
	return v
}
