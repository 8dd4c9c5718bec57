// Package toolsearch keeps the search index and the skill classification
// in step with the catalog, and serves search to the REST API and to the
// MCP front's search meta-tool.
package toolsearch

import (
	"context"
	"fmt"
	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/servers"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/front"
	"github.com/switchboard-mcp/switchboard/internal/search"
	"github.com/switchboard-mcp/switchboard/internal/skills"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// Servers is what the index needs of the server registry.
type Servers interface {
	Lookup(name string) (servers.Info, bool)
	Resolve(idOrName string) (servers.Info, bool)
}

// noServers is the registry of a service built without one: it knows no
// server, so tools are indexed without descriptions or ids.
type noServers struct{}

func (noServers) Lookup(string) (servers.Info, bool)  { return servers.Info{}, false }
func (noServers) Resolve(string) (servers.Info, bool) { return servers.Info{}, false }

// Options are the service's collaborators. Every field is optional.
type Options struct {
	Logger *slog.Logger
	// Search and Skills are the config's sections.
	Search config.Search
	Skills config.Skills
	// Guard builds the HTTP clients of the embeddings service and the LLM
	// classifier, and refuses their URLs if its policy denies them.
	Guard  *netguard.Guard
	Getenv func(string) string
	// Servers names the registered servers (descriptions, ids).
	Servers Servers
	// Status is a server's state for the tool views; "" when unknown.
	Status func(server string) string
	// Visible reports whether an identity may call a tool (search filter).
	Visible func(authz.Identity, catalog.Tool) bool
}

// Service keeps the search index and the skill classification in step
// with the catalog. The catalog's subscribers must be quick, so a worker
// (Run) does the work: it diffs the latest snapshot against the last one it
// indexed, server by server, classifies the tools whose definitions changed
// and replaces that server's documents in the index.
type Service struct {
	o       Options
	cat     *catalog.Catalog
	logger  *slog.Logger
	index   *search.Index
	offline *skills.Offline
	llm     *skills.LLM // nil: offline classification only
	sugg    *skills.Suggestions
	skills  []skills.Skill

	mu      sync.RWMutex
	classes map[string]toolClass // by namespaced tool name
	indexed atomic.Uint64        // catalog version last indexed

	latest *catalog.Snapshot // guarded by mu
	wake   chan struct{}
}

// toolClass is a tool's classification and the definition it was made for.
type toolClass struct {
	hash string
	c    skills.Classification
}

// New builds the index and the classifiers from the config. It follows
// the catalog once Run runs.
func New(cat *catalog.Catalog, opts *Options) (*Service, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Guard == nil {
		g, err := netguard.New(netguard.Policy{}, nil)
		if err != nil {
			return nil, err
		}
		o.Guard = g
	}
	if o.Status == nil {
		o.Status = func(string) string { return "" }
	}
	if o.Visible == nil {
		o.Visible = func(authz.Identity, catalog.Tool) bool { return true }
	}
	if o.Servers == nil {
		o.Servers = noServers{}
	}
	d := &Service{o: o, cat: cat, logger: o.Logger, classes: map[string]toolClass{}, sugg: skills.NewSuggestions(0),
		wake: make(chan struct{}, 1)}
	d.skills = skills.Default()
	if len(o.Skills.Taxonomy) > 0 {
		d.skills = make([]skills.Skill, len(o.Skills.Taxonomy))
		for i, s := range o.Skills.Taxonomy {
			d.skills[i] = skills.Skill{ID: s.ID, Name: s.Name, Description: s.Description, Examples: s.Examples, Keywords: s.Keywords}
		}
		if err := skills.Validate(d.skills); err != nil {
			return nil, fmt.Errorf("skills.taxonomy: %w", err)
		}
	}
	d.offline = skills.NewOffline(d.skills)
	sopts := &search.Options{Logger: o.Logger}
	if e := o.Search.Embeddings; e != nil {
		if err := o.Guard.CheckConfigured("search.embeddings.url", e.URL); err != nil {
			return nil, err
		}
		emb, err := search.NewOpenAIEmbedder(search.EmbeddingsConfig{URL: e.URL, Model: e.Model, APIKey: e.APIKey(o.Getenv),
			BatchSize: e.BatchSize, Timeout: time.Duration(e.TimeoutSeconds) * time.Second, HTTPClient: o.Guard.Client(0)})
		if err != nil {
			return nil, fmt.Errorf("search.embeddings: %w", err)
		}
		sopts.Embedder = emb
	}
	if c := o.Skills.Classifier; c.Mode == "llm" {
		if err := o.Guard.CheckConfigured("skills.classifier.url", c.URL); err != nil {
			return nil, err
		}
		llm, err := skills.NewLLM(skills.LLMConfig{URL: c.URL, Model: c.Model, APIKey: c.APIKey(o.Getenv), BatchSize: c.BatchSize,
			Concurrency: c.Concurrency, Timeout: time.Duration(c.TimeoutSeconds) * time.Second, HTTPClient: o.Guard.Client(0)},
			d.offline, o.Logger)
		if err != nil {
			return nil, fmt.Errorf("skills.classifier: %w", err)
		}
		d.llm = llm
	}
	d.index = search.NewIndex(sopts)
	d.latest = cat.Snapshot()
	d.wake <- struct{}{}
	return d, nil
}

// Close stops the index (and its embedding worker, if any) when Run never
// ran or has not returned. Idempotent.
func (d *Service) Close() {
	d.index.Close()
	d.indexed.Store(^uint64(0)) // release waiters
}

// Run follows the catalog until ctx is done, then stops the index.
func (d *Service) Run(ctx context.Context) error {
	unsub := d.cat.Subscribe(func(_, next *catalog.Snapshot) {
		d.mu.Lock()
		d.latest = next
		d.mu.Unlock()
		select {
		case d.wake <- struct{}{}:
		default:
		}
	})
	// What changed between New and the subscription.
	d.mu.Lock()
	d.latest = d.cat.Snapshot()
	d.mu.Unlock()
	defer func() {
		unsub()
		d.index.Close()
		d.indexed.Store(^uint64(0)) // release waiters
	}()
	var last *catalog.Snapshot
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		}
		d.mu.RLock()
		next := d.latest
		d.mu.RUnlock()
		d.apply(ctx, last, next)
		last = next
		d.indexed.Store(next.Version())
	}
}

