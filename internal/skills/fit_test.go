package skills

import (
	"flag"
	"fmt"
	"slices"
	"testing"
)

// The fit takes seconds and the leave-one-server-out check a minute or two
// (minutes under -race), so they run only when asked:
//
//	go test -run 'TestOfflineFit|TestOfflineLeaveOneServerOut' -skills.fit -v ./internal/skills/
var runFit = flag.Bool("skills.fit", false, "refit the offline classifier's tuning and cross-validate it (slow)")

// fitStart is where the fit starts: round values chosen by hand before
// fitting (the weights of the classifier before the summary sentence,
// reject words and the local prior existed, with those set to a plausible
// guess).
var fitStart = tuning{
	name: 1.5, server: 1.5, param: 0.35, summary: 1, desc: 0.5, descRef: 3, weak: 0.3,
	noneBase: 1, noneUnknown: 0.1, reject: 1.5, rejectDesc: 0.3,
	prior: 2.5, priorShrink: 2, similar: 3,
}

// fitKnobs are the numbers the fit moves, each no lower than its floor;
// the others stay at fitStart's. The none competitor keeps a floor: the
// labelled set has few tools that fit no skill, and without it a tool with
// one weak word would be filed with certainty.
var fitKnobs = []struct {
	name  string
	get   func(*tuning) *float64
	floor float64
}{
	{"name", func(t *tuning) *float64 { return &t.name }, 0},
	{"server", func(t *tuning) *float64 { return &t.server }, 0},
	{"param", func(t *tuning) *float64 { return &t.param }, 0},
	{"summary", func(t *tuning) *float64 { return &t.summary }, 0},
	{"desc", func(t *tuning) *float64 { return &t.desc }, 0},
	{"noneBase", func(t *tuning) *float64 { return &t.noneBase }, 0.1},
	{"noneUnknown", func(t *tuning) *float64 { return &t.noneUnknown }, 0.05},
	{"prior", func(t *tuning) *float64 { return &t.prior }, 0},
	{"reject", func(t *tuning) *float64 { return &t.reject }, 0},
}

// fitObjective is the number of tools right plus half the mean margin
// (toolMargin), which is less than one tool: accuracy decides, the margin
// breaks ties towards values that are right by more.
func fitObjective(taxonomy []Skill, set []labelled, tu tuning, cache map[string][]token) float64 {
	o := newOffline(taxonomy, tu)
	o.cache = cache
	sc := scoreLabelled(o, set)
	return float64(sc.hits) + 0.5*sc.margin
}

// fitTuning improves tu by coordinate descent: each knob in turn tries a
// few multiples of its value (or a few values if it is 0) and keeps the
// best, until a sweep changes nothing.
func fitTuning(taxonomy []Skill, set []labelled, tu tuning) tuning {
	cache := map[string][]token{}
	best := fitObjective(taxonomy, set, tu, cache)
	for sweep := 0; sweep < 6; sweep++ {
		improved := false
		for _, k := range fitKnobs {
			p := k.get(&tu)
			orig, bestV := *p, *p
			cands := []float64{0}
			if orig == 0 {
				cands = append(cands, 0.1, 0.3, 1, 3)
			}
			for _, f := range []float64{0.5, 0.7, 0.85, 1.2, 1.4, 2} {
				cands = append(cands, orig*f)
			}
			for _, v := range cands {
				if v < k.floor {
					continue
				}
				*p = v
				if h := fitObjective(taxonomy, set, tu, cache); h > best+1e-9 {
					best, bestV, improved = h, v, true
				}
			}
			*p = bestV
		}
		if !improved {
			break
		}
	}
	return tu
}

// TestOfflineFit refits the tuning on the whole labelled set and logs it
// beside the shipped one (defaultTuning is such a fit, rounded), so anyone
// changing the model or the taxonomy can see where the fit now lands.
func TestOfflineFit(t *testing.T) {
	if !*runFit {
		t.Skip("slow; run with -skills.fit")
	}
	taxonomy := Default()
	set, _, _ := loadLabelled(t, mainSet, taxonomy)
	fitted := fitTuning(taxonomy, set, fitStart)
	for _, c := range []struct {
		what string
		tu   tuning
	}{{"start", fitStart}, {"fitted", fitted}, {"shipped", defaultTuning}} {
		sc := scoreLabelled(newOffline(taxonomy, c.tu), set)
		t.Logf("%-8s %d/%d = %.1f%%  %+v", c.what, sc.hits, sc.total, 100*sc.accuracy(), c.tu)
	}
}

// minCrossValidated is the floor of TestOfflineLeaveOneServerOut.
const minCrossValidated = 0.88

// TestOfflineLeaveOneServerOut cross-validates the fit: for every server
// of the labelled set, the tuning is fitted on the other servers' tools
// and scored on that server's. The total says how well fitted weights
// carry over to a server the fit has not seen. (The taxonomy text was
// written with every server in view; testdata/heldout checks that part.)
func TestOfflineLeaveOneServerOut(t *testing.T) {
	if !*runFit {
		t.Skip("slow; run with -skills.fit")
	}
	taxonomy := Default()
	set, _, servers := loadLabelled(t, mainSet, taxonomy)
	names := make([]string, 0, len(servers))
	for s := range servers {
		names = append(names, s)
	}
	slices.Sort(names)
	var hits, total int
	for _, s := range names {
		var train, test []labelled
		for _, l := range set {
			if l.tool.Server == s {
				test = append(test, l)
			} else {
				train = append(train, l)
			}
		}
		if len(test) == 0 {
			continue
		}
		sc := scoreLabelled(newOffline(taxonomy, fitTuning(taxonomy, train, fitStart)), test)
		hits += sc.hits
		total += sc.total
		line := fmt.Sprintf("%-20s %3d/%-3d", s, sc.hits, sc.total)
		for _, m := range sc.misses {
			line += "\n    miss: " + m
		}
		t.Log(line)
	}
	acc := float64(hits) / float64(total)
	t.Logf("leave-one-server-out accuracy: %d/%d = %.1f%%", hits, total, 100*acc)
	if acc < minCrossValidated {
		t.Errorf("cross-validated accuracy %.1f%% below %.0f%%", 100*acc, 100*minCrossValidated)
	}
}
