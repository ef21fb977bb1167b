package campaign

import (
	"cmp"
	"slices"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/qgram"
	"github.com/nddmilter/nddmilter/internal/shortsig"
)

// FamilyCount is how many of a campaign's index keys belong to one
// signature family (for short-message keys, one kind of them).
type FamilyCount struct {
	Family string // FamilyIMatch, FamilyANDD or FamilyShort
	Kind   string // the short-message key's kind; "" for the others
	Keys   int
}

// KeyFamilies counts keys (a campaign's Keys) by family, in the order
// I-Match, ANDD, short-message (by kind); keys of no known family are
// counted under the family "other".
func KeyFamilies(keys [][]byte) []FamilyCount {
	counts := map[FamilyCount]int{}
	for _, k := range keys {
		var f FamilyCount
		switch {
		case len(k) == imatchbag.KeyLen && k[1] == imatchbag.FamilyIMatch:
			f.Family = FamilyIMatch
		case len(k) > 2 && k[1] == 'A': // andd.Signer.BandKeys
			f.Family = FamilyANDD
		case qgram.IsKey(k):
			f.Family = FamilyQGram
		default:
			if kind, ok := shortsig.KindOf(k); ok {
				f.Family, f.Kind = FamilyShort, kind.String()
			} else {
				f.Family = "other"
			}
		}
		counts[f]++
	}
	order := map[string]int{FamilyIMatch: 0, FamilyANDD: 1, FamilyShort: 2, FamilyQGram: 3}
	out := make([]FamilyCount, 0, len(counts))
	for f, n := range counts {
		f.Keys = n
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b FamilyCount) int {
		oa, ok := order[a.Family]
		if !ok {
			oa = 4
		}
		ob, ok := order[b.Family]
		if !ok {
			ob = 4
		}
		return cmp.Or(cmp.Compare(oa, ob), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}
