package upstream

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// An npx start killed in the middle of installing its packages (a start
// that timed out, a disconnect, a crash of the gateway) leaves npm's
// install directory for those packages half written: node_modules partly
// extracted, no package.json. npm then takes the package as installed and
// every later start fails ("Could not read package.json", "Cannot find
// package 'zod'") until someone deletes the directory by hand. So after an
// npx start fails, the gateway removes that directory if it is incomplete
// and nobody is installing into it, and the next start installs afresh.
//
// The directory is npm's own: <cache>/_npx/<first 16 hex digits of the
// SHA-512 of the package specs, sorted, one per line> (libnpmexec). If a
// future npm names it otherwise, nothing matches and nothing is removed.

// npxLockTouch is how long npm may take to touch an install's
// concurrency.lock while it holds it (it does every second).
const npxLockTouch = 2500 * time.Millisecond

// lockHeld reports whether a live npm holds the lock directory at path: it
// exists and is touched again within npxLockTouch. The lock of the npm the
// gateway just killed stays as it was.
func lockHeld(ctx context.Context, path string) bool {
	before, err := os.Stat(path)
	if err != nil {
		return false
	}
	if time.Since(before.ModTime()) > 2*npxLockTouch {
		return false // stale already
	}
	t := time.NewTimer(npxLockTouch)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true // cannot tell: leave it
	case <-t.C:
	}
	after, err := os.Stat(path)
	return err == nil && after.ModTime().After(before.ModTime())
}

// npxPackages returns the package specs an npx command line installs:
// those given with -p/--package, else the first argument that is not a
// flag. nil when it cannot tell.
func npxPackages(args []string) []string {
	var pkgs []string
	first := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if first == "" && i+1 < len(args) {
				first = args[i+1]
			}
			i = len(args)
		case a == "-p" || a == "--package":
			if i+1 < len(args) {
				pkgs = append(pkgs, args[i+1])
				i++
			}
		case strings.HasPrefix(a, "--package="):
			pkgs = append(pkgs, strings.TrimPrefix(a, "--package="))
		case a == "-c" || a == "--call":
			i++ // its value is a command line, not a package
		case strings.HasPrefix(a, "-"):
		case first == "":
			first = a
			i = len(args) // the rest are the server's own arguments
		}
	}
	if len(pkgs) > 0 {
		return pkgs
	}
	if first == "" {
		return nil
	}
	return []string{first}
}

// npxInstallDir is npm's install directory for pkgs under cacheDir.
func npxInstallDir(cacheDir string, pkgs []string) string {
	sorted := slices.Clone(pkgs)
	// npm sorts with localeCompare("en"); for package specs, a
	// case-insensitive order with a byte-wise tie break is the same.
	slices.SortFunc(sorted, func(a, b string) int {
		if c := strings.Compare(strings.ToLower(a), strings.ToLower(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	sum := sha512.Sum512([]byte(strings.Join(sorted, "\n")))
	return filepath.Join(cacheDir, "_npx", hex.EncodeToString(sum[:])[:16])
}

// npmCacheDir is the npm cache of a child with environment env (KEY=VALUE)
// and working directory dir: npm_config_cache (any case), else what
// `npm config get cache` says there (an .npmrc may set it), else ~/.npm.
func npmCacheDir(ctx context.Context, env []string, dir string) string {
	home := ""
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case strings.EqualFold(k, "npm_config_cache") && v != "":
			return v
		case k == "HOME":
			home = v
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "config", "get", "cache")
	cmd.Env, cmd.Dir = env, dir
	if out, err := cmd.Output(); err == nil {
		if p := strings.TrimSpace(string(out)); filepath.IsAbs(p) {
			return p
		}
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".npm")
}

// repairNpxInstall removes the install directory of an npx command line
// if it was left incomplete (no package.json) and no npm holds its lock.
// Call it once the failed start's processes are gone. It reports the
// directory removed, "" if none.
func repairNpxInstall(ctx context.Context, args, env []string, dir string, log *slog.Logger) string {
	pkgs := npxPackages(args)
	if len(pkgs) == 0 {
		return ""
	}
	cache := npmCacheDir(ctx, env, dir)
	if cache == "" {
		return ""
	}
	install := npxInstallDir(cache, pkgs)
	if _, err := os.Stat(filepath.Join(install, "package.json")); !errors.Is(err, fs.ErrNotExist) {
		return "" // complete (or not there, or unreadable: leave it)
	}
	if _, err := os.Stat(install); err != nil {
		return ""
	}
	if lockHeld(ctx, filepath.Join(install, "concurrency.lock")) {
		return "" // another npm is installing there right now
	}
	if err := os.RemoveAll(install); err != nil {
		log.Warn("upstream: removing an incomplete npx install", "dir", install, "error", err)
		return ""
	}
	log.Info("upstream: removed the incomplete npx install a failed start left behind; the next start installs afresh", "dir", install)
	return install
}
