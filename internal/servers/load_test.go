package servers_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// TestLoad checks a start: the config file's servers and the stored ones
// are registered, a server gone from the file is forgotten, a stored
// definition whose ${VAR} no longer resolves is listed with the reason and
// not started, and last known tools are restored unavailable.
func TestLoad(t *testing.T) {
	ctx := t.Context()
	path := storePath(t)

	// The previous run: two servers in the file, one registered at run
	// time (with its secret in the environment then), one connected.
	first := newHarness(t, openStore(t, path), &servers.Options{Getenv: getenv(map[string]string{"DEMO_TOKEN": "t0ken"})})
	if _, err := first.reg.Load(ctx, configOf(demoDef("gone"), demoDef("kept"))); err != nil {
		t.Fatal(err)
	}
	def := demoDef("stored")
	def.Env = map[string]string{"API_TOKEN": "${DEMO_TOKEN}"}
	if _, err := first.reg.Register(ctx, def, false); err != nil {
		t.Fatal(err)
	}
	if _, err := first.reg.Register(ctx, auto(demoDef("storedauto")), false); err != nil {
		t.Fatal(err)
	}
	first.connect(t, "kept")
	keptTools := first.toolNames("kept")
	if len(keptTools) == 0 {
		t.Fatal("kept has no tools")
	}

	// This run: the file lost "gone" and gained "added"; DEMO_TOKEN is unset.
	hs := newHarness(t, openStore(t, path), nil)
	start, err := hs.reg.Load(ctx, configOf(demoDef("kept"), auto(demoDef("added"))))
	if err != nil {
		t.Fatal(err)
	}
	// Stored with auto_connect false, "storedauto" is not started; a file's
	// auto_start is.
	if diff := cmp.Diff([]string{"added"}, start); diff != "" {
		t.Errorf("servers to start (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"api:stored", "api:storedauto", "config:added", "config:kept"}, rows(t, hs.db)); diff != "" {
		t.Errorf("store rows (-want +got):\n%s", diff)
	}
	list, err := hs.reg.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range list {
		names = append(names, v.Source+":"+v.Name)
	}
	if diff := cmp.Diff([]string{"config:added", "config:kept", "api:stored", "api:storedauto"}, names); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}

	st := hs.status(t, "stored")
	if st.Status != string(upstream.StateError) || !strings.Contains(st.ErrorMessage, "cannot start") || !strings.Contains(st.ErrorMessage, "DEMO_TOKEN") {
		t.Errorf("stored server with an unresolved reference: status %s %q, want ERROR naming DEMO_TOKEN", st.Status, st.ErrorMessage)
	}
	_, err = hs.reg.Connect(ctx, "stored", true)
	ae := apiError(t, err, http.StatusConflict, api.CodeConflict)
	if !strings.Contains(ae.Message, "DEMO_TOKEN") {
		t.Errorf("Connect refusal %q does not say why", ae.Message)
	}
	if ust, err := hs.reg.Upstreams().Status("stored"); err != nil || ust.PID != 0 {
		t.Errorf("the unresolvable server was started: %+v %v", ust, err)
	}

	// Last known tools are back, unavailable until the server connects.
	if diff := cmp.Diff(keptTools, hs.toolNames("kept")); diff != "" {
		t.Errorf("restored tools of kept (-want +got):\n%s", diff)
	}
	for _, tl := range hs.cat.Snapshot().ServerTools("kept") {
		if tl.Available {
			t.Errorf("%s is available before kept connected", tl.Name)
		}
	}
}

