package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/demo"
)

// scenarioTools10k is the large-catalog scenario of issue 18: many stdio
// upstreams behind one gateway (20 × 500 = 10,000 tools by default), the
// gateway's resident memory over repeated tools/list, and the time of one
// full listing against the same number of tools from one upstream directly.
const scenarioTools10k = "tools10k"

// stableAfter is the number of tools/list after which the gateway's memory
// is taken as the base that later listings must not grow (issue 18: stable
// over 100 lists means the figure after 100 is within 10 % of the one after
// 20).
const stableAfter = 20

// catalogTimeout bounds how long the gateway may take to connect all its
// upstreams and gather their tools.
const catalogTimeout = 2 * time.Minute

// rssPoint is the gateway's resident memory after a number of tools/list.
type rssPoint struct {
	AfterLists int   `json:"after_lists"` // 0 = right after start, catalog complete
	Bytes      int64 `json:"bytes"`
}

// tools10kResult is what the tools10k scenario measured.
type tools10kResult struct {
	Upstreams        int `json:"upstreams"`
	ToolsPerUpstream int `json:"tools_per_upstream"`
	// Tools and Pages are one full listing through the gateway's /mcp;
	// DirectTools and DirectPages the same of the one direct upstream.
	Tools       int `json:"tools"`
	Pages       int `json:"pages"`
	DirectTools int `json:"direct_tools"`
	DirectPages int `json:"direct_pages"`
	// Gateway and Direct are the times of one full listing (all pages),
	// over every round.
	Gateway latency `json:"gateway"`
	Direct  latency `json:"direct"`
	// RSS is the gateway's resident memory (VmRSS) after start, after 20
	// listings and after the last one, of the round with the highest peak
	// (Round); RoundsRSS has every round's when there were several. Empty
	// where it cannot be read (not Linux, or the gateway in-process).
	RSS       []rssPoint   `json:"rss"`
	Round     int          `json:"round,omitempty"`
	RoundsRSS [][]rssPoint `json:"rounds_rss,omitempty"`
	// StartSeconds is how long the gateway took from its launch until
	// every upstream was connected with its tools (the reported round).
	StartSeconds float64 `json:"start_s"`
}

// stability returns the two RSS figures issue 18's "stable" compares: after
// stableAfter listings and after the last one; ok is false unless there
// were more listings than stableAfter.
func (t *tools10kResult) stability() (early, late rssPoint, ok bool) {
	i := slices.IndexFunc(t.RSS, func(p rssPoint) bool { return p.AfterLists == stableAfter })
	if i < 0 || len(t.RSS) == 0 || t.RSS[len(t.RSS)-1].AfterLists <= stableAfter || t.RSS[i].Bytes <= 0 {
		return rssPoint{}, rssPoint{}, false
	}
	return t.RSS[i], t.RSS[len(t.RSS)-1], true
}

// peak is the highest RSS figure.
func peakRSS(ps []rssPoint) int64 {
	var m int64
	for _, p := range ps {
		m = max(m, p.Bytes)
	}
	return m
}

// tools10kAcc gathers the scenario's rounds.
type tools10kAcc struct {
	res     tools10kResult // figures of the first round, RSS of the worst
	gw, dir []time.Duration
	rounds  [][]rssPoint
}

// tools10kServers is the gateway config of n stdio demo servers "t01".. of
// perServer tools each.
func tools10kServers(bin string, n, perServer int) string {
	var b strings.Builder
	b.WriteString("servers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  t%02d:\n    transport: stdio\n    command: %s\n    args: [demo-server, --extra-tools, %q]\n    auto_start: true\n",
			i+1, yamlString(bin), strconv.Itoa(perServer-demo.BuiltinTools))
	}
	return b.String()
}