// apply brings the index from snapshot prev (nil: empty) to next.
func (d *Service) apply(ctx context.Context, prev, next *catalog.Snapshot) {
	servers := map[string]bool{}
	for _, s := range next.Servers() {
		servers[s] = true
	}
	if prev != nil {
		for _, s := range prev.Servers() {
			if !servers[s] {
				d.index.ReplaceServer(s, nil)
				d.forgetServer(s, prev.ServerTools(s))
			}
		}
	}
	for s := range servers {
		tools := next.ServerTools(s)
		if prev != nil && sameTools(prev.ServerTools(s), tools) {
			continue
		}
		d.indexServer(ctx, s, tools)
	}
}

func sameTools(a, b []catalog.Tool) bool {
	return slices.EqualFunc(a, b, func(x, y catalog.Tool) bool { return x.Name == y.Name && x.Hash == y.Hash })
}

func (d *Service) forgetServer(server string, tools []catalog.Tool) {
	d.mu.Lock()
	for _, t := range tools {
		delete(d.classes, t.Name)
	}
	d.mu.Unlock()
	d.sugg.ForgetServer(server)
}

// indexServer classifies the server's new or changed tools and replaces
// its documents. Offline classification looks at the whole server (a tool's
// siblings say what it is about), so without an LLM every tool of a changed
// server is classified again: it is cheap, and a new sibling may change a
// terse tool's skill.
func (d *Service) indexServer(ctx context.Context, server string, tools []catalog.Tool) {
	var fresh []catalog.Tool
	d.mu.RLock()
	for _, t := range tools {
		if tc, ok := d.classes[t.Name]; !ok || tc.hash != t.Hash {
			fresh = append(fresh, t)
		}
	}
	d.mu.RUnlock()
	if d.llm == nil && len(fresh) > 0 {
		fresh = tools
	}
	desc := d.serverDescription(server)
	texts := make([]skills.Tool, len(fresh))
	for i, t := range fresh {
		texts[i] = skillText(t)
	}
	var classes []skills.Classification
	if d.llm != nil && len(fresh) > 0 {
		// The LLM may take a minute for a large server: index the tools at
		// once with the offline verdict, marked pending, then replace it.
		classes = d.offline.ClassifyServer(texts)
		for i := range classes {
			classes[i].Pending = true
		}
		d.store(server, desc, tools, fresh, classes, nil)
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		classes = d.llm.ClassifyBatch(ctx, texts)
		cancel()
	} else {
		classes = d.offline.ClassifyServer(texts)
	}
	d.store(server, desc, tools, fresh, classes, texts)
	if len(fresh) > 0 {
		d.logger.Debug("indexed", "server", server, "tools", len(tools), "classified", len(fresh))
	}
}