// TestLoadFileWinsOverStored checks a server defined both in the file and
// through the API under the same name: the file's definition is the one
// registered and stored.
func TestLoadFileWinsOverStored(t *testing.T) {
	ctx := t.Context()
	path := storePath(t)
	first := newHarness(t, openStore(t, path), nil)
	def := demoDef("both")
	def.Description = "from the API"
	if _, err := first.reg.Register(ctx, def, false); err != nil {
		t.Fatal(err)
	}
	hs := newHarness(t, openStore(t, path), nil)
	fileDef := demoDef("both")
	fileDef.Description = "from the file"
	if _, err := hs.reg.Load(ctx, configOf(fileDef)); err != nil {
		t.Fatal(err)
	}
	if v := hs.status(t, "both"); v.Source != servers.SourceConfig || v.Description != "from the file" {
		t.Errorf("loaded %s %q, want the file's definition", v.Source, v.Description)
	}
	if diff := cmp.Diff([]string{"config:both"}, rows(t, hs.db)); diff != "" {
		t.Errorf("store rows (-want +got):\n%s", diff)
	}
}

func TestReload(t *testing.T) {
	ctx := t.Context()
	hs := newHarness(t, openStore(t, storePath(t)), nil)
	changedDef := func(desc string) *config.Server {
		d := auto(demoDef("changed"))
		d.Description = desc
		return d
	}
	start, err := hs.reg.Load(ctx, configOf(auto(demoDef("same")), changedDef("v1"), demoDef("removed")))
	if err != nil {
		t.Fatal(err)
	}
	hs.reg.ConnectAll(ctx, start)
	pidSame, pidChanged := hs.status(t, "same").PID, hs.status(t, "changed").PID
	if pidSame == 0 || pidChanged == 0 {
		t.Fatalf("auto-started servers have no process: %d %d", pidSame, pidChanged)
	}
	if _, err := hs.reg.Register(ctx, demoDef("runtime"), false); err != nil {
		t.Fatal(err)
	}

	rep, err := hs.reg.Reload(ctx, configOf(auto(demoDef("same")), changedDef("v2"), auto(demoDef("added"))))
	if err != nil {
		t.Fatal(err)
	}
	want := servers.Report{Added: []string{"added"}, Removed: []string{"removed"}, Changed: []string{"changed"}, Unchanged: []string{"same"}}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if got := hs.status(t, "same"); got.PID != pidSame || got.Status != string(upstream.StateConnected) {
		t.Errorf("unchanged server: pid %d %s, want the same process %d, CONNECTED", got.PID, got.Status, pidSame)
	}
	if got := hs.status(t, "changed"); got.PID == pidChanged || got.PID == 0 || got.Description != "v2" || got.Status != string(upstream.StateConnected) {
		t.Errorf("changed server: pid %d %q %s, want a new process (not %d) with the new definition, CONNECTED", got.PID, got.Description, got.Status, pidChanged)
	}
	if got := hs.status(t, "added"); got.Status != string(upstream.StateConnected) {
		t.Errorf("added server %s, want CONNECTED", got.Status)
	}
	_, err = hs.reg.Get(ctx, "removed")
	notFound(t, err)
	if diff := cmp.Diff([]string{"api:runtime", "config:added", "config:changed", "config:same"}, rows(t, hs.db)); diff != "" {
		t.Errorf("store rows (-want +got):\n%s", diff)
	}
	for _, name := range []string{"added", "changed"} {
		tools := hs.cat.Snapshot().ServerTools(name)
		if len(tools) == 0 || !tools[0].Available {
			t.Errorf("%s: tools %v, want them listed and available", name, tools)
		}
	}
}

