package app_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/logtest"
	"github.com/switchboard-mcp/switchboard/internal/tlsserve/tlstest"
)

// tlsGateway serves yaml over HTTPS through App.Serve on a loopback
// listener, as `switchboard serve` does, and returns its base URL.
func tlsGateway(t *testing.T, yaml string, env map[string]string) (string, *logtest.Buffer) {
	t.Helper()
	getenv := func(k string) string { return env[k] }
	cfg, err := config.Parse("test.yaml", []byte(yaml), getenv)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Settings.Store = filepath.Join(t.TempDir(), "switchboard.db")
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := app.New(t.Context(), cfg, &app.Options{Logger: logger, Getenv: getenv, SelfExecutable: os.Args[0],
		CertPollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	a.StartAndWait()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.Serve(ctx, ln); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		a.Close(context.Background())
		if t.Failed() {
			t.Logf("gateway logs:\n%s", logs.String())
		}
	})
	return "https://" + ln.Addr().String(), logs
}

// tlsClient trusts ca and presents cert (nil: no client certificate).
// Each client has its own transport, so each dial is a new handshake.
func tlsClient(ca *tlstest.CA, cert *tls.Certificate, rt func(http.RoundTripper) http.RoundTripper) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}
	if cert != nil {
		tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	var c http.RoundTripper = tr
	if rt != nil {
		c = rt(tr)
	}
	return &http.Client{Transport: c}
}

// servedCN is the common name of the certificate a new connection to url
// gets.
func servedCN(t *testing.T, url string, ca *tlstest.CA) string {
	t.Helper()
	resp, err := tlsClient(ca, nil, nil).Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.TLS.PeerCertificates[0].Subject.CommonName
}

func TestServeTLSReloadsCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	c1, k1 := ca.Server(t, "gateway-1")
	cert := tlstest.WriteFile(t, dir, "tls.crt", c1)
	key := tlstest.WriteFile(t, dir, "tls.key", k1)
	url, _ := tlsGateway(t, "settings:\n  listen_tls:\n    cert_file: "+cert+"\n    key_file: "+key+"\n    min_version: \"1.3\"\nservers:"+demoServer("demo"), nil)

	// A go-sdk client that trusts the test CA lists the tools over TLS.
	cs := connectClient(t, &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: tlsClient(ca, nil, nil)})
	if _, ok := toolNames(t, cs)["demo.echo"]; !ok {
		t.Fatalf("demo.echo not listed over TLS")
	}
	if got := servedCN(t, url, ca); got != "gateway-1" {
		t.Fatalf("served %q, want gateway-1", got)
	}
	// Plain HTTP to the TLS port is not served.
	if resp, err := http.Get("http://" + strings.TrimPrefix(url, "https://") + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP to the TLS listener: %d", resp.StatusCode)
		}
	}

	// Renew: new connections get the new certificate, with no restart; the
	// open session keeps working.
	c2, k2 := ca.Server(t, "gateway-2")
	tlstest.WriteFile(t, dir, "tls.key", k2)
	tlstest.WriteFile(t, dir, "tls.crt", c2)
	deadline := time.Now().Add(30 * time.Second)
	for servedCN(t, url, ca) != "gateway-2" {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not served within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if text, _ := callText(t, cs, "demo.echo", map[string]any{"text": "still here"}); !strings.Contains(text, "still here") {
		t.Errorf("call on the session opened before the renewal = %q", text)
	}
}

