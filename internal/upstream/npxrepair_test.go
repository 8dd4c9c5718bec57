package upstream

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestNpxPackages(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-y", "@modelcontextprotocol/server-memory"}, []string{"@modelcontextprotocol/server-memory"}},
		{[]string{"--yes", "pkg@1.2.3", "--port", "3000", "/data"}, []string{"pkg@1.2.3"}},
		{[]string{"-y", "-p", "a", "--package=b", "cmd", "x"}, []string{"a", "b"}},
		{[]string{"-c", "echo hi", "pkg"}, []string{"pkg"}},
		{[]string{"--", "pkg", "--flag"}, []string{"pkg"}},
		{[]string{"-y"}, nil},
		{nil, nil},
	} {
		if got := npxPackages(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("npxPackages(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestNpxInstallDir pins npm's naming of its install directories: the
// value is what libnpmexec (npm 11) computes for the same specs.
func TestNpxInstallDir(t *testing.T) {
	got := npxInstallDir("/c", []string{"@modelcontextprotocol/server-memory@2026.8.31"})
	if want := filepath.Join("/c", "_npx", "c98ccc168155bafa"); got != want {
		t.Errorf("install dir = %s, want %s", got, want)
	}
	if npxInstallDir("/c", []string{"b", "A"}) != npxInstallDir("/c", []string{"A", "b"}) {
		t.Error("the order of the specs changes the directory")
	}
}

func TestRepairNpxInstall(t *testing.T) {
	args := []string{"-y", "some-server@1.0.0"}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name        string
		packageJSON bool
		lock        string // "", "stale" or "held"
		wantRemoved bool
	}{
		{"incomplete install", false, "", true},
		{"incomplete install with the killed npm's lock", false, "stale", true},
		{"complete install", true, "", false},
		{"install in progress", false, "held", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			env := []string{"npm_config_cache=" + cache, "HOME=" + t.TempDir()}
			dir := npxInstallDir(cache, npxPackages(args))
			if err := os.MkdirAll(filepath.Join(dir, "node_modules", "some-server"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.packageJSON {
				if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			lock := filepath.Join(dir, "concurrency.lock")
			stop := make(chan struct{})
			done := make(chan struct{})
			switch tc.lock {
			case "stale":
				if err := os.Mkdir(lock, 0o755); err != nil {
					t.Fatal(err)
				}
				close(done)
			case "held": // touched every second, as npm does
				if err := os.Mkdir(lock, 0o755); err != nil {
					t.Fatal(err)
				}
				go func() {
					defer close(done)
					tick := time.NewTicker(time.Second)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case now := <-tick.C:
							_ = os.Chtimes(lock, now, now)
						}
					}
				}()
			default:
				close(done)
			}
			got := repairNpxInstall(context.Background(), args, env, "", log)
			close(stop)
			<-done
			_, err := os.Stat(dir)
			if removed := os.IsNotExist(err); removed != tc.wantRemoved || (got != "") != tc.wantRemoved {
				t.Errorf("removed = %v (reported %q), want %v", removed, got, tc.wantRemoved)
			}
		})
	}
}

func TestNpmCacheDir(t *testing.T) {
	if got := npmCacheDir(context.Background(), []string{"NPM_CONFIG_CACHE=/x/cache", "HOME=/h"}, ""); got != "/x/cache" {
		t.Errorf("from the environment: %s", got)
	}
	// No npm on PATH: the default under HOME.
	if got := npmCacheDir(context.Background(), []string{"HOME=/h", "PATH=" + t.TempDir()}, ""); got != "/h/.npm" {
		t.Errorf("default: %s", got)
	}
}