// TestReloadFailure checks a reload that cannot start one of its servers
// changes nothing: same servers, same processes, same store rows, same
// catalog.
func TestReloadFailure(t *testing.T) {
	base := []*config.Server{auto(demoDef("same")), auto(demoDef("changed")), demoDef("removed")}
	changed := auto(demoDef("changed"))
	changed.Description = "v2"
	tests := []struct {
		name string
		next []*config.Server
		// culprit is the server the error must name.
		culprit string
	}{
		{"added server fails to start", []*config.Server{auto(demoDef("same")), changed, auto(brokenDef("broken"))}, "broken"},
		{"changed server fails to start", []*config.Server{auto(demoDef("same")), auto(brokenDef("changed"))}, "changed"},
		{"refused by the TLS requirement", []*config.Server{auto(demoDef("same")), changed,
			{Name: "plain", Transport: config.TransportHTTP, URL: "http://example.com/mcp"}}, "plain"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			hs := newHarness(t, openStore(t, storePath(t)), &servers.Options{RequireTLS: true})
			defs := make([]*config.Server, len(base))
			for i, d := range base {
				defs[i] = d.Clone()
			}
			start, err := hs.reg.Load(ctx, configOf(defs...))
			if err != nil {
				t.Fatal(err)
			}
			hs.reg.ConnectAll(ctx, start)
			before := snapshot(t, hs)

			next := make([]*config.Server, len(tc.next))
			for i, d := range tc.next {
				next[i] = d.Clone()
			}
			rep, err := hs.reg.Reload(ctx, configOf(next...))
			var re *servers.ReloadError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T), want a *servers.ReloadError", err, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "unchanged") || (!strings.Contains(msg, `"`+tc.culprit+`"`) && !strings.Contains(msg, "servers."+tc.culprit)) {
				t.Errorf("error %q does not say nothing changed and why (%s)", msg, tc.culprit)
			}
			if diff := cmp.Diff(servers.Report{}, rep); diff != "" {
				t.Errorf("report of a failed reload (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, snapshot(t, hs)); diff != "" {
				t.Errorf("a failed reload changed the gateway (-before +after):\n%s", diff)
			}
		})
	}
}

// state is what a reload must leave alone when it fails.
type state struct {
	Servers        []string // name source status pid description
	Rows           []string
	CatalogVersion uint64
	Tools          []string
}

func snapshot(t *testing.T, hs *harness) state {
	t.Helper()
	list, err := hs.reg.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var s state
	for _, v := range list {
		s.Servers = append(s.Servers, strings.Join([]string{v.Name, v.Source, v.Status, v.Description, v.ID}, " ")+" pid="+strconv.Itoa(v.PID))
	}
	s.Rows = rows(t, hs.db)
	snap := hs.cat.Snapshot()
	s.CatalogVersion = snap.Version()
	for _, tl := range snap.Tools() {
		s.Tools = append(s.Tools, tl.Name)
	}
	slices.Sort(s.Tools)
	return s
}

// TestSyncFromStore checks a replica follows what another one changed in
// the shared store, step by step.
func TestSyncFromStore(t *testing.T) {
	ctx := t.Context()
	path := storePath(t)
	fileDef := demoDef("fromfile")
	a := newHarness(t, openStore(t, path), nil)
	b := newHarness(t, openStore(t, path), nil)
	for _, hs := range []*harness{a, b} {
		if _, err := hs.reg.Load(ctx, configOf(fileDef.Clone())); err != nil {
			t.Fatal(err)
		}
	}
	// seen is b's view of the servers: name source access description.
	seen := func(t *testing.T) []string {
		t.Helper()
		list, err := b.reg.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range list {
			out = append(out, strings.Join([]string{v.Name, v.Source, v.DefaultAccess, v.Description}, " "))
		}
		return out
	}
	steps := []struct {
		name string
		do   func(r *servers.Registry) error
		want []string
	}{
		{"register", func(r *servers.Registry) error {
			def := demoDef("shared")
			def.Description = "first"
			_, err := r.Register(ctx, def, false)
			return err
		}, []string{"fromfile config  ", "shared api  first"}},
		{"change a definition", func(r *servers.Registry) error {
			_, err := r.SetDefaultAccess(ctx, "shared", "deny")
			return err
		}, []string{"fromfile config  ", "shared api deny first"}},
		{"override a config file server", func(r *servers.Registry) error {
			_, err := r.SetDefaultAccess(ctx, "fromfile", "deny")
			return err
		}, []string{"fromfile config deny ", "shared api deny first"}},
		{"rename", func(r *servers.Registry) error {
			_, err := r.Rename(ctx, "shared", "moved")
			return err
		}, []string{"fromfile config deny ", "moved api deny first"}},
		{"reset the override", func(r *servers.Registry) error {
			_, err := r.ResetDefaultAccess(ctx, "fromfile")
			return err
		}, []string{"fromfile config  ", "moved api deny first"}},
		{"remove", func(r *servers.Registry) error { return r.Remove(ctx, "moved") }, []string{"fromfile config  "}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.do(a.reg); err != nil {
				t.Fatal(err)
			}
			b.h.take()
			if err := b.reg.SyncFromStore(ctx); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(st.want, seen(t)); diff != "" {
				t.Errorf("b after syncing (-want +got):\n%s", diff)
			}
			if published, _, _, _ := b.h.take(); len(published) > 0 {
				t.Errorf("b published what it synced: %v", published)
			}
		})
	}
}

