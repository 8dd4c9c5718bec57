// Package skills sorts tools into a small taxonomy of skills ("issue
// tracking", "file system", ...) so that clients facing thousands of tools can
// browse and filter them by what they do. It holds the default taxonomy, an
// offline classifier that needs no network, an optional LLM classifier that
// falls back to the offline one, and a bounded queue of new-skill suggestions
// for tools that fit nothing.
package skills

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Skill is one category of the taxonomy. Its text (name, description,
// examples, keywords) is all the offline classifier knows about it, so a good
// description and realistic examples matter more than anything else.
type Skill struct {
	ID          string   `json:"id" yaml:"id"` // snake_case, e.g. "issue_tracking"
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Examples    []string `json:"examples"` // example tool names/descriptions
	Keywords    []string `json:"keywords,omitempty"`
}

//go:embed skills.json
var defaultJSON []byte

// Default is the taxonomy shipped with the binary, used unless the config
// replaces it. Each call returns a fresh copy the caller may modify.
func Default() []Skill {
	var skills []Skill
	if err := json.Unmarshal(defaultJSON, &skills); err != nil {
		panic(fmt.Sprintf("skills: embedded skills.json: %v", err)) // a build defect, caught by tests
	}
	return skills
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Validate reports every problem of a taxonomy at once, so an operator
// editing the config fixes them in one round: an empty taxonomy, ids that are
// missing, not snake_case or duplicated, and empty names or descriptions.
func Validate(skills []Skill) error {
	if len(skills) == 0 {
		return errors.New("skills: no skills defined")
	}
	var errs []error
	seen := map[string]int{}
	for i, s := range skills {
		where := fmt.Sprintf("skills[%d]", i)
		if s.ID != "" {
			where = fmt.Sprintf("skills[%d] (%s)", i, s.ID)
		}
		switch {
		case s.ID == "":
			errs = append(errs, fmt.Errorf("%s: id is empty", where))
		case !snakeCase.MatchString(s.ID):
			errs = append(errs, fmt.Errorf("%s: id %q is not snake_case (lower-case letters, digits and single underscores)", where, s.ID))
		}
		if j, dup := seen[s.ID]; dup && s.ID != "" {
			errs = append(errs, fmt.Errorf("%s: id %q already used by skills[%d]", where, s.ID, j))
		} else if s.ID != "" {
			seen[s.ID] = i
		}
		if strings.TrimSpace(s.Name) == "" {
			errs = append(errs, fmt.Errorf("%s: name is empty", where))
		}
		if strings.TrimSpace(s.Description) == "" {
			errs = append(errs, fmt.Errorf("%s: description is empty", where))
		}
	}
	return errors.Join(errs...)
}

// Tool is what a classifier sees of a tool: enough text to judge what it does,
// nothing of its schema's structure. Name may be the original or the
// namespaced name; Params are the input schema's property names (and, if the
// caller likes, their descriptions).
type Tool struct {
	Name, Description, Server string
	Params                    []string
}

// Assignment says how strongly a tool belongs to one skill.
type Assignment struct {
	SkillID    string  `json:"skill_id"`
	Confidence float64 `json:"confidence"`
}

// Classification is the verdict on one tool (seed 004, AG-US3): up to three
// skills, and a primary one only when the classifier is fairly sure. A tool
// without a primary skill stays searchable; it is just not filed anywhere.
type Classification struct {
	Skills     []Assignment `json:"skills"`                     // 1–3, by confidence desc (empty only when nothing fits at all)
	Primary    string       `json:"primary_skill_id,omitempty"` // Skills[0] when its confidence ≥ 0.5
	Classified bool         `json:"is_classified"`              // Primary != ""
	Method     string       `json:"method"`                     // "offline" | "llm" | "offline-fallback"
	Note       string       `json:"note,omitempty"`             // why a fallback happened (no secrets)
	// Pending says this is the offline classifier's provisional verdict,
	// given so the tool is searchable at once, while the LLM's is queued
	// (seed 001: tools are indexed first and classified asynchronously).
	Pending bool `json:"classification_pending,omitempty"`
	// Proposed is a new skill the LLM suggested for this tool, if any; see
	// SuggestFor.
	Proposed *ProposedSkill `json:"proposed_skill,omitempty"`
}

// ProposedSkill is a skill an LLM classifier thinks the taxonomy lacks.
type ProposedSkill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// The values of Classification.Method.
const (
	MethodOffline         = "offline"
	MethodLLM             = "llm"
	MethodOfflineFallback = "offline-fallback"
)

// PrimaryThreshold is the confidence a skill needs to become a tool's primary
// skill (AG-US3 AC3).
const PrimaryThreshold = 0.5

// finish sorts assignments, keeps at most three and sets Primary and
// Classified, so every classifier obeys the same contract.
func finish(c Classification) Classification {
	sortAssignments(c.Skills)
	if len(c.Skills) > maxSkills {
		c.Skills = c.Skills[:maxSkills]
	}
	if c.Skills == nil {
		c.Skills = []Assignment{}
	}
	c.Primary = ""
	if len(c.Skills) > 0 && c.Skills[0].Confidence >= PrimaryThreshold {
		c.Primary = c.Skills[0].SkillID
	}
	c.Classified = c.Primary != ""
	return c
}

const maxSkills = 3
