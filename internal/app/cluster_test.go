package app_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// replica is a gateway process (this test binary re-executed as
// `switchboard serve`) sharing a store with others.
type replica struct {
	*gateway
	cmd  *exec.Cmd
	logs *logtest.Buffer
}

const clusterAdmin = "cluster-admin-key"

// startReplica runs `switchboard serve` on a free port against dsn and
// waits until it is ready.
func startReplica(t *testing.T, dsn, cfgPath string) *replica {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(os.Args[0], "serve", "--config", cfgPath, "--store", dsn, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Env = append(os.Environ(), gatewayEnv+"=1", "SWITCHBOARD_ADMIN_KEY="+clusterAdmin, "SWITCHBOARD_SECRET_KEY="+testSecretKey)
	logs := &logtest.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{gateway: &gateway{http: nil, logs: logs}, cmd: cmd, logs: logs}
	r.gateway.base = fmt.Sprintf("http://127.0.0.1:%d", port)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("replica %s logs:\n%s", r.base, logs.String())
		}
	})
	waitFor(t, "replica "+r.base+" ready", func() bool {
		code, _, err := r.tryRest("", "GET", "/readyz", nil)
		return err == nil && code == 200
	})
	return r
}

// since measures how long cond takes to hold, polling every 10 ms; it fails
// the test after 30 s (a bound on a broken build, not a speed requirement:
// the figure is logged and reported).
func since(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 30*time.Second {
		if cond() {
			d := time.Since(start)
			t.Logf("%s after %v", what, d.Round(time.Millisecond))
			return d
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not within 30 s", what)
	return 0
}

func clusterConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "switchboard.yaml")
	yaml := "auth:\n  mode: keys\nsettings:\n  retry_base_ms: 1\n  retry_max_delay_ms: 5\n  circuit_failure_threshold: 3\n  circuit_cooldown_seconds: 3600\nservers: {}\n"
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReplicasShareState is F2: two gateway processes on one PostgreSQL.
func TestReplicasShareState(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	up := newFaultyUpstream(t)
	cfg := clusterConfig(t)
	a := startReplica(t, dsn, cfg)
	b := startReplica(t, dsn, cfg)

	// Both replicas list each other.
	since(t, "both replicas in /api/v1/cluster", func() bool {
		_, body := b.restAs(t, clusterAdmin, "GET", "/api/v1/cluster", nil)
		reps, _ := body["replicas"].([]any)
		return len(reps) == 2 && body["backend"] == "postgres"
	})

	// A server registered on A is callable on B.
	code, body := a.restAs(t, clusterAdmin, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "up", "transport_type": "HTTP", "auto_connect": true,
		"connection_config": map[string]any{"url": up.srv.URL + "/mcp", "headers": map[string]any{"X-Upstream-Token": "sup3r-s3cret-header"}},
	})
	if code != 201 {
		t.Fatalf("register on A: %d %v", code, body)
	}
	serverDelay := since(t, "server registered on A callable on B", func() bool {
		code, _ := b.restAs(t, clusterAdmin, "POST", "/api/v1/tools/call", map[string]any{"name": "up.echo", "arguments": map[string]any{"text": "x"}})
		return code == 200
	})

	// A grant made on A is effective on B; a revoke on A is denied on B.
	_, body = a.restAs(t, clusterAdmin, "POST", "/api/v1/keys", map[string]any{"agent_id": "agent"})
	key, _ := body["key"].(string)
	callB := func() int {
		code, _ := b.restAs(t, key, "POST", "/api/v1/tools/call", map[string]any{"name": "up.echo", "arguments": map[string]any{"text": "x"}})
		return code
	}
	if c := callB(); c != 403 {
		t.Fatalf("agent before the grant on B: %d, want 403", c)
	}
	_, body = a.restAs(t, clusterAdmin, "POST", "/api/v1/mcp/policies/grant", map[string]any{"agent_id": "agent", "tool_name": "up.echo"})
	grant, _ := body["grant"].(map[string]any)
	grantDelay := since(t, "grant on A effective on B", func() bool { return callB() == 200 })
	if code, _ := a.restAs(t, clusterAdmin, "DELETE", "/api/v1/mcp/policies/grant/"+grant["id"].(string), nil); code >= 300 {
		t.Fatalf("revoke on A: %d", code)
	}
	revokeDelay := since(t, "revoke on A denied on B", func() bool { return callB() == 403 })

	// An idempotent call made on A replays on B: the upstream runs it once.
	writes := up.count("write")
	idem := map[string]any{"server_id": "up", "tool_name": "write", "params": map[string]any{"text": "once"}, "idempotency_key": "replica-key"}
	codeA, bodyA := a.restAs(t, clusterAdmin, "POST", "/api/v1/mcp/invoke", idem)
	codeB, bodyB := b.restAs(t, clusterAdmin, "POST", "/api/v1/mcp/invoke", idem)
	if codeA != 200 || codeB != 200 || up.count("write") != writes+1 || fmt.Sprint(bodyA["result"]) != fmt.Sprint(bodyB["result"]) {
		t.Errorf("idempotent call on A then B: %d %v / %d %v; upstream ran it %d times, want 1", codeA, bodyA, codeB, bodyB, up.count("write")-writes)
	}

	// A breaker opened by failures on A is open on B.
	up.failAll.Store(true)
	since(t, "breaker open on A", func() bool {
		_, body := a.restAs(t, clusterAdmin, "POST", "/api/v1/tools/call", map[string]any{"name": "up.echo", "arguments": map[string]any{"text": "x"}})
		return errorCode(body) == "circuit_open"
	})
	before := up.count("echo")
	breakerDelay := since(t, "breaker open on B", func() bool {
		_, body := b.restAs(t, clusterAdmin, "POST", "/api/v1/tools/call", map[string]any{"name": "up.echo", "arguments": map[string]any{"text": "x"}})
		return errorCode(body) == "circuit_open"
	})
	_ = before
	n := up.count("echo")
	for range 3 {
		b.restAs(t, clusterAdmin, "POST", "/api/v1/tools/call", map[string]any{"name": "up.echo", "arguments": map[string]any{"text": "x"}})
	}
	if up.count("echo") != n {
		t.Error("B's open breaker let calls through")
	}
	t.Logf("propagation: server %v, grant %v, revoke %v, breaker %v", serverDelay, grantDelay, revokeDelay, breakerDelay)

	// F4: the secret header is in no byte of a dump of the database.
	pgDump := filepath.Join(pgBinDir(t), "pg_dump")
	out, err := exec.Command(pgDump, "--data-only", "--dbname", dsn).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("sup3r-s3cret-header")) {
		t.Error("the database dump holds the secret header in plaintext")
	}
	if !bytes.Contains(out, []byte("enc:v1:")) {
		t.Error("the dump shows no sealed value: was the header stored at all?")
	}
	// The API shows it masked.
	_, body = b.restAs(t, clusterAdmin, "GET", "/api/v1/aggregator/servers/up", nil)
	if strings.Contains(fmt.Sprint(body), "sup3r-s3cret-header") {
		t.Errorf("the API shows the secret: %v", body)
	}
}