// TestRotateSecrets checks a rotation re-seals every stored secret with
// the new key, seals one an older version left in clear, and leaves the
// definitions readable with the new key alone.
func TestRotateSecrets(t *testing.T) {
	ctx := t.Context()
	path := storePath(t)
	oldKeys, oldRaw := newKeyring(t)
	newKeys, newRaw := newKeyring(t)
	db := openStore(t, path)
	hs := newHarness(t, db, &servers.Options{Keys: oldKeys})
	def := demoDef("sealed")
	def.Env = map[string]string{"API_TOKEN": "hunter2-one", "OTHER": "hunter2-two", "REF": "${HOME}"}
	if _, err := hs.reg.Register(ctx, def, false); err != nil {
		t.Fatal(err)
	}
	// An older version stored this literal secret in clear.
	legacy := &store.Server{Name: "legacy", Source: servers.SourceAPI, Transport: config.TransportStdio,
		Config: []byte(`{"name":"legacy","transport":"stdio","command":"switchboard","args":["demo-server"],"env":{"API_TOKEN":"hunter2-three"}}`)}
	if err := db.CreateServer(ctx, legacy); err != nil {
		t.Fatal(err)
	}

	env := func(vars ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(vars); i += 2 {
			m[vars[i]] = vars[i+1]
		}
		return getenv(m)
	}
	b64 := base64.StdEncoding.EncodeToString

	if _, err := servers.RotateSecrets(ctx, path, env()); err == nil {
		t.Error("a rotation without a key succeeded")
	}
	// Without the old key the sealed values cannot be read: nothing changes.
	if _, err := servers.RotateSecrets(ctx, path, env("SWITCHBOARD_SECRET_KEY", b64(newRaw))); err == nil {
		t.Error("a rotation without the old key succeeded")
	}
	n, err := servers.RotateSecrets(ctx, path, env("SWITCHBOARD_SECRET_KEY", b64(newRaw), "SWITCHBOARD_SECRET_KEY_OLD", b64(oldRaw)))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("rewrote %d values, want 3 (two rotated, one sealed)", n)
	}
	for _, name := range []string{"sealed", "legacy"} {
		row, err := db.GetServer(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(row.Config), "hunter2") || !strings.Contains(string(row.Config), "enc:v1:"+newKeys.ActiveID()+":") {
			t.Errorf("%s after the rotation: %s, want every secret sealed with key %s", name, row.Config, newKeys.ActiveID())
		}
	}
	// A second rotation has nothing left to do.
	if n, err := servers.RotateSecrets(ctx, path, env("SWITCHBOARD_SECRET_KEY", b64(newRaw), "SWITCHBOARD_SECRET_KEY_OLD", b64(oldRaw))); err != nil || n != 0 {
		t.Errorf("second rotation: %d, %v; want 0", n, err)
	}

	fresh := newHarness(t, openStore(t, path), &servers.Options{Keys: newKeys, Getenv: getenv(map[string]string{"HOME": "/home/x"})})
	if _, err := fresh.reg.Load(ctx, configOf()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]map[string]string{
		"sealed": {"API_TOKEN": "hunter2-one", "OTHER": "hunter2-two", "REF": "/home/x"},
		"legacy": {"API_TOKEN": "hunter2-three"},
	} {
		cfg, err := fresh.reg.Upstreams().Config(name)
		if err != nil {
			t.Fatalf("%s not loaded with the new key alone: %v", name, err)
		}
		if diff := cmp.Diff(want, cfg.Env); diff != "" {
			t.Errorf("%s env (-want +got):\n%s", name, diff)
		}
	}
}
