package campaign

import (
	"slices"
	"testing"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/shortsig"
)

func TestKeyFamilies(t *testing.T) {
	im := imatchbag.Signature{Bag: 1}.AppendKey(nil)
	band := []byte{andd.SketchVersion, 'A', 3, 0xff}
	lead := make([]byte, shortsig.KeyLen)
	lead[0], lead[1], lead[2] = shortsig.Version, shortsig.Family, byte(shortsig.KindLead)
	tests := []struct {
		name string
		keys [][]byte
		want []FamilyCount
	}{
		{"none", nil, []FamilyCount{}},
		{"mixed", [][]byte{lead, band, im, im, {1}}, []FamilyCount{
			{Family: FamilyIMatch, Keys: 2}, {Family: FamilyANDD, Keys: 1},
			{Family: FamilyShort, Kind: "lead", Keys: 1}, {Family: "other", Keys: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KeyFamilies(tt.keys); !slices.Equal(got, tt.want) {
				t.Errorf("KeyFamilies = %v, want %v", got, tt.want)
			}
		})
	}
}
