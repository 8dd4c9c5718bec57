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

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
)

// Reload reads the config file again and applies the difference in servers
// (see registry.reload). An invalid file is rejected with its errors and the
// running config stays. Settings other than servers take effect at the next
// start; a change to them is logged.
func (a *App) Reload(ctx context.Context) error {
	if a.cfg.File == "" {
		return fmt.Errorf("reload: the gateway runs on the built-in config; there is no file to reload")
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	next, err := config.Load(a.cfg.File, a.getenv)
	if err != nil {
		a.logger.Error("config reload rejected; the running config stays", "file", a.cfg.File, "error", err)
		return err
	}
	// Flags given at start still win over the file.
	next.Settings.Listen, next.Settings.Store = a.cfg.Settings.Listen, a.cfg.Settings.Store
	if !reflect.DeepEqual(next.Auth, a.cfg.Auth) {
		a.logger.Warn("config reload: the auth section changed; it takes effect at the next start", "file", a.cfg.File)
	}
	if !reflect.DeepEqual(next.Search, a.cfg.Search) || !reflect.DeepEqual(next.Skills, a.cfg.Skills) || !reflect.DeepEqual(next.Front, a.cfg.Front) {
		a.logger.Warn("config reload: the search, skills or front section changed; it takes effect at the next start", "file", a.cfg.File)
	}
	if next.Authz.Approval != a.cfg.Authz.Approval {
		// The pipeline's approver is chosen when it is built.
		a.logger.Warn("config reload: authz.approval changed; it takes effect at the next start", "file", a.cfg.File)
	}
	if !reflect.DeepEqual(next.Settings, a.cfg.Settings) {
		a.logger.Warn("config reload: changed settings take effect at the next start", "file", a.cfg.File)
	}
	rep, start, err := a.reg.reload(ctx, next)
	if err != nil {
		a.logger.Error("config reload failed part way", "file", a.cfg.File, "error", err)
		return err
	}
	// Servers, the authorization policy, fallbacks and the version matrix
	// apply at once; authentication and settings at the next start (logged
	// above).
	applied := *next
	applied.File, applied.Settings, applied.Auth = a.cfg.File, a.cfg.Settings, a.cfg.Auth
	applied.Search, applied.Skills, applied.Front = a.cfg.Search, a.cfg.Skills, a.cfg.Front
	applied.Authz.Approval = a.cfg.Authz.Approval
	a.cfg = &applied
	a.policyChanged()
	s := a.cfg.Settings
	a.pipe.Retune(invoke.Tuning{Timeout: time.Duration(s.InvocationTimeoutMS) * time.Millisecond, Retry: retryPolicy(s), Fallbacks: next.Fallbacks})
	for _, name := range start {
		a.reg.connectInBackground(name)
	}
	a.logger.Info("config reloaded", "file", a.cfg.File, "added", strings.Join(rep.Added, ","),
		"removed", strings.Join(rep.Removed, ","), "changed", strings.Join(rep.Changed, ","), "unchanged", len(rep.Unchanged))
	return nil
}

// WatchConfig reloads on SIGHUP and when the config file's content changes
// (polled: no dependency on inotify, works on every filesystem and with
// editors that replace the file), until ctx is done.
func (a *App) WatchConfig(ctx context.Context, every time.Duration) {
	if a.cfg.File == "" {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	last := fileDigest(a.cfg.File)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			a.logger.Info("SIGHUP: reloading config", "file", a.cfg.File)
		case <-t.C:
			d := fileDigest(a.cfg.File)
			if d == last || d == "" {
				continue
			}
			a.logger.Info("config file changed: reloading", "file", a.cfg.File)
		}
		last = fileDigest(a.cfg.File)
		_ = a.Reload(ctx) // logged by Reload; the running config stays on error
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
