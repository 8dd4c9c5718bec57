package servers_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// newKeyring is a keyring with a fresh random key.
func newKeyring(t *testing.T) (*secrets.Keyring, []byte) {
	t.Helper()
	raw := make([]byte, secrets.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	k, err := secrets.NewKeyring(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k, raw
}

// getenv serves vars as the environment.
func getenv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestRegister(t *testing.T) {
	withEnv := func(name string, env map[string]string, plain ...string) *config.Server {
		def := demoDef(name)
		def.Env, def.PlainEnv = env, plain
		return def
	}
	tests := []struct {
		name string
		def  *config.Server
		// check judges the error; nil: Register must succeed.
		check func(t *testing.T, err error)
	}{
		{
			name: "invalid name",
			def:  demoDef("Not A Name"),
			check: func(t *testing.T, err error) {
				if msg := configErrors(t, err); !strings.Contains(msg, "servers.Not A Name") {
					t.Errorf("error %q does not name the server", msg)
				}
			},
		},
		{
			name: "stdio without a command",
			def:  &config.Server{Name: "nocmd", Transport: config.TransportStdio},
			check: func(t *testing.T, err error) {
				if msg := configErrors(t, err); !strings.Contains(msg, "command") {
					t.Errorf("error %q does not name the command", msg)
				}
			},
		},
		{
			name: "duplicate",
			def:  demoDef("taken"),
			check: func(t *testing.T, err error) {
				ae := apiError(t, err, http.StatusConflict, api.CodeConflict)
				if !strings.Contains(ae.Message, `"taken" already exists`) {
					t.Errorf("message %q", ae.Message)
				}
			},
		},
		{
			name: "literal secret without a key",
			def:  withEnv("literal", map[string]string{"API_TOKEN": "hunter2-literal"}),
			check: func(t *testing.T, err error) {
				ae := apiError(t, err, http.StatusUnprocessableEntity, api.CodeValidation)
				for _, want := range []string{`"API_TOKEN"`, "refusing to store it in plaintext", "${VAR}", "SWITCHBOARD_SECRET_KEY"} {
					if !strings.Contains(ae.Message, want) {
						t.Errorf("message %q lacks %q", ae.Message, want)
					}
				}
				if strings.Contains(ae.Message, "hunter2") {
					t.Errorf("message %q shows the secret", ae.Message)
				}
			},
		},
		{
			name: "unresolved reference",
			def:  withEnv("unresolved", map[string]string{"API_TOKEN": "${NOT_SET}"}),
			check: func(t *testing.T, err error) {
				if msg := configErrors(t, err); !strings.Contains(msg, "NOT_SET") {
					t.Errorf("error %q does not name the variable", msg)
				}
			},
		},
		{name: "reference to a set variable", def: withEnv("reference", map[string]string{"API_TOKEN": "${DEMO_TOKEN}"})},
		{name: "plain env entry", def: withEnv("plain", map[string]string{"LOG_LEVEL": "debug"}, "LOG_LEVEL")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			hs := newHarness(t, openStore(t, storePath(t)), &servers.Options{Getenv: getenv(map[string]string{"DEMO_TOKEN": "t0ken"})})
			if _, err := hs.reg.Register(ctx, demoDef("taken"), false); err != nil {
				t.Fatal(err)
			}
			hs.h.take()
			before := rows(t, hs.db)
			v, err := hs.reg.Register(ctx, tc.def, false)
			published, _, _, _ := hs.h.take()
			if tc.check != nil {
				tc.check(t, err)
				if diff := cmp.Diff(before, rows(t, hs.db)); diff != "" {
					t.Errorf("a refused registration changed the store (-before +after):\n%s", diff)
				}
				if len(published) > 0 {
					t.Errorf("a refused registration was published: %v", published)
				}
				if _, ok := hs.reg.Lookup(tc.def.Name); ok && tc.def.Name != "taken" {
					t.Errorf("a refused server %q is registered", tc.def.Name)
				}
				return
			}
			if err != nil {
				t.Fatalf("Register: %v", err)
			}
			if v.Name != tc.def.Name || v.Source != servers.SourceAPI || v.Status != string(upstream.StateDisconnected) {
				t.Errorf("view %+v", v)
			}
			if want := append(before, "api:"+tc.def.Name); !slices.Equal(rows(t, hs.db), slices.Sorted(slices.Values(want))) {
				t.Errorf("store rows %v, want %v", rows(t, hs.db), want)
			}
			if !slices.Equal(published, []string{"servers/"}) {
				t.Errorf("published %v, want [servers/]", published)
			}
		})
	}
}

// TestRegisterSealsSecrets checks a literal secret is encrypted in the
// store, read back in clear by a registry with the key, and never shown.
func TestRegisterSealsSecrets(t *testing.T) {
	ctx := t.Context()
	keys, _ := newKeyring(t)
	path := storePath(t)
	hs := newHarness(t, openStore(t, path), &servers.Options{Keys: keys})
	const secret = "hunter2-literal-secret"
	// A value that only looks sealed is a literal like any other.
	const lookalike = "enc:v1:0123456789abcdef:bm90IHNlYWxlZA=="
	def := demoDef("sealed")
	def.Env = map[string]string{"API_TOKEN": secret, "LOOKALIKE": lookalike, "LOG_LEVEL": "debug", "PLAIN_LOOKALIKE": lookalike}
	def.PlainEnv = []string{"LOG_LEVEL", "PLAIN_LOOKALIKE"}
	v, err := hs.reg.Register(ctx, def, false)
	if err != nil {
		t.Fatal(err)
	}

	row, err := hs.db.GetServer(ctx, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(row.Config, []byte(secret)) || bytes.Contains(row.Config, []byte("bm90IHNlYWxlZA")) {
		t.Errorf("the stored definition holds a secret in clear: %s", row.Config)
	}
	var stored struct {
		Env map[string]string `json:"env"`
	}
	if err := json.Unmarshal(row.Config, &stored); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"API_TOKEN", "LOOKALIKE", "PLAIN_LOOKALIKE"} {
		if !secrets.IsSealed(stored.Env[k]) {
			t.Errorf("stored %s = %q, want it sealed", k, stored.Env[k])
		}
	}
	if stored.Env["LOG_LEVEL"] != "debug" {
		t.Errorf("stored LOG_LEVEL = %q, want the plain setting as it is", stored.Env["LOG_LEVEL"])
	}
	if b, _ := json.Marshal(v); bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(lookalike)) {
		t.Errorf("the view shows a secret: %s", b)
	}

	// Another registry with the key reads the values back in clear, and
	// gives them to the server it starts.
	other := newHarness(t, openStore(t, path), &servers.Options{Keys: keys})
	if _, err := other.reg.Load(ctx, configOf()); err != nil {
		t.Fatal(err)
	}
	cfg, err := other.reg.Upstreams().Config("sealed")
	if err != nil {
		t.Fatalf("the stored server was not loaded: %v", err)
	}
	want := map[string]string{"API_TOKEN": secret, "LOOKALIKE": lookalike, "LOG_LEVEL": "debug", "PLAIN_LOOKALIKE": lookalike}
	if diff := cmp.Diff(want, cfg.Env); diff != "" {
		t.Errorf("env given to the server (-want +got):\n%s", diff)
	}
}