// store records the classifications of fresh and replaces the server's
// documents; texts, when given, feed the suggestion queue (a pending
// verdict does not: the final one decides).
func (d *Service) store(server, desc string, tools, fresh []catalog.Tool, classes []skills.Classification, texts []skills.Tool) {
	d.mu.Lock()
	for i, t := range fresh {
		d.classes[t.Name] = toolClass{hash: t.Hash, c: classes[i]}
		if texts == nil {
			continue
		}
		if sg, ok := skills.SuggestFor(texts[i], classes[i]); ok {
			d.sugg.Add(sg)
		}
	}
	docs := make([]search.Doc, 0, len(tools))
	for _, t := range tools {
		docs = append(docs, search.DocFromTool(t.Name, server, desc, t.Def, skillIDs(d.classes[t.Name].c)))
	}
	d.mu.Unlock()
	d.index.ReplaceServer(server, docs)
}

func skillText(t catalog.Tool) skills.Tool {
	st := skills.Tool{Name: t.OriginalName, Server: t.Server}
	if t.Def != nil {
		st.Description = t.Def.Description
		if m, ok := t.Def.InputSchema.(map[string]any); ok {
			if props, ok := m["properties"].(map[string]any); ok {
				for name := range props {
					st.Params = append(st.Params, name)
				}
				slices.Sort(st.Params)
			}
		}
	}
	return st
}

func skillIDs(c skills.Classification) []string {
	out := make([]string, len(c.Skills))
	for i, s := range c.Skills {
		out[i] = s.SkillID
	}
	return out
}

func (d *Service) serverDescription(server string) string {
	if info, ok := d.o.Servers.Lookup(server); ok {
		return info.Description
	}
	return ""
}

// waitIndexed waits, briefly, until the index reflects catalog version v,
// so a search right after a discovery sees its tools.
func (d *Service) waitIndexed(v uint64, max time.Duration) {
	deadline := time.Now().Add(max)
	for d.indexed.Load() < v && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// allow is the index filter for id: tools available now that id may call.
func (d *Service) allow(id authz.Identity, snap *catalog.Snapshot) func(string) bool {
	return func(name string) bool {
		t, ok := snap.Tool(name)
		return ok && t.Available && d.o.Visible(id, t)
	}
}

// run a query for id.
func (d *Service) query(ctx context.Context, id authz.Identity, text string, servers, skillFilter []string, limit int) (search.Result, *catalog.Snapshot) {
	snap := d.cat.Snapshot()
	d.waitIndexed(snap.Version(), 200*time.Millisecond)
	res := d.index.Search(ctx, search.Query{Text: text, Servers: servers, Skills: skillFilter, Limit: limit, Allow: d.allow(id, snap)})
	return res, snap
}

// SearchTools serves the front's search_tools meta-tool.
func (d *Service) SearchTools(ctx context.Context, id authz.Identity, q string, servers []string, limit int) ([]front.SearchHit, error) {
	res, snap := d.query(ctx, id, q, d.serverNames(servers), nil, limit)
	out := make([]front.SearchHit, 0, len(res.Hits))
	for _, h := range res.Hits {
		if t, ok := snap.Tool(h.Name); ok {
			out = append(out, front.SearchHit{Tool: t, Score: h.Score})
		}
	}
	return out, nil
}

// serverNames maps server ids or names to names (unknown ones pass through,
// and match nothing).
func (d *Service) serverNames(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if info, ok := d.o.Servers.Resolve(s); ok {
			s = info.Name
		}
		out = append(out, s)
	}
	return out
}

// Search serves POST /api/v1/search (AG-US2).
func (d *Service) Search(ctx context.Context, id authz.Identity, req api.SearchRequest) (api.SearchResponse, error) {
	start := time.Now()
	resp := api.SearchResponse{Query: req.Query, Tools: []api.SearchTool{}}
	if req.IncludeExternal != nil && !*req.IncludeExternal {
		// Every tool is an upstream's: the gateway has none of its own to search.
		resp.Metadata.Ranking = "lexical"
		return resp, nil
	}
	res, snap := d.query(ctx, id, req.Query, d.serverNames(req.ServerFilter), req.SkillFilter, req.Limit)
	for i, h := range res.Hits {
		t, ok := snap.Tool(h.Name)
		if !ok {
			continue
		}
		resp.Tools = append(resp.Tools, d.toolView(fmt.Sprint(i+1), t, h.Score))
	}
	resp.Metadata = api.SearchMetadata{ServersSearched: res.Servers, TotalToolsSearched: res.Searched, Ranking: res.Mode,
		Degraded: res.Degraded, TookMS: float64(time.Since(start).Microseconds()) / 1e3}
	return resp, nil
}