// tools10k runs one round of the scenario: the direct listing first, then
// the gateway with its memory.
func (b *bencher) tools10k(ctx context.Context) error {
	p := b.o.params
	total := p.Tools10kUpstreams * p.Tools10kTools
	acc := b.t10k
	if acc == nil {
		acc = &tools10kAcc{res: tools10kResult{Upstreams: p.Tools10kUpstreams, ToolsPerUpstream: p.Tools10kTools}}
		b.t10k = acc
	}

	// One upstream with every tool, listed directly by the same client.
	up, endpoint, err := b.startDemo(ctx, b.name("demo-10k"), total-demo.BuiltinTools)
	if err != nil {
		return err
	}
	b.logger.Info("measuring tools/list", "scenario", scenarioTools10k+"/direct", "tools", total, "lists", p.Tools10kDirect)
	dir, err := listTimes(ctx, endpoint, total, p.Tools10kDirect, nil)
	b.ps.stop(up)
	if err != nil {
		return fmt.Errorf("%s direct: %w", scenarioTools10k, err)
	}
	acc.dir = append(acc.dir, dir.samples...)
	acc.res.DirectTools, acc.res.DirectPages = dir.tools, dir.pages

	b.logger.Info("starting gateway", "scenario", scenarioTools10k, "upstreams", p.Tools10kUpstreams, "tools", total)
	launched := time.Now()
	gw, err := b.gws.start(ctx, b.name("gateway-10k"), tools10kServers(b.bin, p.Tools10kUpstreams, p.Tools10kTools))
	if err != nil {
		return err
	}
	defer gw.stop()
	if err := waitCatalog(ctx, gw.base, p.Tools10kUpstreams, total); err != nil {
		return fmt.Errorf("%s: %w", scenarioTools10k, err)
	}
	startSecs := time.Since(launched).Seconds()
	var rss []rssPoint
	mark := func(lists int) {
		if gw.pid == 0 {
			return // in-process: the harness's memory is not the gateway's
		}
		if n, ok := processRSS(gw.pid); ok {
			rss = append(rss, rssPoint{AfterLists: lists, Bytes: n})
		}
	}
	mark(0)
	b.logger.Info("measuring tools/list", "scenario", scenarioTools10k, "tools", total, "lists", p.Tools10kLists)
	got, err := listTimes(ctx, gw.endpoint, total, p.Tools10kLists, func(done int) {
		if done == stableAfter || done == p.Tools10kLists {
			mark(done)
		}
	})
	if err != nil {
		return fmt.Errorf("%s: %w", scenarioTools10k, err)
	}
	acc.gw = append(acc.gw, got.samples...)
	acc.res.Tools, acc.res.Pages = got.tools, got.pages
	acc.rounds = append(acc.rounds, rss)
	if len(acc.rounds) == 1 || peakRSS(rss) > peakRSS(acc.res.RSS) {
		acc.res.RSS, acc.res.Round, acc.res.StartSeconds = rss, b.round, startSecs
	}
	return nil
}

// collectTools10k turns the rounds into the report's figures.
func (a *tools10kAcc) collect() *tools10kResult {
	r := a.res
	r.Gateway, r.Direct = summarize(a.gw), summarize(a.dir)
	if len(a.rounds) > 1 {
		r.RoundsRSS = a.rounds
	} else {
		r.Round = 0
	}
	if r.RSS == nil {
		r.RSS = []rssPoint{}
	}
	return &r
}

// listRun is a series of full tools/list on one session.
type listRun struct {
	tools, pages int
	samples      []time.Duration
}

// listTimes connects to endpoint, checks one full listing has want tools,
// then times n more; after each timed one it calls after (if not nil) with
// how many listings were made in all, the check included.
func listTimes(ctx context.Context, endpoint string, want, n int, after func(done int)) (listRun, error) {
	c, err := connect(ctx, endpoint, 1)
	if err != nil {
		return listRun{}, err
	}
	defer c.close()
	var r listRun
	if r.tools, r.pages, err = c.listPages(ctx); err != nil {
		return r, err
	}
	if r.tools != want {
		return r, fmt.Errorf("listed %d tools, want %d", r.tools, want)
	}
	done := 1
	if after != nil {
		after(done)
	}
	for range n - 1 {
		start := time.Now()
		tools, _, err := c.listPages(ctx)
		d := time.Since(start)
		if err != nil {
			return r, err
		}
		if tools != want {
			return r, fmt.Errorf("listed %d tools, want %d", tools, want)
		}
		r.samples = append(r.samples, d)
		done++
		if after != nil {
			after(done)
		}
	}
	return r, nil
}

// apiServer is the part of GET /api/v1/aggregator/servers the harness reads.
type apiServer struct {
	Name      string `json:"name"`
	Status    string `json:"status"`
	ToolCount int    `json:"tool_count"`
	Error     string `json:"error_message"`
}

// waitCatalog polls the gateway's server list until n servers are
// connected with tools tools between them (local mode: loopback needs no
// credentials).
func waitCatalog(ctx context.Context, base string, n, tools int) error {
	ctx, cancel := context.WithTimeout(ctx, catalogTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		servers, err := listServers(ctx, base)
		if err != nil {
			last = err.Error()
		} else {
			connected, count := 0, 0
			for _, s := range servers {
				if s.Status == "CONNECTED" {
					connected++
				}
				count += s.ToolCount
			}
			if connected == n && count == tools {
				return nil
			}
			last = fmt.Sprintf("%d of %d servers connected, %d of %d tools", connected, n, count, tools)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the gateway's catalog: %w (%s)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func listServers(ctx context.Context, base string) ([]apiServer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/aggregator/servers", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/aggregator/servers: %s", resp.Status)
	}
	var body struct {
		Servers []apiServer `json:"servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET /api/v1/aggregator/servers: %w", err)
	}
	return body.Servers, nil
}
