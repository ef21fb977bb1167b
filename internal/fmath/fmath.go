// Package fmath gives the few transcendental functions that signatures
// depend on with bit-identical results on every architecture.
//
// ANDD term weights are part of the signature wire format (a fleet of mail
// servers must compute the same sketches), and they use logarithms. The
// standard library's math.Log is assembly on amd64 and Go elsewhere, where
// the compiler may fuse a*b+c into one FMA instruction (it does on arm64,
// ppc64le and s390x): the two can differ in the last bit. Log here is the
// classic fdlibm algorithm (the one math.Log documents) with every product
// rounded explicitly — a float64 conversion forbids fusion — so it gives
// the same bits everywhere. It is within one ulp of the exact result.
package fmath

import "math"

// Coefficients of the fdlibm e_log.c approximation.
const (
	ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
	ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
	lg1   = 6.666666666666735130e-01   // 0x3fe5555555555593
	lg2   = 3.999999999940941908e-01   // 0x3fd999999997fa04
	lg3   = 2.857142874366239149e-01   // 0x3fd2492494229359
	lg4   = 2.222219843214978396e-01   // 0x3fcc71c51d8e78af
	lg5   = 1.818357216161805012e-01   // 0x3fc7466496cb03de
	lg6   = 1.531383769920937332e-01   // 0x3fc39a09d078c69f
	lg7   = 1.479819860511658591e-01   // 0x3fc2f112df3e5244
)

// Log returns the natural logarithm of x, with the special cases of
// math.Log: Log(+Inf) = +Inf, Log(0) = -Inf, Log(x < 0) = NaN,
// Log(NaN) = NaN.
func Log(x float64) float64 {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 1):
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	}
	// x = 2^k · (1+f) with √2/2 < 1+f < √2.
	f1, ki := math.Frexp(x)
	if f1 < math.Sqrt2/2 {
		f1 *= 2 // exact
		ki--
	}
	f := f1 - 1
	k := float64(ki)

	// log(1+f) = f − s·(f − R) with s = f/(2+f) and R a minimax polynomial
	// in s², evaluated with each product rounded on its own.
	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (lg1 + float64(s4*(lg3+float64(s4*(lg5+float64(s4*lg7)))))))
	t2 := float64(s4 * (lg2 + float64(s4*(lg4+float64(s4*lg6)))))
	r := t1 + t2
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + float64(k*ln2Lo))) - f)
}

// Log1p returns log(1+x), accurate also for x near zero, with the special
// cases of math.Log1p. It is fdlibm's s_log1p.c (the algorithm of
// math.Log1p) with every product rounded on its own, so that it gives the
// bits of math.Log1p on amd64 everywhere.
func Log1p(x float64) float64 {
	const (
		sqrt2M1     = 4.142135623730950488017e-01  // √2−1
		sqrt2HalfM1 = -2.928932188134524755992e-01 // √2/2−1
		small       = 1.0 / (1 << 29)
		tiny        = 1.0 / (1 << 54)
		two53       = 1 << 53
	)
	switch {
	case x < -1 || math.IsNaN(x):
		return math.NaN()
	case x == -1:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return math.Inf(1)
	}
	absx := math.Abs(x)
	var f float64
	var iu uint64
	k := 1
	if absx < sqrt2M1 {
		if absx < small {
			if absx < tiny {
				return x
			}
			return x - float64(float64(x*x)*0.5)
		}
		if x > sqrt2HalfM1 {
			k = 0
			f = x
			iu = 1
		}
	}
	var c float64
	if k != 0 {
		var u float64
		if absx < two53 {
			u = 1.0 + x
			iu = math.Float64bits(u)
			k = int((iu >> 52) - 1023)
			if k > 0 { // correction term
				c = 1.0 - (u - x)
			} else {
				c = x - (u - 1.0)
			}
			c /= u
		} else {
			u = x
			iu = math.Float64bits(u)
			k = int((iu >> 52) - 1023)
			c = 0
		}
		iu &= 0x000fffffffffffff
		if iu < 0x0006a09e667f3bcd { // mantissa of √2
			u = math.Float64frombits(iu | 0x3ff0000000000000)
		} else {
			k++
			u = math.Float64frombits(iu | 0x3fe0000000000000)
			iu = (0x0010000000000000 - iu) >> 2
		}
		f = u - 1.0
	}
	fk := float64(k)
	hfsq := float64(float64(0.5*f) * f)
	if iu == 0 { // |f| < 2^-20
		if f == 0 {
			if k == 0 {
				return 0
			}
			c += float64(fk * ln2Lo)
			return float64(fk*ln2Hi) + c
		}
		r := float64(hfsq * (1.0 - float64(0.66666666666666666*f)))
		if k == 0 {
			return f - r
		}
		return float64(fk*ln2Hi) - ((r - (float64(fk*ln2Lo) + c)) - f)
	}
	s := f / (2.0 + f)
	z := float64(s * s)
	r := float64(z * (lg1 + float64(z*(lg2+float64(z*(lg3+float64(z*(lg4+float64(z*(lg5+float64(z*(lg6+float64(z*lg7)))))))))))))
	if k == 0 {
		return f - (hfsq - float64(s*(hfsq+r)))
	}
	return float64(fk*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + (float64(fk*ln2Lo) + c))) - f)
}