// pgBinDir finds PostgreSQL's binaries as the store's test harness does.
func pgBinDir(t *testing.T) string {
	for _, d := range []string{os.Getenv(storetest.PostgresBinEnv), "/usr/lib/postgresql/15/bin"} {
		if d != "" {
			if _, err := os.Stat(filepath.Join(d, "pg_dump")); err == nil {
				return d
			}
		}
	}
	t.Skip("pg_dump not found")
	return ""
}

// TestReplicaKilledUnderLoad is F3: SIGKILL replica A while both serve
// calls: B's clients see no error, and every call A answered before it died
// has its audit row.
func TestReplicaKilledUnderLoad(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	up := newFaultyUpstream(t)
	cfg := clusterConfig(t)
	a := startReplica(t, dsn, cfg)
	b := startReplica(t, dsn, cfg)
	if code, body := a.restAs(t, clusterAdmin, "POST", "/api/v1/aggregator/servers", map[string]any{
		"name": "up", "transport_type": "HTTP", "auto_connect": true, "connection_config": map[string]any{"url": up.srv.URL + "/mcp"},
	}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	since(t, "server callable on B", func() bool {
		code, _ := b.restAs(t, clusterAdmin, "POST", "/api/v1/tools/call", map[string]any{"name": "up.echo", "arguments": map[string]any{"text": "x"}})
		return code == 200
	})

	var mu sync.Mutex
	var answeredByA []string
	var bErrors, bCalls atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() { // load on A: remember every call A answered
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("a-%d-%d", w, i)
				code, _, err := a.tryInvoke(clusterAdmin, id)
				if err != nil {
					return // A is gone
				}
				if code == 200 {
					mu.Lock()
					answeredByA = append(answeredByA, id)
					mu.Unlock()
				}
			}
		})
		wg.Go(func() { // load on B: must never fail
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := b.tryInvoke(clusterAdmin, fmt.Sprintf("b-%d-%d", w, i))
				bCalls.Add(1)
				if err != nil || code != 200 {
					bErrors.Add(1)
					t.Errorf("call on B failed: %d %v %v", code, body, err)
				}
			}
		})
	}
	time.Sleep(time.Second) // let both serve load before the kill
	if err := syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // B keeps serving after A is gone
	close(stop)
	wg.Wait()
	mu.Lock()
	done := append([]string(nil), answeredByA...)
	mu.Unlock()
	t.Logf("A answered %d calls before SIGKILL; B served %d calls, %d errors", len(done), bCalls.Load(), bErrors.Load())
	if len(done) == 0 {
		t.Fatal("A answered nothing before the kill")
	}
	// Every call A answered is in the audit log (read through B).
	have := map[string]bool{}
	cursor := ""
	for {
		path := "/api/v1/audit?kind=invocation&limit=1000"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		_, body := b.restAs(t, clusterAdmin, "GET", path, nil)
		recs, _ := body["records"].([]any)
		for _, r := range recs {
			m := r.(map[string]any)
			if id, _ := m["correlation_id"].(string); id != "" {
				have[id] = true
			}
		}
		cursor, _ = body["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	missing := 0
	for _, id := range done {
		if !have[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the %d calls A answered have no audit row", missing, len(done))
	}
}

// tryInvoke calls up.echo with a correlation id, reporting transport
// errors instead of failing (the replica may be dead).
func (g *gateway) tryInvoke(key, correlation string) (int, map[string]any, error) {
	return g.tryRest(key, "POST", "/api/v1/mcp/invoke", map[string]any{"server_id": "up", "tool_name": "echo",
		"params": map[string]any{"text": correlation}, "correlation_id": correlation})
}

// TestSecretsAtRest: a literal secret header of a server registered through
// the API is stored sealed (no plaintext in the SQLite files), shown masked,
// usable after a restart; without a secret key the gateway refuses to store
// it and says how to configure one.
func TestSecretsAtRest(t *testing.T) {
	up := newFaultyUpstream(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "switchboard.db")
	g := startGatewayStore(t, "servers: {}\n", nil, dbPath)
	reg := map[string]any{"name": "up", "transport_type": "HTTP", "auto_connect": true,
		"connection_config": map[string]any{"url": up.srv.URL + "/mcp", "headers": map[string]any{"X-Upstream-Token": "sup3r-s3cret-header"}}}
	if code, body := g.rest(t, "POST", "/api/v1/aggregator/servers", reg); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	_, body := g.rest(t, "GET", "/api/v1/aggregator/servers/up", nil)
	if strings.Contains(fmt.Sprint(body), "sup3r-s3cret-header") {
		t.Errorf("the API shows the secret: %v", body)
	}
	g.http.Close()
	g.app.Close(t.Context())
	for _, f := range []string{dbPath, dbPath + "-wal"} {
		raw, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("sup3r-s3cret-header")) {
			t.Errorf("%s holds the secret in plaintext", filepath.Base(f))
		}
	}
	// After a restart the sealed header is opened and the server works.
	g2 := startGatewayStore(t, "servers: {}\n", nil, dbPath)
	waitFor(t, "up connected after the restart", func() bool {
		code, _ := g2.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "up.echo", "arguments": map[string]any{"text": "x"}})
		return code == 200
	})
	// Rotation: re-encrypt with a new key (the old one readable meanwhile);
	// a gateway holding only the new key then reads the secret.
	g2.http.Close()
	g2.app.Close(t.Context())
	newKey := "bmV3LXN3aXRjaGJvYXJkLXRlc3Qta2V5LTMyLWJ5dGU="
	n, err := servers.RotateSecrets(t.Context(), dbPath, func(k string) string {
		switch k {
		case "SWITCHBOARD_SECRET_KEY":
			return newKey
		case "SWITCHBOARD_SECRET_KEY_OLD":
			return testSecretKey
		}
		return ""
	})
	if err != nil || n != 1 {
		t.Fatalf("RotateSecrets = %d, %v; want 1 value re-encrypted", n, err)
	}
	g4 := startGatewayStore(t, "servers: {}\n", map[string]string{"SWITCHBOARD_SECRET_KEY": newKey}, dbPath)
	waitFor(t, "up connected with the rotated key", func() bool {
		code, _ := g4.rest(t, "POST", "/api/v1/tools/call", map[string]any{"name": "up.echo", "arguments": map[string]any{"text": "x"}})
		return code == 200
	})

	// Without a key (and not in local mode, which makes its own): refused,
	// with the way out.
	g3 := startGateway(t, "auth:\n  mode: keys\nservers: {}\n", map[string]string{"SWITCHBOARD_SECRET_KEY": "", "SWITCHBOARD_ADMIN_KEY": clusterAdmin})
	reg["name"] = "up2"
	code, body := g3.restAs(t, clusterAdmin, "POST", "/api/v1/aggregator/servers", reg)
	if code != 422 || !strings.Contains(fmt.Sprint(body), "SWITCHBOARD_SECRET_KEY") {
		t.Errorf("literal secret without a key: %d %v, want 422 naming SWITCHBOARD_SECRET_KEY", code, body)
	}
}

