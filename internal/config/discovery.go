package config

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

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

var (
	searchFields     = []string{"embeddings"}
	embeddingsFields = []string{"url", "model", "api_key_env", "batch_size", "timeout_seconds"}
	skillsFields     = []string{"taxonomy", "classifier"}
	skillDefFields   = []string{"id", "name", "description", "examples", "keywords"}
	classifierFields = []string{"mode", "url", "model", "api_key_env", "batch_size", "concurrency", "timeout_seconds"}
	frontFields      = []string{"tool_exposure", "stateless", "allowed_hosts", "allowed_origins", "max_sessions", "max_sessions_per_identity", "input_timeout_seconds", "meta_tool_prefix"}
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
	Embeddings *Embeddings
}

// Embeddings is the OpenAI-compatible embeddings endpoint used for semantic
// ranking (yaml search.embeddings). When it is down, search degrades to
// lexical ranking rather than failing.
type Embeddings struct {
	URL       string // http(s) URL of an OpenAI-compatible API (…/v1 or base)
	Model     string // required
	APIKeyEnv string // yaml api_key_env: NAME of the env var holding the key (optional); never the key itself
	BatchSize int    // yaml batch_size, default 64, 1..2048
	// TimeoutSeconds bounds one request (yaml timeout_seconds, default 10,
	// 1..300).
	TimeoutSeconds int
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
	Taxonomy   []SkillDef
	Classifier Classifier
}

// SkillDef is one skill of a taxonomy. Description and Examples are what the
// offline classifier compares tool text with, so they matter more than Name.
type SkillDef struct {
	ID, Name, Description string
	Examples, Keywords    []string
}

// Classifier is how tools are assigned skills (yaml skills.classifier).
// [Parse] fills every field left out with [DefaultClassifier]'s value.
type Classifier struct {
	Mode       string // "offline" (default) | "llm"
	URL, Model string // required for llm
	APIKeyEnv  string // yaml api_key_env
	// BatchSize is the number of tools per chat request (default 20, 1..200).
	BatchSize int
	// Concurrency bounds the chat requests in flight (default 4, 1..64).
	Concurrency int
	// TimeoutSeconds bounds one chat request (default 30, 1..600).
	TimeoutSeconds int
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
	ToolExposure string
	// MetaToolPrefix (yaml meta_tool_prefix, default none) namespaces the
	// meta-tools of search mode like a server's tools, e.g. "switchboard"
	// gives switchboard.search_tools, the names before seed 004's
	// unprefixed rule was followed. A name, as a server prefix.
	MetaToolPrefix string
	// Stateless (yaml stateless, default false) turns legacy sessions off:
	// clients of the session revisions (up to 2025-11-25) are then served
	// per request too, so any replica answers any request, and upstreams
	// cannot ask them anything (sampling, elicitation, roots). Clients of
	// the stateless revision (2026-07-28) are served per request either
	// way. See docs/protocol.md and docs/deploy.md.
	Stateless bool
	// InputTimeoutSeconds (yaml input_timeout_seconds, 1..3600; 0 = unset,
	// the front's default of 300) is how long a client of the stateless
	// revision has to answer an input_required result: its requestState
	// expires, and a call parked on a classic server's request is answered
	// with an error. See docs/protocol.md.
	InputTimeoutSeconds int
	// AllowedHosts (yaml allowed_hosts) are Host header values, besides
	// the listener's own addresses, that every route accepts: the names a
	// reverse proxy or DNS forwards to the gateway. On a loopback listener
	// any other name is refused (DNS rebinding); on another listener the
	// list, once set, is enforced too. See docs/security.md.
	AllowedHosts []string
	// AllowedOrigins (yaml allowed_origins) are browser origins
	// (scheme://host[:port]) that may drive the gateway besides its own,
	// e.g. a web client served from another host. See docs/security.md.
	AllowedOrigins []string
	// MaxSessions (yaml max_sessions, 1..1000000) caps the live MCP
	// sessions (Streamable HTTP and SSE, all endpoints together); 0 = unset,
	// the front's default (5000). At the cap, a new session ends the least
	// recently used idle one, or is refused (503) if all are busy. See
	// docs/security.md#sessions.
	MaxSessions int
	// MaxSessionsPerIdentity (yaml max_sessions_per_identity, 1..1000000)
	// caps the live MCP sessions of one caller identity; 0 = unset, the
	// front's default (1000). At the cap, a new session of that identity
	// ends its least recently used idle one, or is refused (429).
	MaxSessionsPerIdentity int
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

// decodeSearch reads the search: mapping.
func (d *decoder) decodeSearch(n ast.Node, st *sections) Search {
	var s Search
	entries, _ := d.mapping(n, "search")
	for _, e := range entries {
		f := join("search", e.key)
		switch e.key {
		case "embeddings":
			s.Embeddings = d.decodeEmbeddings(e.value, f, e.pos, st)
		default:
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, searchFields))
			continue
		}
		st.pos[f] = e.pos
	}
	return s
}

