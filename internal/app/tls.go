package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/tlsserve"
)

// checkPlainHTTP refuses plain HTTP on a non-loopback listener unless the
// config says so (settings.allow_plain_http, for a gateway behind a
// TLS-terminating proxy): credentials and tool traffic would otherwise
// cross the network in clear by accident. Local mode (no auth section)
// is refused off loopback before this, by authMode.
func checkPlainHTTP(cfg *config.Config, listen string) error {
	s := cfg.Settings
	if listen == "" || netguard.LoopbackAddr(listen) || s.ListenTLS != nil || s.AllowPlainHTTP {
		return nil
	}
	return config.Errors{{File: cfg.File, Field: "settings.listen", Msg: fmt.Sprintf(
		"refusing to serve plain HTTP on %s: API keys, tokens and tool calls would cross the network in clear. "+
			"Configure settings.listen_tls (cert_file, key_file), or, behind a TLS-terminating proxy, "+
			"set settings.allow_plain_http: true (SWITCHBOARD_ALLOW_PLAIN_HTTP=true)", listen)}}
}

// plainHTTPWarning is the start-up warning of an explicitly allowed plain
// HTTP listener off loopback; "" when there is nothing to warn of.
func plainHTTPWarning(cfg *config.Config, listen string) string {
	s := cfg.Settings
	if listen == "" || netguard.LoopbackAddr(listen) || s.ListenTLS != nil || !s.AllowPlainHTTP {
		return ""
	}
	return "serving plain HTTP on a non-loopback address because settings.allow_plain_http is true: " +
		"only safe behind a TLS-terminating proxy on a trusted network; configure settings.listen_tls otherwise"
}

// newCertSource reads the files of settings.listen_tls; a file that cannot
// be served is a config error naming its field.
func newCertSource(cfg *config.Config, o Options) (*tlsserve.Source, error) {
	t := cfg.Settings.ListenTLS
	tc := tlsserve.Config{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFile: t.ClientCAFile,
		RequireClientCert: t.ClientAuth == config.ClientAuthRequire, MinVersion: tls.VersionTLS12}
	if t.MinVersion == config.TLS13 {
		tc.MinVersion = tls.VersionTLS13
	}
	src, err := tlsserve.New(tc, &tlsserve.Options{Logger: o.Logger, Interval: o.CertPollInterval})
	if fe, ok := errors.AsType[*tlsserve.FileError](err); ok {
		msg := fmt.Sprintf("cannot use %s: %v", fe.Path, fe.Err)
		if _, ok := errors.AsType[*fs.PathError](fe.Err); ok {
			msg = fmt.Sprintf("cannot read it: %v", fe.Err) // the error names the path
		}
		return nil, config.Errors{{File: cfg.File, Line: t.Pos.Line, Column: t.Pos.Column,
			Field: "settings.listen_tls." + fe.Field, Msg: msg}}
	}
	if err != nil {
		return nil, fmt.Errorf("settings.listen_tls: %w", err)
	}
	return src, nil
}

// scheme is the URL scheme of the listener.
func (a *App) scheme() string {
	if a.tls != nil {
		return "https"
	}
	return "http"
}
