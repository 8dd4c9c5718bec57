// Package tlsserve is the gateway's HTTPS listener configuration: a
// certificate source that re-reads its PEM files when they change, so that
// a renewed certificate (cert-manager, certbot, a rotated secret) is served
// to new connections without a restart and without dropping the sessions
// of connections already open; and optional mutual TLS.
package tlsserve

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often [Source.Run] checks the files when
// [Options.Interval] is zero.
const DefaultInterval = 5 * time.Second

// Config names the files and the policy of the listener.
type Config struct {
	CertFile string // PEM certificate chain, leaf first
	KeyFile  string // PEM private key of the leaf
	// ClientCAFile, when set, holds the PEM CA certificates that sign
	// client certificates: a client certificate is requested and, when
	// sent, must verify against them.
	ClientCAFile string
	// RequireClientCert refuses handshakes without a verified client
	// certificate; meaningful only with ClientCAFile.
	RequireClientCert bool
	// MinVersion is tls.VersionTLS12 or tls.VersionTLS13; 0 = TLS 1.2.
	MinVersion uint16
}

// Options are the optional parts of [New]; nil means all defaults.
type Options struct {
	Logger   *slog.Logger  // nil = discard
	Interval time.Duration // how often Run checks the files; 0 = DefaultInterval
}

// FileError is a certificate file that cannot be used. Field is the
// Config field's key in the file (cert_file, key_file, client_ca_file), so
// that the caller can point the operator at the setting.
type FileError struct {
	Field string
	Path  string
	Err   error
}

func (e *FileError) Error() string { return fmt.Sprintf("%s %s: %v", e.Field, e.Path, e.Err) }

func (e *FileError) Unwrap() error { return e.Err }

// Source serves the certificate pair last read from the files. It is safe
// for concurrent use: handshakes read it while Run replaces it.
type Source struct {
	cfg      Config
	logger   *slog.Logger
	interval time.Duration
	clientCA *x509.CertPool

	cert atomic.Pointer[tls.Certificate]

	mu       sync.Mutex // guards the fields below (Run and Reload)
	certPEM  []byte     // the contents the current pair was built from
	keyPEM   []byte
	badSince []byte // cert+key contents last refused, to warn once per change
}

// New reads the files and returns a Source serving them. Every problem is
// a *[FileError]: the gateway must not start with a certificate it cannot
// serve.
func New(cfg Config, opts *Options) (*Source, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	s := &Source{cfg: cfg, logger: o.Logger, interval: o.Interval}
	certPEM, keyPEM, err := s.read()
	if err != nil {
		return nil, err
	}
	pair, err := pairOf(cfg, certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	s.cert.Store(pair)
	s.certPEM, s.keyPEM = certPEM, keyPEM
	if cfg.ClientCAFile != "" {
		raw, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return nil, &FileError{Field: "client_ca_file", Path: cfg.ClientCAFile, Err: err}
		}
		s.clientCA = x509.NewCertPool()
		if !s.clientCA.AppendCertsFromPEM(raw) {
			return nil, &FileError{Field: "client_ca_file", Path: cfg.ClientCAFile, Err: errors.New("no PEM CERTIFICATE block in it")}
		}
	}
	s.warnExpiry(pair)
	return s, nil
}

// read returns the contents of the certificate and key files.
func (s *Source) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(s.cfg.CertFile); err != nil {
		return nil, nil, &FileError{Field: "cert_file", Path: s.cfg.CertFile, Err: err}
	}
	if keyPEM, err = os.ReadFile(s.cfg.KeyFile); err != nil {
		return nil, nil, &FileError{Field: "key_file", Path: s.cfg.KeyFile, Err: err}
	}
	return certPEM, keyPEM, nil
}

// pairOf parses a certificate and its key, telling which file is at fault.
func pairOf(cfg Config, certPEM, keyPEM []byte) (*tls.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, &FileError{Field: "cert_file", Path: cfg.CertFile, Err: errors.New("no PEM CERTIFICATE block at its start")}
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return nil, &FileError{Field: "cert_file", Path: cfg.CertFile, Err: err}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The certificate parsed: what is left is the key, or the two not
		// belonging together. crypto/tls's messages never quote the key.
		return nil, &FileError{Field: "key_file", Path: cfg.KeyFile, Err: err}
	}
	return &pair, nil
}

// warnExpiry logs a served certificate that is expired or not yet valid:
// clients will refuse it, and the log is where the operator looks first.
func (s *Source) warnExpiry(pair *tls.Certificate) {
	leaf := pair.Leaf
	if leaf == nil {
		return
	}
	now := time.Now()
	if now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		s.logger.Warn("TLS certificate is outside its validity period; clients will refuse it",
			"cert_file", s.cfg.CertFile, "not_before", leaf.NotBefore, "not_after", leaf.NotAfter)
	}
}

// Certificate returns the pair currently served.
func (s *Source) Certificate() *tls.Certificate { return s.cert.Load() }

// TLSConfig returns the server configuration: the certificate is looked up
// per handshake, so a reload reaches every new connection while open ones
// keep theirs.
func (s *Source) TLSConfig() *tls.Config {
	c := &tls.Config{
		MinVersion: s.cfg.MinVersion,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cert.Load(), nil
		},
	}
	if s.clientCA != nil {
		c.ClientCAs = s.clientCA
		c.ClientAuth = tls.VerifyClientCertIfGiven
		if s.cfg.RequireClientCert {
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return c
}

// Reload re-reads the files and serves the new pair if they changed and
// form a valid pair. changed reports a new pair; an error leaves the old
// pair served (a renewal writes two files, and a poll may fall between).
func (s *Source) Reload() (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	certPEM, keyPEM, err := s.read()
	if err != nil {
		return false, err
	}
	if bytes.Equal(certPEM, s.certPEM) && bytes.Equal(keyPEM, s.keyPEM) {
		return false, nil
	}
	pair, err := pairOf(s.cfg, certPEM, keyPEM)
	if err != nil {
		return false, err
	}
	s.cert.Store(pair)
	s.certPEM, s.keyPEM = certPEM, keyPEM
	s.badSince = nil
	s.warnExpiry(pair)
	return true, nil
}

// Run checks the files every interval until ctx is done. A failed check is
// logged once per distinct content and the previous pair stays served.
func (s *Source) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := s.Reload()
		switch {
		case err != nil:
			s.warnOnce(err)
		case changed:
			leaf := s.cert.Load().Leaf
			s.logger.Info("TLS certificate reloaded", "cert_file", s.cfg.CertFile,
				"subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
		}
	}
}

// warnOnce logs err unless the files' contents are those last warned
// about, so that a half-written renewal does not flood the log.
func (s *Source) warnOnce(err error) {
	certPEM, _ := os.ReadFile(s.cfg.CertFile)
	keyPEM, _ := os.ReadFile(s.cfg.KeyFile)
	seen := append(append([]byte{}, certPEM...), keyPEM...)
	s.mu.Lock()
	same := s.badSince != nil && bytes.Equal(seen, s.badSince)
	s.badSince = seen
	s.mu.Unlock()
	if !same {
		s.logger.Warn("TLS certificate files changed but cannot be served; the previous certificate stays", "error", err)
	}
}
