package app

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// Reload reads the config file again and applies it as one change (see
// servers.Registry.Reload: the new and changed servers are built and
// started next to the running ones, then swapped in). An invalid file, or
// a server that cannot start, is rejected with its errors and the running
// gateway stays exactly as it was.
//
// Applied at once: servers, the authorization policy (roles, high-risk
// tools, token TTLs), fallbacks, the tool version matrix, and the call
// timeout and retry settings. Everything else needs a restart — listeners,
// TLS, the store, authentication, the front, search and skills, and the
// settings the components are built with; a reload that changes them says
// which, by name, and leaves them as they were (docs/cli.md, "Running the
// gateway").
func (a *App) Reload(ctx context.Context) error {
	if a.file == "" {
		return fmt.Errorf("reload: the gateway runs on the built-in config; there is no file to reload")
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	cur := a.cfg.Load()
	next, err := config.Load(a.file, a.getenv)
	if err != nil {
		a.logger.Error("config reload rejected; the running gateway is unchanged", "file", a.file, "error", err)
		return err
	}
	// Flags given at start still win over the file.
	next.Settings.Listen, next.Settings.Store = cur.Settings.Listen, cur.Settings.Store
	rep, err := a.reg.Reload(ctx, next)
	if err != nil {
		a.logger.Error("config reload rejected; the running gateway is unchanged", "file", a.file, "error", err)
		return err
	}
	applied := *next
	restart := keepRestartOnly(&applied, cur)
	if len(restart) > 0 {
		a.logger.Warn("config reload: these changes take effect at the next start", "file", a.file, "fields", strings.Join(restart, ", "))
	}
	a.cfg.Store(&applied)
	a.policyChanged()
	s := applied.Settings
	a.pipe.Retune(invoke.Tuning{Timeout: time.Duration(s.InvocationTimeoutMS) * time.Millisecond, Retry: retryPolicy(s), Fallbacks: applied.Fallbacks})
	a.logger.Info("config reloaded", "file", a.file, "added", strings.Join(rep.Added, ","),
		"removed", strings.Join(rep.Removed, ","), "changed", strings.Join(rep.Changed, ","), "unchanged", len(rep.Unchanged))
	return nil
}

// liveSettings are the settings a reload applies at once.
var liveSettings = map[string]bool{
	"invocation_timeout_ms": true, "retry_max_attempts": true, "retry_base_ms": true, "retry_factor": true,
	"retry_max_delay_ms": true, "token_ttl_minutes": true, "auth_cache_ttl_minutes": true,
	// Applied to each server as it is (re)built by the reload.
	"auto_start_default": true,
}

// keepRestartOnly puts back into next the parts of cur that only a restart
// changes and returns the names of those that differ.
func keepRestartOnly(next, cur *config.Config) []string {
	var changed []string
	section := func(name string, a, b any) bool {
		if reflect.DeepEqual(a, b) {
			return false
		}
		changed = append(changed, name)
		return true
	}
	if section("auth", next.Auth, cur.Auth) {
		next.Auth = cur.Auth
	}
	if section("search", next.Search, cur.Search) {
		next.Search = cur.Search
	}
	if section("skills", next.Skills, cur.Skills) {
		next.Skills = cur.Skills
	}
	if section("front", next.Front, cur.Front) {
		next.Front = cur.Front
	}
	if section("authz.approval", next.Authz.Approval, cur.Authz.Approval) {
		next.Authz.Approval = cur.Authz.Approval // the pipeline's approver is chosen when it is built
	}
	nv, cv := reflect.ValueOf(&next.Settings).Elem(), reflect.ValueOf(cur.Settings)
	for i := range nv.NumField() {
		f := nv.Type().Field(i)
		name := snake(f.Name)
		if !f.IsExported() || liveSettings[name] || reflect.DeepEqual(nv.Field(i).Interface(), cv.Field(i).Interface()) {
			continue
		}
		changed = append(changed, "settings."+name)
		nv.Field(i).Set(cv.Field(i))
	}
	return changed
}

// snake turns a Go field name into its config key: ListenTLS → listen_tls.
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 && (unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]))) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// WatchConfig reloads on SIGHUP and when the config file's content changes
// (polled: no dependency on inotify, works on every filesystem and with
// editors that replace the file), until ctx is done.
func (a *App) WatchConfig(ctx context.Context, every time.Duration) {
	if a.file == "" {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	last := fileDigest(a.file)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			a.logger.Info("SIGHUP: reloading config", "file", a.file)
		case <-t.C:
			d := fileDigest(a.file)
			if d == last || d == "" {
				continue
			}
			a.logger.Info("config file changed: reloading", "file", a.file)
		}
		last = fileDigest(a.file)
		_ = a.Reload(ctx) // logged by Reload; the running gateway stays on error
	}
}

// fileDigest is the SHA-256 of the file's content, "" if unreadable.
func fileDigest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return string(sum[:])
}