// TestReplicasShareAccessOverride: a default_access override of a config
// file's server set on one replica applies on the other, and so does its
// reset.
func TestReplicasShareAccessOverride(t *testing.T) {
	dsn := storetest.StartPostgres(t)
	up := newFaultyUpstream(t)
	cfg := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(cfg, []byte("auth:\n  mode: keys\nservers:"+up.yaml("notes")), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, dsn, cfg)
	b := startReplica(t, dsn, cfg)
	_, body := a.restAs(t, clusterAdmin, "POST", "/api/v1/keys", map[string]any{"agent_id": "reader", "workspace_policy": true})
	key, _ := body["key"].(string)
	callB := func() int {
		code, _ := b.restAs(t, key, "POST", "/api/v1/tools/call", map[string]any{"name": "notes.echo", "arguments": map[string]any{"text": "x"}})
		return code
	}
	since(t, "the workspace-policy key calls notes on B", func() bool { return callB() == 200 })
	if code, body := a.restAs(t, clusterAdmin, "PATCH", "/api/v1/aggregator/servers/notes", map[string]any{"default_access": "deny"}); code != 200 {
		t.Fatalf("override on A: %d %v", code, body)
	}
	overrideDelay := since(t, "the override on A applied on B", func() bool {
		_, s := b.restAs(t, clusterAdmin, "GET", "/api/v1/aggregator/servers/notes", nil)
		return s["default_access_source"] == "override" && callB() == 403
	})
	if code, body := b.restAs(t, clusterAdmin, "DELETE", "/api/v1/aggregator/servers/notes/default_access", nil); code != 200 {
		t.Fatalf("reset on B: %d %v", code, body)
	}
	resetDelay := since(t, "the reset on B applied on A", func() bool {
		code, _ := a.restAs(t, key, "POST", "/api/v1/tools/call", map[string]any{"name": "notes.echo", "arguments": map[string]any{"text": "x"}})
		_, s := a.restAs(t, clusterAdmin, "GET", "/api/v1/aggregator/servers/notes", nil)
		return code == 200 && s["default_access_source"] == "config"
	})
	t.Logf("propagation: override %v, reset %v", overrideDelay, resetDelay)
}