func TestServeTLSClientCertificates(t *testing.T) {
	const admin = "admin-bootstrap-key"
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "server CA")
	clientCA := tlstest.NewCA(t, "client CA")
	c, k := ca.Server(t, "gateway")
	yaml := "auth:\n  mode: keys\nsettings:\n  listen_tls:\n" +
		"    cert_file: " + tlstest.WriteFile(t, dir, "tls.crt", c) + "\n" +
		"    key_file: " + tlstest.WriteFile(t, dir, "tls.key", k) + "\n" +
		"    client_ca_file: " + tlstest.WriteFile(t, dir, "clients.crt", clientCA.PEM) + "\n" +
		"servers:" + demoServer("demo")
	url, _ := tlsGateway(t, yaml, map[string]string{"SWITCHBOARD_ADMIN_KEY": admin})
	pair := func(cn string) *tls.Certificate {
		cp, kp := clientCA.Client(t, cn)
		p, err := tls.X509KeyPair(cp, kp)
		if err != nil {
			t.Fatal(err)
		}
		return &p
	}
	// The admin grants agent-a demo.echo through the API (over TLS).
	adminClient := tlsClient(ca, nil, func(rt http.RoundTripper) http.RoundTripper { return bearerRT{admin, rt} })
	resp, err := adminClient.Post(url+"/api/v1/mcp/policies/grant", "application/json",
		strings.NewReader(`{"agent_id": "agent-a", "tool_name": "demo.echo"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("grant: %d", resp.StatusCode)
	}

	tests := []struct {
		name     string
		cert     *tls.Certificate
		wantTool bool // demo.echo listed and callable
	}{
		{"granted agent", pair("agent-a"), true},
		{"agent without grants", pair("agent-b"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := connectClient(t, &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: tlsClient(ca, tt.cert, nil)})
			_, listed := toolNames(t, cs)["demo.echo"]
			if listed != tt.wantTool {
				t.Errorf("demo.echo listed = %v, want %v", listed, tt.wantTool)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "demo.echo", Arguments: map[string]any{"text": "hi"}})
			allowed := err == nil && !res.IsError
			if allowed != tt.wantTool {
				t.Errorf("demo.echo allowed = %v (err %v), want %v", allowed, err, tt.wantTool)
			}
		})
	}

	// No certificate and no key: 401, as before.
	resp, err = tlsClient(ca, nil, nil).Get(url + "/api/v1/tools")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no credentials over TLS: %d, want 401", resp.StatusCode)
	}
	// A certificate from another CA fails the handshake.
	stranger := tlstest.NewCA(t, "stranger CA")
	sp, sk := stranger.Client(t, "agent-a")
	spair, err := tls.X509KeyPair(sp, sk)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := tlsClient(ca, &spair, nil).Get(url + "/api/v1/tools"); err == nil {
		resp.Body.Close()
		t.Errorf("a certificate of a foreign CA was served: %d", resp.StatusCode)
	}
}

// bearerRT adds a bearer to every request.
type bearerRT struct {
	key string
	rt  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.rt.RoundTrip(r)
}

func TestListenerSecurityAtStart(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	c, k := ca.Server(t, "gw")
	cert := tlstest.WriteFile(t, dir, "tls.crt", c)
	key := tlstest.WriteFile(t, dir, "tls.key", k)
	const keys = "auth:\n  mode: keys\n"
	tests := []struct {
		name      string
		yaml      string
		wantField string // "" = starts
		wantLine  int
		wantMsg   string
		wantLog   string
	}{
		{name: "plain HTTP off loopback refused", yaml: keys + "settings:\n  listen: 0.0.0.0:0\n",
			wantField: "settings.listen", wantMsg: "allow_plain_http"},
		{name: "plain HTTP off loopback allowed explicitly", yaml: keys + "settings:\n  listen: 0.0.0.0:0\n  allow_plain_http: true\n",
			wantLog: "allow_plain_http is true"},
		{name: "TLS off loopback", yaml: keys + "settings:\n  listen: 0.0.0.0:0\n  listen_tls: {cert_file: " + cert + ", key_file: " + key + "}\n"},
		{name: "local mode off loopback still refused with TLS", yaml: "settings:\n  listen: 0.0.0.0:0\n  listen_tls: {cert_file: " + cert + ", key_file: " + key + "}\n",
			wantField: "settings.listen", wantMsg: "without authentication"},
		{name: "missing cert file", yaml: "settings:\n  listen_tls:\n    cert_file: " + filepath.Join(dir, "nope.crt") + "\n    key_file: " + key + "\n",
			wantField: "settings.listen_tls.cert_file", wantLine: 2, wantMsg: "nope.crt"},
		{name: "key of the wrong file", yaml: "settings:\n  listen_tls:\n    cert_file: " + cert + "\n    key_file: " + cert + "\n",
			wantField: "settings.listen_tls.key_file", wantLine: 2, wantMsg: "cannot use"},
		{name: "client CA not PEM", yaml: "settings:\n  listen_tls:\n    cert_file: " + cert + "\n    key_file: " + key + "\n    client_ca_file: " + key + "\n",
			wantField: "settings.listen_tls.client_ca_file", wantLine: 2, wantMsg: "no PEM CERTIFICATE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte(tt.yaml+"servers: {}\n"), func(string) string { return "" })
			if err != nil {
				t.Fatalf("config: %v", err)
			}
			cfg.Settings.Store = filepath.Join(t.TempDir(), "switchboard.db")
			logs := &logtest.Buffer{}
			a, err := app.New(t.Context(), cfg, &app.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)),
				Getenv: func(string) string { return "" }})
			if err == nil {
				a.Close(context.Background())
			}
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("app.New: %v", err)
				}
				if !strings.Contains(logs.String(), tt.wantLog) {
					t.Errorf("logs lack %q:\n%s", tt.wantLog, logs.String())
				}
				return
			}
			var errs config.Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("err = %v, want one config error", err)
			}
			if e := errs[0]; e.Field != tt.wantField || e.Line != tt.wantLine || !strings.Contains(e.Msg, tt.wantMsg) {
				t.Errorf("error = %s (line %d), want field %s line %d containing %q", e, e.Line, tt.wantField, tt.wantLine, tt.wantMsg)
			}
		})
	}
}