// endpoint holds what embeddings and the llm classifier share: where to
// send requests, and which keys the file set (for "only used with" checks).
type endpoint struct {
	url, model, apiKeyEnv *string
	set                   map[string]bool // keys set to a non-null value
	bad                   map[string]bool // keys that failed to decode
}

// endpointField decodes one of the endpoint keys into e; it reports false when key
// is not one of them.
func (d *decoder) endpointField(e *endpoint, key string, n ast.Node, field string) bool {
	var ok, set bool
	switch key {
	case "url":
		*e.url, set, ok = d.str(n, field)
	case "model":
		*e.model, set, ok = d.str(n, field)
	case "api_key_env":
		*e.apiKeyEnv, set, ok = d.apiKeyEnv(n, field)
	default:
		return false
	}
	if !ok {
		e.bad[key] = true
	} else if set {
		e.set[key] = true
	}
	return true
}

// requireEndpoint reports url and model missing, and a url that is not http(s), at
// the section's key (or the url's).
func (d *decoder) requireEndpoint(e *endpoint, field string, sectionPos Pos, st *sections, urlHint string) {
	if !e.bad["url"] {
		switch {
		case strings.TrimSpace(*e.url) == "":
			d.errorf(sectionPos, join(field, "url"), "url is required: the http(s) URL of an OpenAI-compatible API, e.g. %s", urlHint)
		default:
			if msg := checkHTTPURL(*e.url); msg != "" {
				d.errorf(st.pos[join(field, "url")], join(field, "url"), "%s", msg)
			}
		}
	}
	if !e.bad["model"] && strings.TrimSpace(*e.model) == "" {
		d.errorf(sectionPos, join(field, "model"), "model is required: the model name the API expects")
	}
}

// decodeEmbeddings reads search.embeddings; null (or a value that is not a
// mapping, already reported) means no embeddings.
func (d *decoder) decodeEmbeddings(n ast.Node, field string, keyPos Pos, st *sections) *Embeddings {
	if r, ok := d.resolve(n, field); !ok || isNull(r) {
		return nil
	}
	entries, ok := d.mapping(n, field)
	if !ok && len(entries) == 0 {
		return nil
	}
	emb := &Embeddings{BatchSize: DefaultEmbeddingsBatchSize, TimeoutSeconds: DefaultEmbeddingsTimeoutSeconds}
	ep := &endpoint{url: &emb.URL, model: &emb.Model, apiKeyEnv: &emb.APIKeyEnv, set: map[string]bool{}, bad: map[string]bool{}}
	for _, e := range entries {
		f := join(field, e.key)
		st.pos[f] = e.pos
		if d.endpointField(ep, e.key, e.value, f) {
			continue
		}
		switch e.key {
		case "batch_size":
			d.boundedInt(e.value, f, 1, maxEmbeddingsBatchSize, &emb.BatchSize)
		case "timeout_seconds":
			d.boundedInt(e.value, f, 1, maxEmbeddingsTimeoutSeconds, &emb.TimeoutSeconds)
		default:
			delete(st.pos, f)
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, embeddingsFields))
		}
	}
	if ok {
		d.requireEndpoint(ep, field, keyPos, st, "https://api.openai.com/v1")
	}
	return emb
}

// decodeSkills reads the skills: mapping; the classifier starts from
// [DefaultClassifier] so a file without one gets the defaults too.
func (d *decoder) decodeSkills(n ast.Node, st *sections) Skills {
	s := Skills{Classifier: DefaultClassifier()}
	entries, _ := d.mapping(n, "skills")
	for _, e := range entries {
		f := join("skills", e.key)
		switch e.key {
		case "taxonomy":
			s.Taxonomy = d.decodeTaxonomy(e.value, f, st)
		case "classifier":
			s.Classifier = d.decodeClassifier(e.value, f, e.pos, st)
		default:
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, skillsFields))
			continue
		}
		st.pos[f] = e.pos
	}
	return s
}

