package skills

import (
	"cmp"
	"context"
	"math"
	"slices"
)

// Offline is the default classifier: it needs no network and no model, only
// the taxonomy's text. It is safe for concurrent use and cheap enough to run
// on every tool of every upstream at discovery time.
//
// # Scoring
//
// Both sides are tokenized the same way (see tokenize). Each skill term t gets
// an association a_k(t): 1.0 when it is in the skill's id, name or keywords,
// 0.8 in its examples, 0.6 in its description. Each term also gets a
// specificity idf(t) = ln(1+N/df)/ln(1+N) over the N skills (1 for a term of a
// single skill, ≈0.2 for a term of all of them).
//
// Each tool term gets a weight w(t), the largest of: 1.5 in the tool name
// (the name is the author's own summary), 0.8 in the server name, 0.35 as a
// parameter name, 0.5·√min(tf,4) in the description. Weak words (read,
// search, send, request, ...) are scaled by 0.3. A name made only of stop
// words ("add") keeps them, since it has nothing else.
//
// The evidence for skill k is e_k = Σ_t w(t)·idf(t)·a_k(t).
//
// # Calibration
//
// Evidence is turned into confidence with a softmax-like share that includes
// a "none of these" competitor of strength z:
//
//	conf_k = e_k² / (z² + Σ_j e_j²),   z = 1.0 + 0.1·U
//
// where U is the summed weight of the tool's words that no skill knows. The
// competitor is what lets an unrelated tool stay low instead of being shared
// out among skills. Measured on the default taxonomy:
//   - one decisive name word and nothing else ("echo": e = 1.5) → 0.69; with
//     a few unknown words around it (server-everything's echo, U = 2.3)
//     → 0.58: a single specific noun in the name is just enough for a primary;
//   - create_issue of github: e = 1.88 for issue_tracking, 1.13 for
//     code_management → 0.61 and 0.22, so issue_tracking is primary and
//     code_management a secondary skill;
//   - agreeing words pile up: read_text_file → 0.81, create_entities → 0.92;
//   - evidence split between two skills → both lose (squares favour the
//     larger), so a tool that is half one thing and half another is not
//     filed (read_media_file: file_system 0.43, media 0.37);
//   - mostly unknown words with one incidental match ("toggle subscriber
//     updates": payments 0.5, U = 3.9) → 0.12.
//
// Secondary skills are kept when they reach 0.1 and a quarter of the first
// one's confidence. Confidences are rounded to three decimals.
//
// The constants were chosen on the table in offline_test.go (real npm server
// tools and common MCP server tools; 93% agreement over 99 tools) and are not
// meant to be tuned per deployment: a better taxonomy text is the lever.
type Offline struct {
	skills   []Skill
	postings map[string][]posting // stem → skills that use it
	idf      map[string]float64
}

type posting struct {
	skill int
	assoc float64
}

// Weights and calibration constants; see the Offline doc comment.
const (
	assocKeyword     = 1.0
	assocExample     = 0.8
	assocDescription = 0.6

	weightName        = 1.5
	weightServer      = 0.8
	weightParam       = 0.35
	weightDescription = 0.5
	weakFactor        = 0.3

	noneBase    = 1.0
	noneUnknown = 0.1

	minSecondary      = 0.1  // a second or third skill needs this confidence...
	secondaryFraction = 0.25 // ...and this fraction of the first one's
)

// NewOffline indexes a taxonomy. It does not validate it (see Validate); an
// empty taxonomy yields a classifier that files nothing.
func NewOffline(skills []Skill) *Offline {
	o := &Offline{
		skills:   cloneSkills(skills),
		postings: map[string][]posting{},
		idf:      map[string]float64{},
	}
	for k, s := range o.skills {
		assoc := map[string]float64{}
		note := func(text string, a float64, dropStop bool) {
			for _, tk := range tokenizeStop(text, dropStop) {
				assoc[tk.stem] = max(assoc[tk.stem], a)
			}
		}
		note(s.ID, assocKeyword, true)
		note(s.Name, assocKeyword, true)
		for _, kw := range s.Keywords {
			note(kw, assocKeyword, false) // a keyword is deliberate, even "add"
		}
		for _, ex := range s.Examples {
			note(ex, assocExample, true)
		}
		note(s.Description, assocDescription, true)
		for stem, a := range assoc {
			o.postings[stem] = append(o.postings[stem], posting{skill: k, assoc: a})
		}
	}
	n := float64(len(o.skills))
	for stem, ps := range o.postings {
		slices.SortFunc(ps, func(a, b posting) int { return cmp.Compare(a.skill, b.skill) })
		o.idf[stem] = math.Log(1+n/float64(len(ps))) / math.Log(1+n)
	}
	return o
}

