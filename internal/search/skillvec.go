package search

import (
	"cmp"
	"context"
	"slices"
)

// skillVectors is one computation of the per-skill embeddings, valid for
// the index generation it was made at.
type skillVectors struct {
	gen   uint64
	vecs  map[string][]float32
	tools map[string]int
}

// SkillVector is one skill's embedding: the unit-length centroid of the
// vectors of the tools filed under it, each weighted by the skill's rank
// among the tool's skills (1 for the first, ½ for the second, ⅓ for the
// third), so a tool counts most for its primary skill. Tools is the number
// of embedded tools it is made of.
type SkillVector struct {
	Skill  string
	Vector []float32
	Tools  int
}

// SkillVectors returns the per-skill embeddings (seed 004 AG-US3 AC5),
// sorted by skill id. They follow the index: a tool re-classified (its
// document replaced with other skills), a tool embedded, or a server gone
// changes them at the next call, which recomputes them from the stored tool
// vectors (no embeddings request). Without an Embedder, or before any tool
// is embedded, there are none.
func (ix *Index) SkillVectors() []SkillVector {
	sv := ix.skillVectors()
	out := make([]SkillVector, 0, len(sv.vecs))
	for id, v := range sv.vecs {
		out = append(out, SkillVector{Skill: id, Vector: slices.Clone(v), Tools: sv.tools[id]})
	}
	slices.SortFunc(out, func(a, b SkillVector) int { return cmp.Compare(a.Skill, b.Skill) })
	return out
}

// skillVectors returns the current computation, rebuilding it when the
// index has changed since.
func (ix *Index) skillVectors() *skillVectors {
	if sv := ix.skillVecs.Load(); sv != nil && sv.gen == ix.gen.Load() {
		return sv
	}
	ix.skillMu.Lock()
	defer ix.skillMu.Unlock()
	ix.mu.RLock()
	gen := ix.gen.Load()
	if sv := ix.skillVecs.Load(); sv != nil && sv.gen == gen {
		ix.mu.RUnlock()
		return sv
	}
	sv := &skillVectors{gen: gen, vecs: map[string][]float32{}, tools: map[string]int{}}
	sums := map[string][]float64{}
	for i := range ix.docs {
		e := &ix.docs[i]
		if !e.live || e.vec == nil {
			continue
		}
		for rank, id := range e.skills {
			sum := sums[id]
			if sum == nil {
				sum = make([]float64, len(e.vec))
				sums[id] = sum
			}
			if len(sum) != len(e.vec) {
				continue // a model change mid-way: vectors of another size
			}
			w := 1 / float64(rank+1)
			for j, x := range e.vec {
				sum[j] += w * float64(x)
			}
			sv.tools[id]++
		}
	}
	ix.mu.RUnlock()
	for id, sum := range sums {
		v := make([]float32, len(sum))
		for j, x := range sum {
			v[j] = float32(x)
		}
		sv.vecs[id] = normalize(v)
	}
	ix.skillVecs.Store(sv)
	return sv
}

// SkillScore is a skill's similarity to a query.
type SkillScore struct {
	Skill string
	Score float64 // cosine similarity of the query and the skill's embedding
}

// RankSkills orders the skills that have an embedding by their similarity
// to text, best first, at most limit (≤ 0: all): the first, coarse step of a
// hierarchical search (which skills is this about?) before ranking tools.
// It embeds the query, so it fails when the Embedder does; without one it
// returns nothing.
func (ix *Index) RankSkills(ctx context.Context, text string, limit int) ([]SkillScore, error) {
	if ix.emb == nil {
		return nil, nil
	}
	sv := ix.skillVectors()
	if len(sv.vecs) == 0 {
		return nil, nil
	}
	q, err := ix.embedQuery(ctx, text)
	if err != nil {
		return nil, err
	}
	out := make([]SkillScore, 0, len(sv.vecs))
	for id, v := range sv.vecs {
		if len(v) == len(q) {
			out = append(out, SkillScore{Skill: id, Score: dot(q, v)})
		}
	}
	slices.SortFunc(out, func(a, b SkillScore) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.Skill, b.Skill)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
