package config

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/httpguard"
)

// Values of [Front.ToolExposure].
const (
	// ToolExposureAll lists every tool the caller may call (the default).
	ToolExposureAll = "all"
	// ToolExposureSearch lists only the meta-tools search_tools and
	// call_tool, for clients that drown in thousands of tool definitions.
	ToolExposureSearch = "search"
)

// Values of [Classifier.Mode].
const (
	// ClassifierOffline scores tools against the skills' descriptions and
	// examples in process; it needs no network and is the default.
	ClassifierOffline = "offline"
	// ClassifierLLM asks an OpenAI-compatible chat endpoint, falling back to
	// the offline classifier on error.
	ClassifierLLM = "llm"
)

// EnvToolExposure overrides front.tool_exposure (env > file), so one image
// can serve both kinds of client without editing the file.
const EnvToolExposure = "SWITCHBOARD_TOOL_EXPOSURE"

// Defaults of the search.embeddings fields the file may leave out.
const (
	DefaultEmbeddingsBatchSize      = 64
	DefaultEmbeddingsTimeoutSeconds = 10
)

// Bounds of the numeric fields of search.embeddings and skills.classifier.
// They catch typos (a timeout in milliseconds) before a request does.
const (
	maxEmbeddingsBatchSize      = 2048
	maxEmbeddingsTimeoutSeconds = 300
	maxClassifierBatchSize      = 200
	maxClassifierConcurrency    = 64
	maxClassifierTimeoutSeconds = 600
	// maxSessionsBound is far above what one process can hold (an idle
	// session costs some 35 KB of RSS and a goroutine): a larger value is a
	// typo.
	maxSessionsBound = 1_000_000
)

// skillIDRE is the syntax of skill ids: snake_case, so they read the same in
// URLs, JSON and SQL without escaping.
var skillIDRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Search is the search: section. The zero value ranks lexically only, which
// needs no network; semantic ranking is opt-in because it sends tool text to
// an embeddings service.
type Search struct {
	// Embeddings enables semantic ranking fused with the lexical one; nil =
	// lexical ranking only.
	Embeddings *Embeddings `yaml:"embeddings"`
}

// Embeddings is the OpenAI-compatible embeddings endpoint used for semantic
// ranking (yaml search.embeddings). When it is down, search degrades to
// lexical ranking rather than failing.
type Embeddings struct {
	URL       string `yaml:"url"`         // http(s) URL of an OpenAI-compatible API (…/v1 or base)
	Model     string `yaml:"model"`       // required
	APIKeyEnv string `yaml:"api_key_env"` // NAME of the env var holding the key (optional); never the key itself
	BatchSize int    `yaml:"batch_size"`  // default 64, 1..2048
	// TimeoutSeconds bounds one request (yaml timeout_seconds, default 10,
	// 1..300).
	TimeoutSeconds int `yaml:"timeout_seconds"`
}

// APIKey returns the key to send, read from the variable named by APIKeyEnv
// with getenv (nil = os.Getenv): "" when APIKeyEnv is empty or the variable
// is unset, since local embedding servers need none. It is read on use, not
// at load, so a rotated key needs no reload.
func (e *Embeddings) APIKey(getenv func(string) string) string {
	if e == nil {
		return ""
	}
	return readAPIKey(e.APIKeyEnv, getenv)
}

// Timeout returns TimeoutSeconds as a duration, or the default when it is
// unset (a hand-built Embeddings).
func (e *Embeddings) Timeout() time.Duration {
	return secondsOr(e.TimeoutSeconds, DefaultEmbeddingsTimeoutSeconds)
}

// Skills is the skills: section. The zero value (and a parsed file without
// the section) means the built-in taxonomy and the offline classifier.
type Skills struct {
	// Taxonomy replaces the built-in skills when non-empty: yaml taxonomy: [{id, name, description, examples: [..], keywords: [..]}]
	Taxonomy   []SkillDef `yaml:"taxonomy,omitempty"`
	Classifier Classifier `yaml:"classifier"`
}

// SkillDef is one skill of a taxonomy. Description and Examples are what the
// offline classifier compares tool text with, so they matter more than Name.
type SkillDef struct {
	ID          string   `yaml:"id"`
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Examples    []string `yaml:"examples,omitempty,nonblank"`
	Keywords    []string `yaml:"keywords,omitempty,nonblank"`
}

