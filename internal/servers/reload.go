package servers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Report says what a reload changed.
type Report struct {
	Added, Removed, Changed, Unchanged []string
}

// staging is one added or changed server of a reload, built and (if it
// starts automatically) started next to the running ones.
type staging struct {
	def     *config.Server
	old     *record // nil: added
	auto    bool
	st      *upstream.Staged
	rec     *record
	started bool
}

// Reload applies a new config file's servers as one change: build the new,
// start them, swap, stop the old. Every added or changed server is built
// and, if it starts automatically, started next to the running servers;
// only when all of them started are they swapped in, the old ones stopped
// and the servers gone from the file forgotten. If any of them fails, the
// staged ones are stopped and the running servers are left exactly as they
// were (same processes, same sessions); the error names each failure.
// Unchanged servers are not touched. The tool version matrix is replaced
// with cfg's when the servers are.
func (r *Registry) Reload(ctx context.Context, cfg *config.Config) (Report, error) {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	var rep Report
	r.mu.RLock()
	current := map[string]*record{}
	apiNames := map[string]bool{}
	for name, rec := range r.servers {
		if rec.source == SourceConfig {
			current[name] = rec
		} else {
			apiNames[name] = true
		}
	}
	r.mu.RUnlock()

	next := map[string]bool{}
	var stage []*staging
	for _, def := range cfg.Servers {
		next[def.Name] = true
		rec, exists := current[def.Name]
		auto := def.AutoStartOr(cfg.Settings.AutoStartDefault)
		switch {
		case !exists && apiNames[def.Name]:
			r.logger.Warn("config file adds a server already registered through the API; remove one of them", "server", def.Name)
			continue
		case exists && sameDefinition(rec.def, def) && rec.autoConnect == auto:
			rep.Unchanged = append(rep.Unchanged, def.Name)
			continue
		case exists:
			rep.Changed = append(rep.Changed, def.Name)
		default:
			rep.Added = append(rep.Added, def.Name)
		}
		stage = append(stage, &staging{def: def, old: rec, auto: auto})
	}
	var removed []*record
	for name, rec := range current {
		if !next[name] {
			removed = append(removed, rec)
			rep.Removed = append(rep.Removed, name)
		}
	}
	slices.Sort(rep.Removed)

	// Build and start. Nothing the gateway serves has changed yet.
	if err := r.stageAll(ctx, stage); err != nil {
		return Report{}, err
	}
	// Their store rows, all or none.
	err := r.db.Transact(ctx, func(tx *store.DB) error {
		for _, sg := range stage {
			rec, err := r.configRecord(ctx, tx, sg.def, cfg.Settings)
			if err != nil {
				return err
			}
			sg.rec = rec
		}
		return nil
	})
	if err != nil {
		discardAll(stage)
		return Report{}, &ReloadError{Err: err}
	}

	// Swap.
	for _, rec := range removed {
		if err := r.forget(ctx, rec); err != nil {
			r.logger.Warn("forgetting a server removed from the config file", "server", rec.def.Name, "error", err)
		}
	}
	for _, sg := range stage {
		r.commit(ctx, sg)
	}
	r.mu.Lock()
	r.toolVersions = cfg.ToolVersions
	r.mu.Unlock()
	r.changed()
	return rep, nil
}

// stageAll builds and starts the servers of a reload at once; if any
// fails, every one of them is stopped and the failures are returned.
func (r *Registry) stageAll(ctx context.Context, stage []*staging) error {
	var wg sync.WaitGroup
	errs := make([]error, len(stage))
	for i, sg := range stage {
		if err := r.checkTransport(sg.def); err != nil {
			errs[i] = err
			continue
		}
		wg.Go(func() {
			st, err := r.ups.Stage(ctx, sg.def, sg.auto)
			if err != nil {
				errs[i] = fmt.Errorf("server %q cannot start: %w", sg.def.Name, err)
				return
			}
			sg.st, sg.started = st, sg.auto
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		discardAll(stage)
		return &ReloadError{Err: err}
	}
	return nil
}

// ReloadError is a reload that failed before it changed anything.
type ReloadError struct{ Err error }

func (e *ReloadError) Error() string {
	return "reload not applied, the running servers are unchanged: " + strings.ReplaceAll(e.Err.Error(), "\n", "; ")
}

func (e *ReloadError) Unwrap() error { return e.Err }

func discardAll(stage []*staging) {
	for _, sg := range stage {
		if sg.st != nil {
			sg.st.Discard()
		}
	}
}

// commit swaps a staged server in under its record: the record first, so
// that the discovery the staged server reports on commit finds it.
func (r *Registry) commit(ctx context.Context, sg *staging) {
	name := sg.def.Name
	if !sg.started {
		// Not connected: its last known tools, unavailable, as at a start.
		r.cat.Remove(name)
	}
	r.mu.Lock()
	r.servers[name] = sg.rec
	r.mu.Unlock()
	if err := r.ups.Commit(ctx, sg.st); err != nil {
		r.logger.Warn("stopping the previous instance of a reloaded server", "server", name, "error", err)
	}
	if !sg.started {
		r.restoreTools(ctx, sg.rec, false)
	}
}
