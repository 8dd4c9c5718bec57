package tlsserve_test

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/tlsserve"
	"github.com/switchboard-mcp/switchboard/internal/tlsserve/tlstest"
)

func TestNewFileErrors(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	certPEM, keyPEM := ca.Server(t, "one")
	_, otherKey := ca.Server(t, "two")
	cert := tlstest.WriteFile(t, dir, "tls.crt", certPEM)
	key := tlstest.WriteFile(t, dir, "tls.key", keyPEM)
	tests := []struct {
		name      string
		cfg       tlsserve.Config
		wantField string
	}{
		{"missing cert", tlsserve.Config{CertFile: filepath.Join(dir, "none.crt"), KeyFile: key}, "cert_file"},
		{"missing key", tlsserve.Config{CertFile: cert, KeyFile: filepath.Join(dir, "none.key")}, "key_file"},
		{"key as cert", tlsserve.Config{CertFile: key, KeyFile: key}, "cert_file"},
		{"cert as key", tlsserve.Config{CertFile: cert, KeyFile: cert}, "key_file"},
		{"key of another cert", tlsserve.Config{CertFile: cert, KeyFile: tlstest.WriteFile(t, dir, "other.key", otherKey)}, "key_file"},
		{"missing client CA", tlsserve.Config{CertFile: cert, KeyFile: key, ClientCAFile: filepath.Join(dir, "none-ca.crt")}, "client_ca_file"},
		{"client CA not PEM", tlsserve.Config{CertFile: cert, KeyFile: key, ClientCAFile: tlstest.WriteFile(t, dir, "junk", []byte("junk"))}, "client_ca_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tlsserve.New(tt.cfg, nil)
			var fe *tlsserve.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FileError", err)
			}
			if fe.Field != tt.wantField {
				t.Errorf("field = %q, want %q (error: %v)", fe.Field, tt.wantField, err)
			}
		})
	}
	if _, err := tlsserve.New(tlsserve.Config{CertFile: cert, KeyFile: key, ClientCAFile: tlstest.WriteFile(t, dir, "ca.crt", ca.PEM)}, nil); err != nil {
		t.Fatalf("valid files: %v", err)
	}
}

// serve accepts TLS connections on loopback with src's configuration and
// completes their handshakes, until the test ends.
func serve(t *testing.T, src *tlsserve.Source) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", src.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
			})
		}
	})
	return ln.Addr().String()
}

// servedCN dials addr and returns the common name of the certificate the
// server presents.
func servedCN(t *testing.T, addr string, ca *tlstest.CA) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func TestReloadServesNewCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	c1, k1 := ca.Server(t, "first")
	cert := tlstest.WriteFile(t, dir, "tls.crt", c1)
	key := tlstest.WriteFile(t, dir, "tls.key", k1)
	src, err := tlsserve.New(tlsserve.Config{CertFile: cert, KeyFile: key}, &tlsserve.Options{Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { src.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	addr := serve(t, src)
	if got := servedCN(t, addr, ca); got != "first" {
		t.Fatalf("served %q, want first", got)
	}
	// An open connection keeps its certificate across the reload.
	open, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	// A half-written renewal (new cert, old key) is refused; the old pair
	// stays served.
	c2, k2 := ca.Server(t, "second")
	tlstest.WriteFile(t, dir, "tls.crt", c2)
	if changed, err := src.Reload(); err == nil || changed {
		t.Fatalf("Reload with a mismatched key = %v, %v; want an error", changed, err)
	}
	if got := servedCN(t, addr, ca); got != "first" {
		t.Fatalf("after a half-written renewal served %q, want first", got)
	}
	tlstest.WriteFile(t, dir, "tls.key", k2)
	deadline := time.Now().Add(10 * time.Second)
	for servedCN(t, addr, ca) != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not served within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := open.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "first" {
		t.Errorf("open connection's certificate = %q, want first", got)
	}
}

func TestClientAuth(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "server CA")
	clientCA := tlstest.NewCA(t, "client CA")
	stranger := tlstest.NewCA(t, "stranger CA")
	c, k := ca.Server(t, "gw")
	base := tlsserve.Config{
		CertFile:     tlstest.WriteFile(t, dir, "tls.crt", c),
		KeyFile:      tlstest.WriteFile(t, dir, "tls.key", k),
		ClientCAFile: tlstest.WriteFile(t, dir, "clients.crt", clientCA.PEM),
	}
	// pair sends a certificate whatever CAs the server names: Go's client
	// would otherwise hold back one the server did not ask for.
	pair := func(ca *tlstest.CA) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		cp, kp := ca.Client(t, "agent-1")
		p, err := tls.X509KeyPair(cp, kp)
		if err != nil {
			t.Fatal(err)
		}
		return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &p, nil }
	}
	tests := []struct {
		name     string
		require  bool
		certs    func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
		wantOK   bool
		verified bool
	}{
		{"request, no cert", false, nil, true, false},
		{"request, good cert", false, pair(clientCA), true, true},
		{"request, foreign cert", false, pair(stranger), false, false},
		{"require, no cert", true, nil, false, false},
		{"require, good cert", true, pair(clientCA), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.RequireClientCert = tt.require
			src, err := tlsserve.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := tls.Listen("tcp", "127.0.0.1:0", src.TLSConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan tls.ConnectionState, 1)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					close(got)
					return
				}
				defer conn.Close()
				tc := conn.(*tls.Conn)
				if tc.Handshake() == nil {
					got <- tc.ConnectionState()
				}
				close(got)
			}()
			// The server's handshake decides: with TLS 1.3 the client's
			// Dial may succeed before the server refuses its certificate.
			if conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", GetClientCertificate: tt.certs}); err == nil {
				defer conn.Close()
			}
			st, served := <-got
			if served != tt.wantOK {
				t.Fatalf("handshake accepted = %v, want %v", served, tt.wantOK)
			}
			if served && (len(st.VerifiedChains) > 0) != tt.verified {
				t.Errorf("verified chains = %d, want verified %v", len(st.VerifiedChains), tt.verified)
			}
		})
	}
}