// Classifier is how tools are assigned skills (yaml skills.classifier).
// [Parse] fills every field left out with [DefaultClassifier]'s value.
type Classifier struct {
	Mode      string `yaml:"mode"`  // "offline" (default) | "llm"
	URL       string `yaml:"url"`   // required for llm
	Model     string `yaml:"model"` // required for llm
	APIKeyEnv string `yaml:"api_key_env"`
	// BatchSize is the number of tools per chat request (default 20, 1..200).
	BatchSize int `yaml:"batch_size"`
	// Concurrency bounds the chat requests in flight (default 4, 1..64).
	Concurrency int `yaml:"concurrency"`
	// TimeoutSeconds bounds one chat request (default 30, 1..600).
	TimeoutSeconds int `yaml:"timeout_seconds"`
}

// DefaultClassifier returns the classifier used when the file sets none: offline,
// with the llm knobs at their defaults so switching the mode is one line.
func DefaultClassifier() Classifier {
	return Classifier{Mode: ClassifierOffline, BatchSize: 20, Concurrency: 4, TimeoutSeconds: 30}
}

// APIKey returns the key to send, read from the variable named by APIKeyEnv
// with getenv (nil = os.Getenv); "" when APIKeyEnv is empty or the variable
// is unset.
func (c *Classifier) APIKey(getenv func(string) string) string {
	if c == nil {
		return ""
	}
	return readAPIKey(c.APIKeyEnv, getenv)
}

// Timeout returns TimeoutSeconds as a duration, or the default when it is
// unset (a hand-built Classifier).
func (c *Classifier) Timeout() time.Duration {
	return secondsOr(c.TimeoutSeconds, DefaultClassifier().TimeoutSeconds)
}

// Front is the front: section: how the MCP front presents the catalog.
type Front struct {
	// ToolExposure: "all" (default: every tool the caller may call is listed) or "search" (only the
	// meta-tools search_tools and call_tool are listed). yaml tool_exposure;
	// env SWITCHBOARD_TOOL_EXPOSURE overrides.
	ToolExposure string `yaml:"tool_exposure"`
	// MetaToolPrefix (yaml meta_tool_prefix, default none) namespaces the
	// meta-tools of search mode like a server's tools, e.g. "switchboard"
	// gives switchboard.search_tools, the names before seed 004's
	// unprefixed rule was followed. A name, as a server prefix.
	MetaToolPrefix string `yaml:"meta_tool_prefix"`
	// Stateless (yaml stateless, default false) turns legacy sessions off:
	// clients of the session revisions (up to 2025-11-25) are then served
	// per request too, so any replica answers any request, and upstreams
	// cannot ask them anything (sampling, elicitation, roots). Clients of
	// the stateless revision (2026-07-28) are served per request either
	// way. See docs/protocol.md and docs/deploy.md.
	Stateless bool `yaml:"stateless"`
	// InputTimeoutSeconds (yaml input_timeout_seconds, 1..3600; 0 = unset,
	// the front's default of 300) is how long a client of the stateless
	// revision has to answer an input_required result: its requestState
	// expires, and a call parked on a classic server's request is answered
	// with an error. See docs/protocol.md.
	InputTimeoutSeconds int `yaml:"input_timeout_seconds"`
	// AllowedHosts (yaml allowed_hosts) are Host header values, besides
	// the listener's own addresses, that every route accepts: the names a
	// reverse proxy or DNS forwards to the gateway. On a loopback listener
	// any other name is refused (DNS rebinding); on another listener the
	// list, once set, is enforced too. See docs/security.md.
	AllowedHosts []string `yaml:"allowed_hosts,omitempty,nonblank"`
	// AllowedOrigins (yaml allowed_origins) are browser origins
	// (scheme://host[:port]) that may drive the gateway besides its own,
	// e.g. a web client served from another host. See docs/security.md.
	AllowedOrigins []string `yaml:"allowed_origins,omitempty,nonblank"`
	// MaxSessions (yaml max_sessions, 1..1000000) caps the live MCP
	// sessions (Streamable HTTP and SSE, all endpoints together); 0 = unset,
	// the front's default (5000). At the cap, a new session ends the least
	// recently used idle one, or is refused (503) if all are busy. See
	// docs/security.md#sessions.
	MaxSessions int `yaml:"max_sessions"`
	// MaxSessionsPerIdentity (yaml max_sessions_per_identity, 1..1000000)
	// caps the live MCP sessions of one caller identity; 0 = unset, the
	// front's default (1000). At the cap, a new session of that identity
	// ends its least recently used idle one, or is refused (429).
	MaxSessionsPerIdentity int `yaml:"max_sessions_per_identity"`
}