// decodeTaxonomy reads skills.taxonomy, a list of skill definitions.
func (d *decoder) decodeTaxonomy(n ast.Node, field string, st *sections) []SkillDef {
	items, _ := d.sequence(n, field)
	if len(items) == 0 {
		return nil
	}
	out := make([]SkillDef, 0, len(items))
	first := map[string]int{}
	for i, item := range items {
		itf := fmt.Sprintf("%s[%d]", field, i)
		itemPos := mappingPos(item)
		st.pos[itf] = itemPos
		entries, ok := d.mapping(item, itf)
		var sk SkillDef
		found := map[string]bool{}
		for _, e := range entries {
			f := join(itf, e.key)
			st.pos[f] = e.pos
			var set, keyOK bool
			switch e.key {
			case "id":
				sk.ID, set, keyOK = d.str(e.value, f)
				if keyOK && set && !skillIDRE.MatchString(sk.ID) {
					d.errorf(posOf(e.value), f, "invalid skill id %s: use snake_case (lower-case letters, digits and _, starting with a letter), e.g. issue_tracking", strconv.Quote(sk.ID))
					set, keyOK = false, false
				}
				if keyOK && set {
					if j, dup := first[sk.ID]; dup {
						d.errorf(posOf(e.value), f, "duplicate skill id %q (first at %s[%d])", sk.ID, field, j)
					} else {
						first[sk.ID] = i
					}
				}
			case "name":
				sk.Name, set, keyOK = d.str(e.value, f)
			case "description":
				sk.Description, set, keyOK = d.str(e.value, f)
			case "examples":
				sk.Examples, keyOK = d.stringList(e.value, f, st)
				set = true
			case "keywords":
				sk.Keywords, keyOK = d.stringList(e.value, f, st)
				set = true
			default:
				delete(st.pos, f)
				d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, skillDefFields))
				continue
			}
			// A key that failed to decode is reported once, not also as missing.
			found[e.key] = set || !keyOK
		}
		if ok {
			for _, req := range []struct{ key, val string }{{"id", sk.ID}, {"name", sk.Name}, {"description", sk.Description}} {
				if !found[req.key] || (strings.TrimSpace(req.val) == "" && req.key != "id") {
					d.errorf(itemPos, join(itf, req.key), "%s is required: every skill needs an id, a name and a description", req.key)
				}
			}
		}
		out = append(out, sk)
	}
	return out
}

// mappingPos returns the position of a block mapping's first key: the
// mapping node itself sits at that key's colon, which reads oddly in a
// message about the whole item.
func mappingPos(n ast.Node) Pos {
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 && m.Values[0] != nil && m.Values[0].Key != nil {
		if p := posOf(m.Values[0].Key); p.Line > 0 {
			return p
		}
	}
	return posOf(n)
}

// stringList reads a list of non-empty strings; null is an empty list.
func (d *decoder) stringList(n ast.Node, field string, st *sections) ([]string, bool) {
	items, ok := d.sequence(n, field)
	if len(items) == 0 {
		return nil, ok
	}
	out := make([]string, 0, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		st.pos[f] = posOf(item)
		v, itemOK := d.listString(item, f)
		if !itemOK {
			ok = false
			continue
		}
		if strings.TrimSpace(v) == "" {
			d.errorf(posOf(item), f, "must not be blank")
			ok = false
			continue
		}
		out = append(out, v)
	}
	return out, ok
}

// decodeClassifier reads skills.classifier over [DefaultClassifier].
func (d *decoder) decodeClassifier(n ast.Node, field string, keyPos Pos, st *sections) Classifier {
	c := DefaultClassifier()
	entries, ok := d.mapping(n, field)
	ep := &endpoint{url: &c.URL, model: &c.Model, apiKeyEnv: &c.APIKeyEnv, set: map[string]bool{}, bad: map[string]bool{}}
	modeOK := true
	for _, e := range entries {
		f := join(field, e.key)
		st.pos[f] = e.pos
		if d.endpointField(ep, e.key, e.value, f) {
			continue
		}
		switch e.key {
		case "mode":
			v, set, keyOK := d.str(e.value, f)
			switch {
			case !keyOK:
				modeOK = false
			case !set:
			case v != ClassifierOffline && v != ClassifierLLM:
				d.errorf(posOf(e.value), f, "unknown mode %q: must be %q (the default) or %q", v, ClassifierOffline, ClassifierLLM)
				modeOK = false
			default:
				c.Mode = v
			}
		case "batch_size":
			d.boundedInt(e.value, f, 1, maxClassifierBatchSize, &c.BatchSize)
		case "concurrency":
			d.boundedInt(e.value, f, 1, maxClassifierConcurrency, &c.Concurrency)
		case "timeout_seconds":
			d.boundedInt(e.value, f, 1, maxClassifierTimeoutSeconds, &c.TimeoutSeconds)
		default:
			delete(st.pos, f)
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, classifierFields))
		}
	}
	if !ok || !modeOK {
		return c
	}
	if c.Mode == ClassifierLLM {
		d.requireEndpoint(ep, field, keyPos, st, "https://api.openai.com/v1")
		return c
	}
	for _, key := range []string{"url", "model", "api_key_env"} {
		if ep.set[key] {
			f := join(field, key)
			d.errorf(st.pos[f], f, "only used with mode: llm (the mode is %q)", c.Mode)
		}
	}
	return c
}

