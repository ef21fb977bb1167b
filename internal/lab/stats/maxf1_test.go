package stats

import (
	"math"
	"testing"
)

func TestMaxF1(t *testing.T) {
	tests := []struct {
		scores []float64
		labels []bool
		f1     float64
	}{
		{[]float64{0.9, 0.8, 0.1}, []bool{true, true, false}, 1},
		{[]float64{0.9, 0.8, 0.7}, []bool{false, true, false}, 2.0 / 3},
		{[]float64{0.5, 0.5}, []bool{true, false}, 2.0 / 3}, // ties are one threshold
		{nil, nil, 0},
		{[]float64{0.3}, []bool{false}, 0},
	}
	for i, tc := range tests {
		got := MaxF1(tc.scores, tc.labels)
		if math.Abs(got.F1-tc.f1) > 1e-12 {
			t.Errorf("case %d: MaxF1 = %+v, want F1 %v", i, got, tc.f1)
		}
	}
}
