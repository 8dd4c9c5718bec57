package authz

import (
	"slices"
	"sync"
	"time"
)

// policyResult is the outcome of layers 1–4, the part of a decision that
// depends only on the identity, the tool and the policy revision.
type policyResult struct {
	allow  bool
	rule   string
	reason string
}

// cacheKey is comparable without building a string, so a cache hit costs
// no allocation. The identity's slices enter only through a hash; the entry
// keeps copies and a hit compares them, so a collision costs a recomputation,
// never a wrong decision.
type cacheKey struct {
	id, agent, workspace string
	admin, policy        bool
	lists                uint64
	server, tool, name   string
	action               string
}

type cacheEntry struct {
	res                policyResult
	rev                uint64
	expires            time.Time
	roles, allow, deny []string
}

// decisionCache is a bounded map of policy results. It evicts an arbitrary
// entry (Go's randomized map order) when full, preferring stale ones: with a
// TTL of minutes and a revision check, recency tracking would cost a write
// lock on every hit for little gain.
type decisionCache struct {
	mu  sync.RWMutex
	max int
	m   map[cacheKey]cacheEntry
}

func newDecisionCache(max int) *decisionCache {
	return &decisionCache{max: max, m: make(map[cacheKey]cacheEntry)}
}

func makeKey(id Identity, server, tool, name, action string) cacheKey {
	return cacheKey{
		id: id.ID, agent: id.AgentID, workspace: id.Workspace, admin: id.Admin, policy: id.WorkspacePolicy,
		lists:  hashLists(id.Roles, id.AllowServers, id.DenyServers),
		server: server, tool: tool, name: name, action: action,
	}
}

// hashLists is FNV-1a over the three lists with distinct separators.
func hashLists(lists ...[]string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i, l := range lists {
		for _, s := range l {
			for j := 0; j < len(s); j++ {
				h = (h ^ uint64(s[j])) * prime
			}
			h = (h ^ 0xff) * prime
		}
		h = (h ^ uint64(0xf0+i)) * prime
	}
	return h
}

func (c *decisionCache) get(k cacheKey, id Identity, rev uint64, now time.Time) (policyResult, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || e.rev != rev || !now.Before(e.expires) ||
		!slices.Equal(e.roles, id.Roles) || !slices.Equal(e.allow, id.AllowServers) || !slices.Equal(e.deny, id.DenyServers) {
		return policyResult{}, false
	}
	return e.res, true
}

func (c *decisionCache) put(k cacheKey, id Identity, res policyResult, rev uint64, expires time.Time, now time.Time) {
	e := cacheEntry{
		res: res, rev: rev, expires: expires,
		roles: slices.Clone(id.Roles), allow: slices.Clone(id.AllowServers), deny: slices.Clone(id.DenyServers),
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		c.evictLocked(rev, now)
	}
	c.m[k] = e
}

// evictLocked drops stale entries among a few it looks at, or else the first.
func (c *decisionCache) evictLocked(rev uint64, now time.Time) {
	const look = 8
	var first cacheKey
	n, dropped := 0, false
	for k, e := range c.m {
		if n == 0 {
			first = k
		}
		if e.rev != rev || !now.Before(e.expires) {
			delete(c.m, k)
			dropped = true
		}
		if n++; n == look {
			break
		}
	}
	if !dropped {
		delete(c.m, first)
	}
}

func (c *decisionCache) clear() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}

func (c *decisionCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