func TestRename(t *testing.T) {
	ctx := t.Context()
	hs := newHarness(t, openStore(t, storePath(t)), nil)
	if _, err := hs.reg.Load(ctx, configOf(demoDef("fromfile"))); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alpha", "other"} {
		if _, err := hs.reg.Register(ctx, demoDef(name), false); err != nil {
			t.Fatal(err)
		}
	}
	before := hs.connect(t, "alpha")
	if got := hs.toolNames("alpha"); !slices.Contains(got, "alpha.echo") {
		t.Fatalf("tools of alpha %v, want alpha.echo among them", got)
	}
	hs.h.take()

	refused := []struct {
		name, from, to string
		check          func(t *testing.T, err error)
	}{
		{"config file server", "fromfile", "renamed", func(t *testing.T, err error) {
			ae := apiError(t, err, http.StatusConflict, api.CodeConflict)
			if !strings.Contains(ae.Message, "config file") {
				t.Errorf("message %q", ae.Message)
			}
		}},
		{"to a name taken", "alpha", "other", func(t *testing.T, err error) { apiError(t, err, http.StatusConflict, api.CodeConflict) }},
		{"to an invalid name", "alpha", "Bad Name", func(t *testing.T, err error) { configErrors(t, err) }},
		{"unknown server", "nosuch", "x", func(t *testing.T, err error) { notFound(t, err) }},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hs.reg.Rename(ctx, tc.from, tc.to)
			tc.check(t, err)
			published, removed, renamed, _ := hs.h.take()
			if len(published)+len(removed)+len(renamed) > 0 {
				t.Errorf("a refused rename told the owner: published %v, removed %v, renamed %v", published, removed, renamed)
			}
		})
	}
	if got := hs.toolNames("alpha"); !slices.Contains(got, "alpha.echo") {
		t.Fatalf("after the refused renames, tools of alpha %v", got)
	}

	v, err := hs.reg.Rename(ctx, "alpha", "beta")
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != before.ID || v.Name != "beta" {
		t.Errorf("renamed view %s %q, want id %s name beta", v.ID, v.Name, before.ID)
	}
	published, removed, renamed, _ := hs.h.take()
	if diff := cmp.Diff([]string{"servers/"}, published); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"alpha"}, removed); diff != "" {
		t.Errorf("OnRemove (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"alpha>beta"}, renamed); diff != "" {
		t.Errorf("OnRename (-want +got):\n%s", diff)
	}
	// The tools follow the name at once (the last known ones, until the
	// server, which was connected, is connected again under its new name).
	if got := hs.toolNames("alpha"); len(got) != 0 {
		t.Errorf("tools still listed under the old name: %v", got)
	}
	if got := hs.toolNames("beta"); !slices.Contains(got, "beta.echo") {
		t.Errorf("tools of beta %v, want beta.echo among them", got)
	}
	if _, err := hs.reg.Get(ctx, "alpha"); err == nil {
		t.Error("the old name still resolves")
	} else {
		notFound(t, err)
	}
	row, err := hs.db.GetServer(ctx, before.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Name != "beta" {
		t.Errorf("store row %s is named %q, want beta", row.ID, row.Name)
	}
	waitFor(t, "beta connected again", func() bool {
		return hs.status(t, "beta").Status == string(upstream.StateConnected)
	})
	for _, tl := range hs.cat.Snapshot().ServerTools("beta") {
		if !tl.Available {
			t.Errorf("%s unavailable once beta is connected", tl.Name)
		}
	}

	// Renaming to the same name is a no-op.
	if _, err := hs.reg.Rename(ctx, "beta", "beta"); err != nil {
		t.Fatal(err)
	}
	if published, removed, renamed, _ := hs.h.take(); len(published)+len(removed)+len(renamed) > 0 {
		t.Errorf("a rename to the same name told the owner: %v %v %v", published, removed, renamed)
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name   string
		target string
		// check judges the error; nil: Remove must succeed.
		check func(t *testing.T, err error)
	}{
		{name: "runtime server", target: "runtime"},
		{name: "by id", target: "id-of-runtime"},
		{name: "config file server", target: "fromfile", check: func(t *testing.T, err error) {
			ae := apiError(t, err, http.StatusConflict, api.CodeConflict)
			if !strings.Contains(ae.Message, "remove it there") {
				t.Errorf("message %q", ae.Message)
			}
		}},
		{name: "unknown server", target: "nosuch", check: notFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			hs := newHarness(t, openStore(t, storePath(t)), nil)
			if _, err := hs.reg.Load(ctx, configOf(demoDef("fromfile"))); err != nil {
				t.Fatal(err)
			}
			v, err := hs.reg.Register(ctx, demoDef("runtime"), false)
			if err != nil {
				t.Fatal(err)
			}
			hs.connect(t, "runtime")
			hs.connect(t, "fromfile")
			hs.h.take()
			before := rows(t, hs.db)
			target := tc.target
			if target == "id-of-runtime" {
				target = v.ID
			}

			err = hs.reg.Remove(ctx, target)
			published, removed, _, _ := hs.h.take()
			if tc.check != nil {
				tc.check(t, err)
				if diff := cmp.Diff(before, rows(t, hs.db)); diff != "" {
					t.Errorf("store changed (-before +after):\n%s", diff)
				}
				if len(published)+len(removed) > 0 {
					t.Errorf("a refused removal told the owner: published %v, removed %v", published, removed)
				}
				if hs.status(t, "fromfile").Status != string(upstream.StateConnected) || len(hs.toolNames("fromfile")) == 0 {
					t.Error("a refused removal touched the config file's server")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"config:fromfile"}, rows(t, hs.db)); diff != "" {
				t.Errorf("store rows (-want +got):\n%s", diff)
			}
			if got := hs.toolNames("runtime"); len(got) != 0 {
				t.Errorf("tools of the removed server still listed: %v", got)
			}
			if _, err := hs.reg.Upstreams().Status("runtime"); err == nil {
				t.Error("the removed server still has an upstream")
			}
			if !slices.Equal(published, []string{"servers/"}) || !slices.Equal(removed, []string{"runtime"}) {
				t.Errorf("published %v, removed %v; want [servers/], [runtime]", published, removed)
			}
			_, err = hs.reg.Get(ctx, "runtime")
			notFound(t, err)
		})
	}
}

