package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/app"
	"github.com/switchboard-mcp/switchboard/internal/config"
)

// profiler writes a CPU profile (and an allocation profile) of each
// profiled scenario into dir.
type profiler struct {
	dir     string
	written []string
}

// begin starts profiling the measurement of scenario and returns the
// function that stops it; that function may be called more than once. A
// nil profiler, or a direct scenario (nothing of ours runs in-process),
// profiles nothing.
func (p *profiler) begin(scenario string) (func() error, error) {
	if p == nil || scenario == scenarioDirect {
		return func() error { return nil }, nil
	}
	base := filepath.Join(p.dir, slug(scenario))
	if scenario == listGateway {
		base = filepath.Join(p.dir, "gateway-list")
	}
	// Allocation profiles are cumulative since the process started: a
	// snapshot now is the base to subtract (pprof -base) from the one at the
	// end, leaving the measured calls.
	runtime.GC() // the allocs profile reports as of the last GC
	if err := writeProfile("allocs", base+".allocs-base.pprof"); err != nil {
		return nil, err
	}
	f, err := os.Create(base + ".cpu.pprof")
	if err != nil {
		return nil, fmt.Errorf("creating the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	var once sync.Once
	var stopErr error
	return func() error {
		once.Do(func() {
			pprof.StopCPUProfile()
			stopErr = f.Close()
			if stopErr != nil {
				return
			}
			p.written = append(p.written, base+".cpu.pprof")
			runtime.GC() // the allocs profile reports as of the last GC
			stopErr = writeProfile("allocs", base+".allocs.pprof")
			if stopErr == nil {
				p.written = append(p.written, base+".allocs-base.pprof", base+".allocs.pprof")
			}
		})
		return stopErr
	}, nil
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating the %s profile: %w", name, err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("writing the %s profile: %w", name, err)
	}
	return f.Close()
}

// inProcessGateways builds each gateway in this process with internal/app,
// as `switchboard serve` does, so that a CPU profile covers it. Its
// goroutines carry the pprof label side=gateway (the client's side=client),
// so `go tool pprof -tagfocus=side=gateway` shows the gateway alone.
type inProcessGateways struct {
	bin    string
	dir    string
	logger *slog.Logger
}

func (g *inProcessGateways) start(ctx context.Context, name, servers string) (*gateway, error) {
	var gw *gateway
	var err error
	pprof.Do(ctx, pprof.Labels("side", "gateway"), func(gctx context.Context) {
		gw, err = g.startLabelled(gctx, name, servers)
	})
	return gw, err
}

func (g *inProcessGateways) startLabelled(ctx context.Context, name, servers string) (*gateway, error) {
	cfg, err := config.Parse(name+".yaml", []byte(servers), os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	cfg.Settings.Store = filepath.Join(g.dir, name+".db")
	logger := g.logger.With("gateway", name)
	a, err := app.New(ctx, cfg, &app.Options{Logger: slogAtWarn(logger), SelfExecutable: g.bin, Version: "bench"})
	if err != nil {
		return nil, fmt.Errorf("building the gateway: %w", err)
	}
	a.StartAndWait()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close(ctx)
		return nil, fmt.Errorf("listening: %w", err)
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // owned by stop below
	stop := func() {
		ctx := context.WithoutCancel(ctx) // stop also after Ctrl-C
		sctx, cancel := context.WithTimeout(ctx, stopTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			logger.Warn("gateway shutdown", "error", err)
			srv.Close()
		}
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("gateway serve", "error", err)
		}
		a.Close(ctx)
	}
	return &gateway{base: "http://" + ln.Addr().String(), endpoint: "http://" + ln.Addr().String() + "/mcp", stop: stop}, nil
}

// slogAtWarn keeps the gateway's info logs out of the benchmark output,
// as --log-level warn does for the process.
func slogAtWarn(l *slog.Logger) *slog.Logger {
	return slog.New(warnHandler{l.Handler()})
}

type warnHandler struct{ slog.Handler }

func (h warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{h.Handler.WithAttrs(as)}
}

func (h warnHandler) WithGroup(name string) slog.Handler {
	return warnHandler{h.Handler.WithGroup(name)}
}
