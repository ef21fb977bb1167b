package stats

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{3}, 3},
		{"odd", []float64{5, 1, 3}, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5},
		{"negative", []float64{-0.1, 0.05}, -0.025},
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		if got := Median(tt.in); got != tt.want {
			t.Errorf("%s: Median(%v) = %v, want %v", tt.name, tt.in, got, tt.want)
		}
		for i := range in {
			if in[i] != tt.in[i] {
				t.Errorf("%s: Median modified its input", tt.name)
			}
		}
	}
	if got := Median([]time.Duration{1, 3}); got != 2 {
		t.Errorf("Median of durations = %v, want 2", got)
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []int
		q      float64
		want   int
	}{
		{"none", nil, 0.5, 0},
		{"one", []int{7}, 0.99, 7},
		{"p50 of five", []int{1, 2, 3, 4, 5}, 0.5, 3},
		{"p99 of five", []int{1, 2, 3, 4, 5}, 0.99, 5},
		{"p99 of 100", hundred, 0.99, 99},
		{"p99.9 of 100", hundred, 0.999, 100},
		{"p50 of 100", hundred, 0.5, 50},
		{"min", hundred, 0, 1},
		{"max", hundred, 1, 100},
		{"below 0", hundred, -1, 1},
		{"above 1", hundred, 2, 100},
	}
	for _, tt := range tests {
		if got := Percentile(tt.sorted, tt.q); got != tt.want {
			t.Errorf("%s: Percentile(q=%v) = %v, want %v", tt.name, tt.q, got, tt.want)
		}
	}
}

func TestPercentiles(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	got := Percentiles(ds, 0.5, 1)
	if got[0] != 3 || got[1] != 5 {
		t.Errorf("Percentiles = %v, want [3 5]", got)
	}
	if ds[0] != 1 || ds[4] != 5 {
		t.Errorf("Percentiles did not sort its input: %v", ds)
	}
}
