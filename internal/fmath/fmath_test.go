package fmath

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// ulps is the distance between a and b in units in the last place.
func ulps(a, b float64) int64 {
	d := int64(math.Float64bits(a)) - int64(math.Float64bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

func TestLogSpecialCases(t *testing.T) {
	tests := []struct{ in, want float64 }{
		{1, 0},
		{math.E, 1},
		{math.Inf(1), math.Inf(1)},
		{0, math.Inf(-1)},
	}
	for _, tt := range tests {
		if got := Log(tt.in); got != tt.want && ulps(got, tt.want) > 1 {
			t.Errorf("Log(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	for _, x := range []float64{-1, math.Inf(-1), math.NaN()} {
		if got := Log(x); !math.IsNaN(got) {
			t.Errorf("Log(%v) = %v, want NaN", x, got)
		}
	}
}

// Within one ulp of math.Log over integers, ratios of integers (what the
// ANDD weights take) and random doubles of every magnitude.
func TestLogAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(x float64) {
		if d := ulps(Log(x), math.Log(x)); d > 1 {
			t.Fatalf("Log(%v) = %v, math.Log = %v (%d ulps)", x, Log(x), math.Log(x), d)
		}
	}
	for n := 1; n <= 1<<17; n++ {
		check(float64(n))
		check(float64(1<<20+1) / float64(n))
	}
	for range 200000 {
		check(math.Ldexp(1+rng.Float64(), rng.IntN(2000)-1000))
	}
}

// Golden values: the bits of Log for inputs the ANDD model uses. They are
// the same on every architecture (test/crossarch.sh runs this test under
// qemu-aarch64).
func TestLogGolden(t *testing.T) {
	tests := []struct {
		x    float64
		bits uint64
	}{
		{17, 0x4006aa6bc1fa7f7a},
		{4097, 0x4020a2d23e3bb61e},
		{4424.0 / 3.0, 0x401d2f4bb62edd00},
		{1e6 + 1, 0x402ba18abb1dedc8},
		{0.3, 0xbff34378fcbda721},
	}
	for _, tt := range tests {
		if got := math.Float64bits(Log(tt.x)); got != tt.bits {
			t.Errorf("Log(%v) bits %#x, want %#x", tt.x, got, tt.bits)
		}
	}
}

// Log1p gives the bits of math.Log1p as computed on amd64 (pure Go
// there, without fused multiply-adds), over the integers the ANDD features
// take and random values of every range of the algorithm.
func TestLog1pMatchesAMD64(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("math.Log1p is the reference only where Go does not fuse multiply-adds (amd64)")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(x float64) {
		if got, want := Log1p(x), math.Log1p(x); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("Log1p(%v) = %v (%#x), math.Log1p = %v (%#x)", x, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
	for n := 0; n <= 1<<20; n++ {
		check(float64(n))
	}
	for range 200000 {
		check(math.Ldexp(rng.Float64(), -rng.IntN(70)))      // near 0, every small scale
		check(-0.5 * rng.Float64())                          // (−0.5, 0]
		check(math.Ldexp(1+rng.Float64(), rng.IntN(120)))    // large
		check(math.Ldexp(1+rng.Float64(), 53+rng.IntN(900))) // beyond 2^53
	}
}

func TestLog1pSpecialCases(t *testing.T) {
	if got := Log1p(-1); !math.IsInf(got, -1) {
		t.Errorf("Log1p(-1) = %v", got)
	}
	for _, x := range []float64{-2, math.NaN()} {
		if got := Log1p(x); !math.IsNaN(got) {
			t.Errorf("Log1p(%v) = %v, want NaN", x, got)
		}
	}
	if got := Log1p(math.Inf(1)); !math.IsInf(got, 1) {
		t.Errorf("Log1p(+Inf) = %v", got)
	}
	if got := Log1p(0); got != 0 {
		t.Errorf("Log1p(0) = %v", got)
	}
}

func BenchmarkLog(b *testing.B) {
	x := 1.0
	for b.Loop() {
		x = Log(x+3) + 1
	}
	_ = x
}
