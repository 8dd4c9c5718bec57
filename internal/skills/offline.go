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
// (the name is the author's own summary) or in the server name (the
// operator's summary of the whole server: "sentry", "notion"), 0.35 as a
// parameter name, 0.5·√min(tf,4) in the description. Weak words (read,
// search, send, request, ...) are scaled by 0.3. Stop words (English
// function words, CRUD verbs, "api") carry nothing. A name made only of
// stop words ("add") keeps them, since it has nothing else.
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
// where U is the summed weight of the tool's words that no skill knows, the
// description's part scaled to a twelve-word description (a long, careful
// description is not less clear than a terse one). The competitor is what
// lets an unrelated tool stay low instead of being shared out among skills:
// one decisive name word and nothing else ("echo": e = 1.5) gives 0.69, just
// enough for a primary; evidence split between two skills makes both lose
// (squares favour the larger), so a tool that is half one thing and half
// another is not filed.
//
// # Server context
//
// ClassifyServer adds to each tool's evidence a prior from its siblings on
// the same server (see there): most servers are about one thing, and terse
// tools ("whoami", "API-get-user") say what by where they live.
//
// Secondary skills are kept when they reach 0.1 and a quarter of the first
// one's confidence. Confidences are rounded to three decimals.
//
// The constants are round values checked on the labelled set of real
// servers' tools (testdata/labels.tsv, TestOfflineLabelled) and the table of
// offline_test.go; they are not meant to be tuned per deployment: a better
// taxonomy text is the lever.
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
	weightServer      = 1.5
	weightParam       = 0.35
	weightDescription = 0.5
	weakFactor        = 0.3

	noneBase       = 1.0
	noneUnknown    = 0.1
	descriptionRef = 6.0 // summed weight of a twelve-word description

	minSecondary      = 0.1  // a second or third skill needs this confidence...
	secondaryFraction = 0.25 // ...and this fraction of the first one's

	serverPrior = 2.5 // evidence a server's consensus adds, like one name word
	priorShrink = 2   // siblings the prior is shrunk by, so two tools are not a consensus
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

// Classify files one tool on its own text. It never fails: a tool that
// matches nothing gets no skills and no primary. Prefer ClassifyServer when
// the tool's siblings are at hand.
func (o *Offline) Classify(t Tool) Classification {
	evidence, unknown := o.evidence(t)
	return o.calibrate(evidence, unknown)
}

// ClassifyServer files the tools of one server, in order. A server is
// usually about one thing (Sentry's teams and projects are monitoring,
// Notion's comments are documents), so each tool's evidence gets a prior
// from its siblings: the server is classified as one document whose
// evidence is the mean of the other tools' evidence, and its confidences,
// shrunk for small servers, are added to the tool's evidence at up to
// serverPrior, about one decisive name word. A server that is clearly about
// one skill lends it fully; a mixed one (GitHub: code and issues) lends
// little to each. A tool with strong evidence of its own keeps its own
// skill; a terse or generic one takes its server's. One tool alone is
// classified as by Classify.
func (o *Offline) ClassifyServer(tools []Tool) []Classification {
	n := len(tools)
	evidence := make([][]float64, n)
	unknown := make([]float64, n)
	sum := make([]float64, len(o.skills))
	var sumUnknown float64
	for i, t := range tools {
		evidence[i], unknown[i] = o.evidence(t)
		for k, e := range evidence[i] {
			sum[k] += e
		}
		sumUnknown += unknown[i]
	}
	out := make([]Classification, n)
	mean := make([]float64, len(o.skills))
	for i := range tools {
		e := evidence[i]
		if n > 1 {
			for k := range mean {
				mean[k] = (sum[k] - evidence[i][k]) / float64(n-1)
			}
			d := o.shares(mean, (sumUnknown-unknown[i])/float64(n-1))
			shrink := float64(n-1) / (float64(n-1) + priorShrink)
			e = slices.Clone(e)
			for k := range e {
				e[k] += serverPrior * shrink * d[k]
			}
		}
		out[i] = o.calibrate(e, unknown[i])
	}
	return out
}

// shares are the unrounded confidences of evidence with unknown weight U.
func (o *Offline) shares(evidence []float64, unknown float64) []float64 {
	z := noneBase + noneUnknown*unknown
	denom := z * z
	for _, e := range evidence {
		denom += e * e
	}
	out := make([]float64, len(evidence))
	for k, e := range evidence {
		out[k] = e * e / denom
	}
	return out
}

// calibrate turns evidence into the classification; see the Offline doc
// comment.
func (o *Offline) calibrate(evidence []float64, unknown float64) Classification {
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
// that no skill knows, U. The description's share of U is scaled down to
// what a description of descriptionRef weight would contribute with the
// same fraction of unknown words: U measures how much of the tool is
// unexplained, and a long, careful description is not less clear than a
// terse one.
func (o *Offline) evidence(t Tool) ([]float64, float64) {
	w, fromDesc := toolWeights(t)
	evidence := make([]float64, len(o.skills))
	var unknown, descUnknown, descTotal float64
	for stem, wt := range w {
		if fromDesc[stem] {
			descTotal += wt
		}
		ps, ok := o.postings[stem]
		if !ok {
			if fromDesc[stem] {
				descUnknown += wt
			} else {
				unknown += wt
			}
			continue
		}
		idf := o.idf[stem]
		for _, p := range ps {
			evidence[p.skill] += wt * idf * p.assoc
		}
	}
	if descTotal > descriptionRef {
		descUnknown *= descriptionRef / descTotal
	}
	return evidence, unknown + descUnknown
}

// toolWeights gives every stem of the tool's text its weight w(t), and says
// which weights came from the description.
func toolWeights(t Tool) (map[string]float64, map[string]bool) {
	w := map[string]float64{}
	fromDesc := map[string]bool{}
	put := func(stem string, v float64, desc bool) {
		if weakStems[stem] {
			v *= weakFactor
		}
		if v > w[stem] {
			w[stem] = v
			fromDesc[stem] = desc
		}
	}
	name := tokenize(t.Name)
	if len(name) == 0 {
		name = tokenizeStop(t.Name, false) // "add", "list": the name is all there is
	}
	for _, tk := range name {
		put(tk.stem, weightName, false)
	}
	for _, tk := range tokenize(t.Server) {
		put(tk.stem, weightServer, false)
	}
	for _, p := range t.Params {
		for _, tk := range tokenize(p) {
			put(tk.stem, weightParam, false)
		}
	}
	tf := map[string]int{}
	for _, tk := range tokenize(t.Description) {
		tf[tk.stem]++
	}
	for stem, n := range tf {
		put(stem, weightDescription*math.Sqrt(float64(min(n, 4))), true)
	}
	return w, fromDesc
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
