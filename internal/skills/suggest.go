package skills

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Suggestion proposes a skill the taxonomy may be missing, for an operator to
// review (AG-US3 AC8). It names the tool that prompted it.
type Suggestion struct {
	ID           string    `json:"id"`
	Tool         string    `json:"tool"`
	Server       string    `json:"server"`
	ProposedName string    `json:"proposed_name"`
	Description  string    `json:"description"`
	Reason       string    `json:"reason"`
	CreatedAt    time.Time `json:"created_at"`
}

// DefaultMaxSuggestions bounds the queue when NewSuggestions is given 0.
const DefaultMaxSuggestions = 1000

// Suggestions is the review queue. It keeps at most one suggestion per tool
// (Server + Tool): reclassifying a tool, which happens on every reconnect,
// must not flood reviewers. It is bounded; when full, the oldest suggestion
// is dropped for the new one, because a queue of stale suggestions about
// tools seen long ago is worth less than one about the current catalog.
// Safe for concurrent use.
type Suggestions struct {
	mu    sync.Mutex
	limit int
	items []Suggestion // oldest first
}

// NewSuggestions returns an empty queue holding at most limit suggestions
// (DefaultMaxSuggestions when limit ≤ 0).
func NewSuggestions(limit int) *Suggestions {
	if limit <= 0 {
		limit = DefaultMaxSuggestions
	}
	return &Suggestions{limit: limit}
}

// Add queues sg and reports whether it did: false when a suggestion for the
// same Server and Tool is already queued. A full queue drops its oldest entry
// and still returns true. A zero CreatedAt is set to now and an empty ID is
// derived from the tool and the proposed name.
func (s *Suggestions) Add(sg Suggestion) bool {
	if sg.CreatedAt.IsZero() {
		sg.CreatedAt = time.Now().UTC()
	}
	if sg.ID == "" {
		sg.ID = suggestionID(sg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.items, func(x Suggestion) bool { return x.Server == sg.Server && x.Tool == sg.Tool }) {
		return false
	}
	if len(s.items) >= s.limit {
		s.items = slices.Delete(s.items, 0, len(s.items)-s.limit+1)
	}
	s.items = append(s.items, sg)
	return true
}

// Offer queues the suggestion SuggestFor derives from c, if any, and reports
// whether one was queued: the one call a caller needs after classifying.
func (s *Suggestions) Offer(t Tool, c Classification) bool {
	sg, ok := SuggestFor(t, c)
	return ok && s.Add(sg)
}

// List returns the queued suggestions, newest first.
func (s *Suggestions) List() []Suggestion {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.items)
	slices.Reverse(out)
	return out
}

// Len is the number of queued suggestions.
func (s *Suggestions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// Forget drops the suggestions of a removed tool: tool is compared with
// Suggestion.Tool, so pass the name used in Tool.Name when classifying
// (namespaced names are unique across servers).
func (s *Suggestions) Forget(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = slices.DeleteFunc(s.items, func(x Suggestion) bool { return x.Tool == tool })
}

// ForgetServer drops the suggestions of every tool of a removed server.
func (s *Suggestions) ForgetServer(server string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = slices.DeleteFunc(s.items, func(x Suggestion) bool { return x.Server == server })
}

// Delete removes one suggestion by ID (an operator accepted or rejected it)
// and reports whether it was queued.
func (s *Suggestions) Delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.items)
	s.items = slices.DeleteFunc(s.items, func(x Suggestion) bool { return x.ID == id })
	return len(s.items) != n
}

// SuggestFor builds the review suggestion for a tool the classifier could not
// file (no primary skill) or for which the LLM proposed a new skill; ok is
// false when neither holds. Without an LLM proposal, the proposed name is
// made of the tool's dominant words in snake_case, ready to become a skill id.
func SuggestFor(t Tool, c Classification) (Suggestion, bool) {
	if c.Primary != "" && c.Proposed == nil {
		return Suggestion{}, false
	}
	sg := Suggestion{
		Tool:      t.Name,
		Server:    t.Server,
		CreatedAt: time.Now().UTC(),
	}
	best := "no skill matched at all"
	if len(c.Skills) > 0 {
		best = fmt.Sprintf("best match %s at %.2f", c.Skills[0].SkillID, c.Skills[0].Confidence)
	}
	if c.Proposed != nil {
		sg.ProposedName = c.Proposed.Name
		sg.Description = c.Proposed.Description
		sg.Reason = "the LLM classifier proposed a new skill; " + best
	} else {
		sg.ProposedName = dominantWords(t)
		sg.Description = truncate(strings.TrimSpace(t.Description), 300)
		sg.Reason = fmt.Sprintf("no skill fits well: %s, below the %.1f needed for a primary skill", best, PrimaryThreshold)
	}
	if sg.ProposedName == "" {
		sg.ProposedName = "unnamed"
	}
	sg.ID = suggestionID(sg)
	return sg, true
}

// dominantWords names a would-be skill after the tool: up to three words of
// its name, else the most frequent words of its description.
func dominantWords(t Tool) string {
	var words []string
	seen := map[string]bool{}
	take := func(toks []token) {
		for _, tk := range toks {
			if len(words) == 3 {
				return
			}
			if !seen[tk.stem] && !weakStems[tk.stem] {
				seen[tk.stem] = true
				words = append(words, tk.word)
			}
		}
	}
	take(tokenize(t.Name))
	if len(words) == 0 {
		toks := tokenize(t.Description)
		count := map[string]int{}
		for _, tk := range toks {
			count[tk.stem]++
		}
		slices.SortStableFunc(toks, func(a, b token) int { return count[b.stem] - count[a.stem] })
		take(toks)
	}
	return strings.Join(words, "_")
}

func suggestionID(sg Suggestion) string {
	h := sha256.Sum256([]byte(sg.Server + "\x00" + sg.Tool + "\x00" + sg.ProposedName))
	return hex.EncodeToString(h[:8])
}