func readAPIKey(name string, getenv func(string) string) string {
	if name == "" {
		return ""
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv(name)
}

func secondsOr(v, def int) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func (e *Embeddings) setDefaults() {
	e.BatchSize, e.TimeoutSeconds = DefaultEmbeddingsBatchSize, DefaultEmbeddingsTimeoutSeconds
}

// check checks the numbers and the API key variable, then that url and
// model are there unless the section could not be read whole.
func (e *Embeddings) check(s scope) bool {
	ok := checkAPIKeyEnv(s.in("api_key_env"), &e.APIKeyEnv)
	ok = s.in("batch_size").between(e.BatchSize, 1, maxEmbeddingsBatchSize) && ok
	ok = s.in("timeout_seconds").between(e.TimeoutSeconds, 1, maxEmbeddingsTimeoutSeconds) && ok
	if !s.broken() {
		requireEndpoint(s, e.URL, e.Model)
	}
	return ok
}

// check checks the numbers, the API key variable and the mode, then what
// the mode needs: url and model for llm, neither for offline.
func (c *Classifier) check(s scope) bool {
	ok := checkAPIKeyEnv(s.in("api_key_env"), &c.APIKeyEnv)
	ok = s.in("batch_size").between(c.BatchSize, 1, maxClassifierBatchSize) && ok
	ok = s.in("concurrency").between(c.Concurrency, 1, maxClassifierConcurrency) && ok
	ok = s.in("timeout_seconds").between(c.TimeoutSeconds, 1, maxClassifierTimeoutSeconds) && ok
	if m := s.in("mode"); m.set() && c.Mode != ClassifierOffline && c.Mode != ClassifierLLM {
		m.atVal("unknown mode %q: must be %q (the default) or %q", c.Mode, ClassifierOffline, ClassifierLLM)
		return false
	}
	if s.broken() || s.in("mode").broken() {
		return ok
	}
	if c.Mode == ClassifierLLM {
		requireEndpoint(s, c.URL, c.Model)
		return ok
	}
	for _, key := range []string{"url", "model", "api_key_env"} {
		if k := s.in(key); k.set() {
			k.atKey("only used with mode: llm (the mode is %q)", c.Mode)
		}
	}
	return ok
}

// requireEndpoint reports url and model missing, at the section's key, and
// a url that is not http(s), at the url's.
func requireEndpoint(s scope, url, model string) {
	if u := s.in("url"); !u.broken() {
		if strings.TrimSpace(url) == "" {
			u.errorf(s.a.s.key, "url is required: the http(s) URL of an OpenAI-compatible API, e.g. https://api.openai.com/v1")
		} else if msg := checkHTTPURL(url); msg != "" {
			u.atKey("%s", msg)
		}
	}
	if m := s.in("model"); !m.broken() && strings.TrimSpace(model) == "" {
		m.errorf(s.a.s.key, "model is required: the model name the API expects")
	}
}

// check checks each skill of the taxonomy: a snake_case id used once, and
// an id, a name and a description.
func (sk *Skills) check(s scope) bool {
	ok := true
	first := map[string]int{}
	for i, def := range sk.Taxonomy {
		it := s.in("taxonomy").item(i)
		if id := it.in("id"); id.set() {
			if !skillIDRE.MatchString(def.ID) {
				id.atVal("invalid skill id %s: use snake_case (lower-case letters, digits and _, starting with a letter), e.g. issue_tracking", strconv.Quote(def.ID))
				id.fail()
				ok = false
			} else if j, dup := first[def.ID]; dup {
				id.atVal("duplicate skill id %q (first at %s[%d])", def.ID, s.in("taxonomy").a.field, j)
				ok = false
			} else {
				first[def.ID] = i
			}
		}
		if it.broken() {
			continue
		}
		for _, req := range []struct{ key, val string }{{"id", def.ID}, {"name", def.Name}, {"description", def.Description}} {
			// A key that failed to decode is reported once, not also as missing.
			k := it.in(req.key)
			if given := k.set() || k.broken(); !given || (strings.TrimSpace(req.val) == "" && req.key != "id") {
				k.errorf(it.a.s.key, "%s is required: every skill needs an id, a name and a description", req.key)
				ok = false
			}
		}
	}
	return ok
}

// check checks meta_tool_prefix, the hosts and origins and the numbers;
// tool_exposure is checked by validateFront, once the environment has had
// its say.
func (fr *Front) check(s scope) bool {
	ok := true
	if v, p := fr.MetaToolPrefix, s.in("meta_tool_prefix"); p.set() && v != "" && (!NameRE.MatchString(v) || strings.Contains(v, "__")) {
		p.atKey("%q is not a name: use lower-case letters, digits, - and _, without a separator (. or __)", v)
		ok = false
	}
	for i, h := range fr.AllowedHosts {
		if it := s.in("allowed_hosts").item(i); !it.broken() && (strings.Contains(h, "/") || strings.ContainsAny(h, " \t")) {
			it.atKey("%q is not a host name: want a name or IP such as gateway.example.com, without scheme or path", h)
			ok = false
		}
	}
	for i, o := range fr.AllowedOrigins {
		if it := s.in("allowed_origins").item(i); !it.broken() {
			if _, valid := httpguard.NormalizeOrigin(o); !valid {
				it.atKey("%q is not an origin: want scheme://host[:port] such as https://app.example.com, without path", o)
				ok = false
			}
		}
	}
	ok = s.in("max_sessions").between(fr.MaxSessions, 1, maxSessionsBound) && ok
	ok = s.in("max_sessions_per_identity").between(fr.MaxSessionsPerIdentity, 1, maxSessionsBound) && ok
	return s.in("input_timeout_seconds").between(fr.InputTimeoutSeconds, 1, 3600) && ok
}

// validateFront applies SWITCHBOARD_TOOL_EXPOSURE (env > file; empty =
// unset) and checks the value where it came from.
func validateFront(c *checker, cfg *Config, getenv func(string) string) {
	at := place{field: "front.tool_exposure"}
	if v := getenv(EnvToolExposure); v != "" {
		cfg.Front.ToolExposure = v
		at = place{env: EnvToolExposure}
	} else if c.broken(at.field) {
		return
	}
	if cfg.Front.ToolExposure == "" {
		cfg.Front.ToolExposure = ToolExposureAll
		return
	}
	if msg := oneOf(cfg.Front.ToolExposure, ToolExposureAll, ToolExposureSearch); msg != "" {
		c.add(at, "%s", msg)
	}
}

// checkAPIKeyEnv checks the name of the variable holding an API key; a bad
// one is cleared and counts as not set. The value is never quoted in a
// message: the commonest mistake is pasting the key itself here.
func checkAPIKeyEnv(s scope, v *string) bool {
	if !s.set() {
		return true
	}
	var msg string
	switch {
	case *v == "":
		msg = "must name an environment variable (remove the key for no API key)"
	case looksLikeKey(*v):
		msg = "looks like an API key, not the name of a variable: put the key in an environment variable and name the variable here, e.g. api_key_env: OPENAI_API_KEY (the value is not shown)"
	case !envNameRE.MatchString(*v):
		msg = badRefMsg
	default:
		return true
	}
	s.atVal("%s", msg)
	s.fail()
	*v = ""
	return false
}

// keyPrefixes start the API keys and tokens operators most often paste in
// place of a variable name. They are matched case-sensitively: variable
// names are conventionally upper case (HF_TOKEN is a name, hf_... a token).
var keyPrefixes = []string{"sk-", "sk_", "pk_", "rk_", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "hf_", "AIza", "eyJ"}

// looksLikeKey reports whether v is more likely a credential than an
// environment variable name: a known key prefix, a "Bearer " header value,
// or a long string of letters and digits with no underscore, which variable
// names of that length almost always have.
func looksLikeKey(v string) bool {
	for _, p := range keyPrefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	if strings.HasPrefix(strings.ToLower(v), "bearer ") {
		return true
	}
	if len(v) >= 24 && !strings.Contains(v, "_") {
		hasDigit := strings.ContainsAny(v, "0123456789")
		hasLetter := strings.ContainsFunc(v, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' })
		return hasDigit && hasLetter
	}
	return false
}