func (d *Service) toolView(rank string, t catalog.Tool, score float64) api.SearchTool {
	d.mu.RLock()
	c := d.classes[t.Name].c
	d.mu.RUnlock()
	v := api.SearchTool{ID: rank, Name: t.Name, OriginalName: t.OriginalName, Score: score,
		SourceServer: api.SourceServer{Name: t.Server}, SkillIDs: skillIDs(c), Skills: slices.Clone(c.Skills), PrimarySkillID: c.Primary, IsClassified: c.Classified,
		ClassificationPending: c.Pending}
	if t.Def != nil {
		v.Description, v.InputSchema = t.Def.Description, t.Def.InputSchema
	}
	if info, ok := d.o.Servers.Lookup(t.Server); ok {
		v.SourceServer.ID = info.ID
	}
	if v.SourceServer.Status = d.o.Status(t.Server); v.SourceServer.Status == "" {
		v.SourceServer.Status = string(upstream.StateDisconnected)
	}
	return v
}

// ToolSkills serves the skill fields of the API's tool records. Like a
// search, it waits briefly for the worker to index the current catalog, so
// a listing right after a discovery shows the new tools' skills.
func (d *Service) ToolSkills(_ context.Context, names []string) map[string]skills.Classification {
	d.waitIndexed(d.cat.Snapshot().Version(), 200*time.Millisecond)
	out := make(map[string]skills.Classification, len(names))
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, n := range names {
		if tc, ok := d.classes[n]; ok {
			c := tc.c
			c.Skills = slices.Clone(c.Skills)
			out[n] = c
		}
	}
	return out
}

// Skills serves GET /api/v1/skills.
func (d *Service) Skills(context.Context) ([]api.SkillView, error) {
	counts := map[string]int{}
	d.mu.RLock()
	for _, tc := range d.classes {
		for _, s := range tc.c.Skills {
			counts[s.SkillID]++
		}
	}
	d.mu.RUnlock()
	embedded := map[string]int{}
	for _, sv := range d.index.SkillVectors() {
		embedded[sv.Skill] = sv.Tools
	}
	out := make([]api.SkillView, len(d.skills))
	for i, s := range d.skills {
		out[i] = api.SkillView{ID: s.ID, Name: s.Name, Description: s.Description, Examples: s.Examples, ToolCount: counts[s.ID],
			EmbeddedTools: embedded[s.ID]}
	}
	return out, nil
}

// SkillTools serves GET /api/v1/skills/{id}/tools: the tools id may call
// in that skill, most confident first.
func (d *Service) SkillTools(_ context.Context, id authz.Identity, skillID string, limit int) ([]api.SearchTool, error) {
	if !slices.ContainsFunc(d.skills, func(s skills.Skill) bool { return s.ID == skillID }) {
		return nil, fmt.Errorf("unknown skill %q: %w", skillID, store.ErrNotFound)
	}
	snap := d.cat.Snapshot()
	allow := d.allow(id, snap)
	type scored struct {
		t    catalog.Tool
		conf float64
	}
	var found []scored
	d.mu.RLock()
	for name, tc := range d.classes {
		for _, s := range tc.c.Skills {
			if s.SkillID == skillID {
				if t, ok := snap.Tool(name); ok && allow(name) {
					found = append(found, scored{t, s.Confidence})
				}
				break
			}
		}
	}
	d.mu.RUnlock()
	slices.SortFunc(found, func(x, y scored) int {
		if x.conf != y.conf {
			if x.conf > y.conf {
				return -1
			}
			return 1
		}
		return strings.Compare(x.t.Name, y.t.Name)
	})
	if limit <= 0 || limit > len(found) {
		limit = len(found)
	}
	out := make([]api.SearchTool, 0, limit)
	for i, f := range found[:limit] {
		out = append(out, d.toolView(fmt.Sprint(i+1), f.t, f.conf))
	}
	return out, nil
}

// Suggestions serves GET /api/v1/skills/suggestions.
func (d *Service) Suggestions(context.Context) ([]skills.Suggestion, error) {
	return d.sugg.List(), nil
}