// decodeFront reads the front: mapping. tool_exposure is checked by
// validateFront, after the environment has had its say.
func (d *decoder) decodeFront(n ast.Node, st *sections) Front {
	var fr Front
	entries, _ := d.mapping(n, "front")
	for _, e := range entries {
		f := join("front", e.key)
		switch e.key {
		case "tool_exposure":
			v, _, ok := d.str(e.value, f)
			if !ok {
				st.bad[f] = true
			}
			fr.ToolExposure = v
		case "stateless":
			v, _, _ := d.boolean(e.value, f)
			fr.Stateless = v
		case "meta_tool_prefix":
			v, _, ok := d.str(e.value, f)
			if ok && v != "" && (!NameRE.MatchString(v) || strings.Contains(v, "__")) {
				d.errorf(e.pos, f, "%q is not a name: use lower-case letters, digits, - and _, without a separator (. or __)", v)
				continue
			}
			fr.MetaToolPrefix = v
		case "allowed_hosts":
			fr.AllowedHosts = d.hostList(e.value, f, st)
		case "allowed_origins":
			fr.AllowedOrigins = d.originList(e.value, f, st)
		case "max_sessions":
			d.boundedInt(e.value, f, 1, maxSessionsBound, &fr.MaxSessions)
		case "max_sessions_per_identity":
			d.boundedInt(e.value, f, 1, maxSessionsBound, &fr.MaxSessionsPerIdentity)
		case "input_timeout_seconds":
			d.boundedInt(e.value, f, 1, 3600, &fr.InputTimeoutSeconds)
		default:
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, frontFields))
			continue
		}
		st.pos[f] = e.pos
	}
	return fr
}

// hostList reads front.allowed_hosts: host names or IPs, a port is ignored.
func (d *decoder) hostList(n ast.Node, field string, st *sections) []string {
	hosts, _ := d.stringList(n, field, st)
	out := hosts[:0]
	for i, h := range hosts {
		if strings.Contains(h, "/") || strings.ContainsAny(h, " \t") {
			f := fmt.Sprintf("%s[%d]", field, i)
			d.errorf(st.pos[f], f, "%q is not a host name: want a name or IP such as gateway.example.com, without scheme or path", h)
			continue
		}
		out = append(out, h)
	}
	return out
}

// originList reads front.allowed_origins: scheme://host[:port] each.
func (d *decoder) originList(n ast.Node, field string, st *sections) []string {
	origins, _ := d.stringList(n, field, st)
	out := origins[:0]
	for i, o := range origins {
		if _, ok := httpguard.NormalizeOrigin(o); !ok {
			f := fmt.Sprintf("%s[%d]", field, i)
			d.errorf(st.pos[f], f, "%q is not an origin: want scheme://host[:port] such as https://app.example.com, without path", o)
			continue
		}
		out = append(out, o)
	}
	return out
}

// validateFront applies SWITCHBOARD_TOOL_EXPOSURE (env > file; empty =
// unset) and checks the value where it came from.
func validateFront(c *checker, cfg *Config, st *sections, getenv func(string) string) {
	at := place{field: "front.tool_exposure"}
	if v := getenv(EnvToolExposure); v != "" {
		cfg.Front.ToolExposure = v
		at = place{env: EnvToolExposure}
	} else if st.bad[at.field] {
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

// boundedInt decodes an integer from lo to hi into dst; null leaves dst (the
// default) alone.
func (d *decoder) boundedInt(n ast.Node, field string, lo, hi int, dst *int) bool {
	v, set, ok := d.integer(n, field)
	if !ok || !set {
		return ok
	}
	if msg := between(v, lo, hi); msg != "" {
		d.errorf(posOf(n), field, "%s", msg)
		return false
	}
	*dst = v
	return true
}

// apiKeyEnv decodes the name of the variable holding an API key. The value
// is never quoted in a message: the commonest mistake is pasting the key
// itself here.
func (d *decoder) apiKeyEnv(n ast.Node, field string) (string, bool, bool) {
	v, set, ok := d.str(n, field)
	if !ok || !set {
		return "", set, ok
	}
	var msg string
	switch {
	case v == "":
		msg = "must name an environment variable (remove the key for no API key)"
	case looksLikeKey(v):
		msg = "looks like an API key, not the name of a variable: put the key in an environment variable and name the variable here, e.g. api_key_env: OPENAI_API_KEY (the value is not shown)"
	case !envNameRE.MatchString(v):
		msg = badRefMsg
	}
	if msg != "" {
		d.errorf(posOf(n), field, "%s", msg)
		return "", false, false
	}
	return v, true, true
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
