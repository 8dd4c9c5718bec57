package upstreamauth

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// MemoryStore is a [TokenStore] in memory, with the store's semantics
// (versions, leases, errors), for a gateway of one process that keeps no
// grant across restarts: the probe command, tests. It is safe for
// concurrent use.
type MemoryStore struct {
	mu   sync.Mutex
	rows map[[2]string]store.UpstreamToken
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{rows: map[[2]string]store.UpstreamToken{}}
}

// UpstreamToken implements [TokenStore].
func (m *MemoryStore) UpstreamToken(_ context.Context, server, subject string) (store.UpstreamToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.rows[[2]string{server, subject}]
	if !ok {
		return t, fmt.Errorf("reading the upstream token of %q: %w", server, store.ErrNotFound)
	}
	return t, nil
}

// PutUpstreamToken implements [TokenStore].
func (m *MemoryStore) PutUpstreamToken(_ context.Context, t store.UpstreamToken) (store.UpstreamToken, error) {
	if t.Server == "" || t.Sealed == "" {
		return t, fmt.Errorf("storing the upstream token of %q: %w", t.Server, store.ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{t.Server, t.Subject}
	t.Version = m.rows[key].Version + 1
	t.LeaseOwner, t.LeaseUntil = "", time.Time{}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = time.Now()
	}
	m.rows[key] = t
	return t, nil
}

// ReplaceUpstreamToken implements [TokenStore].
func (m *MemoryStore) ReplaceUpstreamToken(_ context.Context, t store.UpstreamToken) (store.UpstreamToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{t.Server, t.Subject}
	cur, ok := m.rows[key]
	switch {
	case !ok:
		return t, fmt.Errorf("replacing the upstream token of %q: %w", t.Server, store.ErrNotFound)
	case cur.Version != t.Version:
		return t, fmt.Errorf("replacing the upstream token of %q: version %d was replaced meanwhile: %w", t.Server, t.Version, store.ErrConflict)
	}
	t.Version++
	t.LeaseOwner, t.LeaseUntil = "", time.Time{}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = time.Now()
	}
	m.rows[key] = t
	return t, nil
}

// LeaseUpstreamToken implements [TokenStore].
func (m *MemoryStore) LeaseUpstreamToken(_ context.Context, server, subject string, version int64, holder string, now, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{server, subject}
	cur, ok := m.rows[key]
	if !ok || cur.Version != version {
		return false, nil
	}
	if cur.LeaseOwner != "" && cur.LeaseOwner != holder && now.Before(cur.LeaseUntil) {
		return false, nil
	}
	cur.LeaseOwner, cur.LeaseUntil = holder, until
	m.rows[key] = cur
	return true, nil
}

// ReleaseUpstreamToken implements [TokenStore].
func (m *MemoryStore) ReleaseUpstreamToken(_ context.Context, server, subject, holder string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]string{server, subject}
	if cur, ok := m.rows[key]; ok && cur.LeaseOwner == holder {
		cur.LeaseOwner, cur.LeaseUntil = "", time.Time{}
		m.rows[key] = cur
	}
	return nil
}

// UserUpstreamTokens implements [UserTokenStore].
func (m *MemoryStore) UserUpstreamTokens(_ context.Context, server, subject string) ([]store.UpstreamToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.UpstreamToken
	for k, t := range m.rows {
		if k[1] != "" && (server == "" || k[0] == server) && (subject == "" || k[1] == subject) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b store.UpstreamToken) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	return out, nil
}

// DeleteUpstreamToken implements [UserTokenStore].
func (m *MemoryStore) DeleteUpstreamToken(_ context.Context, server, subject string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, [2]string{server, subject})
	return nil
}
