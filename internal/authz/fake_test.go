package authz

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// fakeStore is an in-memory Store with the contract's semantics and
// injectable failures.
type fakeStore struct {
	mu     sync.Mutex
	grants map[string]Grant
	tokens map[string]Token
	// errList, errGet and errUse, when set, are returned by ListGrants,
	// GetToken and UseToken.
	errList, errGet, errUse error
}

func newFakeStore() *fakeStore {
	return &fakeStore{grants: map[string]Grant{}, tokens: map[string]Token{}}
}

func (s *fakeStore) ListGrants(context.Context) ([]Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errList != nil {
		return nil, s.errList
	}
	return slices.Collect(maps.Values(s.grants)), nil
}

func (s *fakeStore) PutGrant(_ context.Context, g Grant) (Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, old := range s.grants {
		if old.AgentID == g.AgentID && old.Workspace == g.Workspace && old.Server == g.Server && old.Tool == g.Tool {
			delete(s.grants, id)
			g.ID = old.ID
		}
	}
	s.grants[g.ID] = g
	return g, nil
}

func (s *fakeStore) DeleteGrant(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.grants[id]; !ok {
		return fmt.Errorf("grant %s: %w", id, ErrNotFound)
	}
	delete(s.grants, id)
	return nil
}

func (s *fakeStore) PutToken(_ context.Context, t Token) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[t.ID] = t
	return nil
}

func (s *fakeStore) GetToken(_ context.Context, id string) (Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errGet != nil {
		return Token{}, s.errGet
	}
	t, ok := s.tokens[id]
	if !ok {
		return Token{}, fmt.Errorf("token: %w", ErrNotFound)
	}
	return t, nil
}

func (s *fakeStore) UseToken(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errUse != nil {
		return s.errUse
	}
	t, ok := s.tokens[id]
	if !ok {
		return fmt.Errorf("token: %w", ErrNotFound)
	}
	if t.UsedAt != nil {
		return fmt.Errorf("token: %w", ErrTokenUsed)
	}
	t.UsedAt = &at
	s.tokens[id] = t
	return nil
}

func (s *fakeStore) RevokeToken(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok {
		return fmt.Errorf("token: %w", ErrNotFound)
	}
	t.Revoked = true
	s.tokens[id] = t
	return nil
}

func (s *fakeStore) token(id string) Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[id]
}

var errBroken = errors.New("database is on fire")