func TestDefaultAccess(t *testing.T) {
	ctx := t.Context()
	path := storePath(t)
	fileDef := demoDef("fromfile")
	fileDef.DefaultAccess = "allow"
	cfg := configOf(fileDef)
	hs := newHarness(t, openStore(t, path), nil)
	if _, err := hs.reg.Load(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := hs.reg.Register(ctx, demoDef("runtime"), false); err != nil {
		t.Fatal(err)
	}
	hs.h.take()

	// fresh is what a restarted gateway sees on the same store.
	fresh := func(t *testing.T) *servers.Registry {
		r := newHarness(t, openStore(t, path), nil).reg
		if _, err := r.Load(ctx, configOf(fileDef.Clone())); err != nil {
			t.Fatal(err)
		}
		return r
	}
	type access struct{ InForce, Source, File string }
	viewOf := func(v api.Server) access { return access{v.DefaultAccess, v.DefaultAccessSource, v.FileDefaultAccess} }

	steps := []struct {
		name   string
		server string
		do     func(r *servers.Registry, server string) (api.Server, error)
		want   access
		// refused: the error's code; "" for a change.
		refused string
	}{
		{name: "override a config file server", server: "fromfile",
			do:   func(r *servers.Registry, s string) (api.Server, error) { return r.SetDefaultAccess(ctx, s, "deny") },
			want: access{"deny", "override", "allow"}},
		{name: "reset the override", server: "fromfile",
			do:   func(r *servers.Registry, s string) (api.Server, error) { return r.ResetDefaultAccess(ctx, s) },
			want: access{"allow", servers.SourceConfig, ""}},
		{name: "change a runtime server's definition", server: "runtime",
			do:   func(r *servers.Registry, s string) (api.Server, error) { return r.SetDefaultAccess(ctx, s, "deny") },
			want: access{"deny", servers.SourceAPI, ""}},
		{name: "a runtime server has no file value to reset to", server: "runtime",
			do:      func(r *servers.Registry, s string) (api.Server, error) { return r.ResetDefaultAccess(ctx, s) },
			want:    access{"deny", servers.SourceAPI, ""},
			refused: api.CodeConflict},
		{name: "unknown server", server: "nosuch",
			do:      func(r *servers.Registry, s string) (api.Server, error) { return r.SetDefaultAccess(ctx, s, "deny") },
			refused: api.CodeServerNotFound},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			v, err := st.do(hs.reg, st.server)
			published, _, _, changed := hs.h.take()
			if st.refused != "" {
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Code != st.refused {
					t.Fatalf("error %v, want code %s", err, st.refused)
				}
				if len(published) > 0 {
					t.Errorf("a refused change was published: %v", published)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(st.want, viewOf(v)); diff != "" {
					t.Errorf("returned view (-want +got):\n%s", diff)
				}
				if !slices.Equal(published, []string{"servers/"}) || changed == 0 {
					t.Errorf("published %v, OnChange called %d times; want [servers/] and at least once", published, changed)
				}
			}
			if st.server == "nosuch" {
				return
			}
			if got := hs.reg.DefaultAccess()[st.server]; got != st.want.InForce {
				t.Errorf("policy sees default_access %q, want %q", got, st.want.InForce)
			}
			// A restarted gateway on the same store agrees.
			r := fresh(t)
			again, err := r.Get(ctx, st.server)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(st.want, viewOf(again)); diff != "" {
				t.Errorf("after a restart (-want +got):\n%s", diff)
			}
			if got := r.DefaultAccess()[st.server]; got != st.want.InForce {
				t.Errorf("after a restart the policy sees %q, want %q", got, st.want.InForce)
			}
		})
	}
}
