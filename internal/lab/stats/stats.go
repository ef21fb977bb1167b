// Package stats holds the summary statistics every measurement of the lab
// reports in the same way: medians of rates and ratios, and latency
// percentiles by nearest rank.
package stats

import (
	"cmp"
	"slices"
)

// Number is what a median is taken of: integers (time.Duration among
// them) and floating-point numbers.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// Median returns the median of xs (the mean of the two middle values for
// an even count; 0 for none). xs is not modified.
func Median[T Number](xs []T) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Percentile returns the q-quantile of sorted (ascending) by nearest
// rank: the smallest value with at least q of the values at or below it.
// q is clamped to [0, 1]; 0 for no values.
func Percentile[T cmp.Ordered](sorted []T, q float64) T {
	var zero T
	if len(sorted) == 0 {
		return zero
	}
	q = min(max(q, 0), 1)
	// The epsilon keeps q·n that is an integer in exact arithmetic (0.99
	// of 100) from rounding up past it in floating point.
	k := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

// Percentiles sorts ds in place and returns its q-quantiles (Percentile)
// for each q of qs.
func Percentiles[T cmp.Ordered](ds []T, qs ...float64) []T {
	slices.Sort(ds)
	out := make([]T, len(qs))
	for i, q := range qs {
		out[i] = Percentile(ds, q)
	}
	return out
}