// Skills returns a copy of the taxonomy the classifier was built with.
func (o *Offline) Skills() []Skill { return cloneSkills(o.skills) }

// Classify files one tool. It never fails: a tool that matches nothing gets no
// skills and no primary.
func (o *Offline) Classify(t Tool) Classification {
	evidence, unknown := o.evidence(t)
	z := noneBase + noneUnknown*unknown
	denom := z * z
	for _, e := range evidence {
		denom += e * e
	}
	var as []Assignment
	for k, e := range evidence {
		if e <= 0 {
			continue
		}
		as = append(as, Assignment{SkillID: o.skills[k].ID, Confidence: round3(e * e / denom)})
	}
	sortAssignments(as)
	var kept []Assignment
	for i, a := range as {
		if i >= maxSkills {
			break
		}
		if i > 0 && (a.Confidence < minSecondary || a.Confidence < secondaryFraction*as[0].Confidence) {
			break
		}
		kept = append(kept, a)
	}
	return finish(Classification{Skills: kept, Method: MethodOffline})
}

// ClassifyBatch classifies tools in order; it has the LLM's signature so the
// two are interchangeable. ctx is unused: offline classification does not block.
func (o *Offline) ClassifyBatch(_ context.Context, tools []Tool) []Classification {
	out := make([]Classification, len(tools))
	for i, t := range tools {
		out[i] = o.Classify(t)
	}
	return out
}

// evidence returns e_k for every skill and the weight of the tool's words
// that no skill knows.
func (o *Offline) evidence(t Tool) ([]float64, float64) {
	w := toolWeights(t)
	evidence := make([]float64, len(o.skills))
	var unknown float64
	for stem, wt := range w {
		ps, ok := o.postings[stem]
		if !ok {
			unknown += wt
			continue
		}
		idf := o.idf[stem]
		for _, p := range ps {
			evidence[p.skill] += wt * idf * p.assoc
		}
	}
	return evidence, unknown
}

// toolWeights gives every stem of the tool's text its weight w(t).
func toolWeights(t Tool) map[string]float64 {
	w := map[string]float64{}
	put := func(stem string, v float64) {
		if weakStems[stem] {
			v *= weakFactor
		}
		w[stem] = max(w[stem], v)
	}
	name := tokenize(t.Name)
	if len(name) == 0 {
		name = tokenizeStop(t.Name, false) // "add", "list": the name is all there is
	}
	for _, tk := range name {
		put(tk.stem, weightName)
	}
	for _, tk := range tokenize(t.Server) {
		put(tk.stem, weightServer)
	}
	for _, p := range t.Params {
		for _, tk := range tokenize(p) {
			put(tk.stem, weightParam)
		}
	}
	tf := map[string]int{}
	for _, tk := range tokenize(t.Description) {
		tf[tk.stem]++
	}
	for stem, n := range tf {
		put(stem, weightDescription*math.Sqrt(float64(min(n, 4))))
	}
	return w
}

func sortAssignments(as []Assignment) {
	slices.SortStableFunc(as, func(a, b Assignment) int {
		if c := cmp.Compare(b.Confidence, a.Confidence); c != 0 {
			return c
		}
		return cmp.Compare(a.SkillID, b.SkillID)
	})
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func cloneSkills(in []Skill) []Skill {
	out := make([]Skill, len(in))
	for i, s := range in {
		s.Examples = slices.Clone(s.Examples)
		s.Keywords = slices.Clone(s.Keywords)
		out[i] = s
	}
	return out
}
