package config

import (
	_ "embed"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

//go:embed default.yaml
var defaultYAML []byte

// defaultName names the embedded default config in error messages.
const defaultName = "<built-in default>"

// Load reads and validates the file at path, applies env overrides (getenv; nil =
// os.Getenv) with precedence env > file > defaults, expands ${VAR} in header
// values and env values, and returns every problem at once as *Errors. A file
// that cannot be read is reported as a wrapped error instead, so callers can test
// errors.Is(err, fs.ErrNotExist) to fall back to [Default].
func Load(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(path, data, getenv)
}

// Parse is Load on bytes; name is used in error messages as the file name and is
// stored in Config.File.
func Parse(name string, data []byte, getenv func(string) string) (*Config, error) {
	cfg, errs := parse(name, data, orOSGetenv(getenv))
	if len(errs) > 0 {
		return nil, asError(errs)
	}
	return cfg, nil
}

// Default returns the built-in config used when no file is given and
// ./switchboard.yaml does not exist: one server "demo" started with
// "switchboard demo-server". It is parsed from an embedded YAML file so it goes
// through the same validation as a user's file. Environment overrides that are
// invalid are ignored here (there is no error to return); use [LoadDefault] to
// report them.
func Default(getenv func(string) string) *Config {
	getenv = orOSGetenv(getenv)
	// Ignoring one variable can reveal a problem with another (a JWKS URL
	// dropped leaves mode jwt without a key), so repeat until clean; each
	// round ignores at least one more variable, so this ends.
	bad := map[string]bool{}
	filtered := func(k string) string {
		if bad[k] {
			return ""
		}
		return getenv(k)
	}
	for {
		cfg, errs := parse(defaultName, defaultYAML, filtered)
		if len(errs) == 0 {
			cfg.File = ""
			return cfg
		}
		grew := false
		for _, e := range errs {
			if e.File != EnvironmentFile {
				panic(fmt.Sprintf("config: built-in default is invalid: %v", errs))
			}
			grew = grew || !bad[e.Field]
			bad[e.Field] = true
		}
		if !grew {
			panic(fmt.Sprintf("config: built-in default is invalid: %v", errs))
		}
	}
}

// LoadDefault is [Default] that reports invalid environment overrides as *Errors
// instead of ignoring them.
func LoadDefault(getenv func(string) string) (*Config, error) {
	cfg, err := Parse(defaultName, defaultYAML, getenv)
	if err != nil {
		return nil, err
	}
	cfg.File = ""
	return cfg, nil
}

func orOSGetenv(getenv func(string) string) func(string) string {
	if getenv == nil {
		return os.Getenv
	}
	return getenv
}

// parse returns the config and every problem; the config is complete even when
// there are problems, which lets Default retry without bad env overrides.
func parse(name string, data []byte, getenv func(string) string) (*Config, Errors) {
	cfg := &Config{File: name, Settings: DefaultSettings(), Skills: Skills{Classifier: DefaultClassifier()}}
	src := map[string]settingSource{}
	root := &spot{}
	var errs Errors
	var servers []*Server
	var spots []*spot
	serversKnown := false
	keys := sectionKeys{servers: "servers", settings: "settings"}

	if f, synErr := parseYAML(name, data); synErr != nil {
		errs = append(errs, synErr)
	} else {
		d := newDecoder(name, f)
		servers, spots, serversKnown = d.decodeTop(f, cfg, src, root, &keys)
		errs = append(errs, d.errs...)
	}

	errs = append(errs, applyEnv(&cfg.Settings, getenv, src)...)
	errs = append(errs, resolveAliases(name, keys.settings, &cfg.Settings, src)...)
	errs = append(errs, validateSettings(name, keys.settings, &cfg.Settings, src)...)

	authSrc, authErrs := applyAuthEnv(cfg, getenv)
	errs = append(errs, authErrs...)
	c := newChecker(name, root)
	validateAuth(c, cfg, authSrc, getenv)
	validateFront(c, cfg, getenv)

	for i, s := range servers {
		sp := spots[i]
		if sp.broken {
			serversKnown = false // a prefix may be missing
			continue
		}
		serversKnown = serversKnown && !sp.kid("prefix").bad
		probs := s.applyShorthands()
		probs = append(probs, validateServer(s)...)
		probs = append(probs, s.expand(getenv)...)
		if cfg.Settings.RequireTLSUpstreams && s.InsecureTransport() {
			probs = append(probs, problem{"url", InsecureTransportRefused})
		}
		for _, p := range probs {
			if top := topField(p.sub); top != "" && sp.kid(top).bad {
				continue // its decoding error is already reported
			}
			pos := s.posFor(p.sub)
			errs = append(errs, &Error{File: name, Line: pos.Line, Column: pos.Column, Field: keys.servers + strings.TrimPrefix(serverField(s.Name, p.sub), "servers"), Msg: p.msg})
		}
		if s.DefaultAccess == "" {
			s.DefaultAccess = AccessAllow
		}
	}
	validateFallbacks(c, cfg, servers, serversKnown)
	validateClients(c, cfg, servers, serversKnown)
	errs = append(errs, c.errs...)

	slices.SortFunc(servers, func(a, b *Server) int { return strings.Compare(a.Name, b.Name) })
	cfg.Servers = servers
	cfg.serversSection = keys.servers
	cfg.Pos = root.positions()
	return cfg, errs
}

// topKeys are the keys allowed at the top level of a file.
var topKeys = []string{"servers", "settings", "auth", "authz", "fallbacks", "tool_versions", "search", "skills", "front", "clients",
	seedServersKey, seedSettingsKey}

// Seed 002 (ADR-034) names the two main sections mcp_servers: and
// mcp_settings:. They are read by the same code as servers: and settings:,
// so a file written against the seed runs as it is; a file may use either
// spelling of each section, not both.
const (
	seedServersKey  = "mcp_servers"
	seedSettingsKey = "mcp_settings"
)

// sectionKeys are the spellings a file used for the servers and settings
// sections, so that problems name the keys the operator wrote.
type sectionKeys struct{ servers, settings string }

// decodeTop decodes the document's top-level mapping into cfg (all but the
// servers, the other sections into the fields named by their yaml tags,
// tracing them under root) and returns the servers, the spot of each, and whether
// every server definition could be read (so a name missing from them is
// really unknown). It records in keys how the file spelled the servers and
// settings sections.
func (d *decoder) decodeTop(f *ast.File, cfg *Config, src map[string]settingSource, root *spot, keys *sectionKeys) ([]*Server, []*spot, bool) {
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			d.errorf(posOf(doc.Body), "", "multiple YAML documents are not supported; put everything in one")
			break
		}
		body = doc.Body
	}
	if r, ok := d.resolve(body, ""); !ok {
		return nil, nil, false
	} else if !isNull(r) {
		switch r.(type) {
		case *ast.MappingNode, *ast.MappingValueNode:
		default:
			d.errorf(posOf(r), "", "the top level must be a mapping with the keys %s, got %s", quotedList(topKeys), kindOf(r))
			return nil, nil, false
		}
	}
	entries, topOK := d.mapping(body, "")
	var servers []*Server
	var spots []*spot
	serversKnown := topOK
	seen := map[string]string{} // section -> the spelling met first
	twice := func(e entry, section string) bool {
		first, dup := seen[section]
		if !dup {
			seen[section] = e.key
			return false
		}
		d.errorf(e.pos, e.key, "%q and %q are the same section (seed 002 spells it %q); keep one of them", first, e.key, "mcp_"+section)
		serversKnown = serversKnown && section != "servers"
		return true
	}
	sections := infoOf(reflect.TypeFor[Config]())
	for _, e := range entries {
		switch e.key {
		case "servers", seedServersKey:
			if twice(e, "servers") {
				continue
			}
			keys.servers = e.key
			var ok bool
			servers, spots, ok = d.decodeServers(e.value, e.key)
			serversKnown = serversKnown && ok
			continue
		case "settings", seedSettingsKey:
			if twice(e, "settings") {
				continue
			}
			keys.settings = e.key
			d.decodeSettings(e.value, e.key, &cfg.Settings, src)
			continue
		}
		field := sections.field(e.key)
		if field == nil {
			d.errorf(e.pos, e.key, "unknown top-level key %q: only %s are allowed%s", e.key, quotedList(topKeys), suggest(e.key, topKeys))
			continue
		}
		a := d.child(at{s: root}, e.key, e.pos)
		d.decode(e.value, reflect.ValueOf(cfg).Elem().Field(field.index), a, field.opts)
		s := scope{d, a}
		switch e.key {
		case "auth":
			cfg.Auth.Pos = e.pos
		case "fallbacks":
			checkFallbackLists(s, cfg.Fallbacks)
		case "tool_versions":
			checkToolVersions(s, cfg.ToolVersions)
		}
	}
	return servers, spots, serversKnown
}
