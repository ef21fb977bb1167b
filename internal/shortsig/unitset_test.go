package shortsig

import (
	"fmt"
	"strings"
	"testing"
)

// TestUnitSet: units are kept once, lower-cased as their fold says, in
// order of first appearance, through the table's growth and a reset.
func TestUnitSet(t *testing.T) {
	var set unitSet
	for round := range 2 {
		set.reset()
		cases := []struct {
			u    string
			f    fold
			want int
		}{
			{"hello", foldNone, 0},
			{"Hello", foldASCII, 0},
			{"HELLO", foldASCII, 0},
			{"World2", foldASCII, 1},
			{"world2", foldNone, 1},
			{"Ünïcödé", foldUnicode, 2},
			{"ünïcödé", foldNone, 2},
		}
		for _, c := range cases {
			if got := set.add(c.u, c.f); got != c.want {
				t.Fatalf("round %d: add(%q, %d) = %d, want %d", round, c.u, c.f, got, c.want)
			}
		}
		// Enough units to double the table a few times.
		for i := range 3 * minSlots {
			u := fmt.Sprintf("Unit%d", i)
			if got := set.add(u, foldASCII); got != 3+i {
				t.Fatalf("round %d: add(%q) = %d, want %d", round, u, got, 3+i)
			}
		}
		for i := range 3 * minSlots {
			u := fmt.Sprintf("unit%d", i)
			if got := set.add(u, foldNone); got != 3+i {
				t.Fatalf("round %d: add(%q) again = %d, want %d", round, u, got, 3+i)
			}
		}
		if got := strings.Join(set.units[:3], " "); got != "hello world2 ünïcödé" || set.len() != 3+3*minSlots {
			t.Fatalf("round %d: units %q…, %d of them", round, got, set.len())
		}
	}
}

// Looking up a unit already in the set allocates nothing, whether it is
// found as bytes (an ASCII unit lower-cased in place) or as a string.
func TestUnitSetLookupAllocates(t *testing.T) {
	var set unitSet
	set.reset()
	set.add("hello", foldNone)
	set.add("wörld", foldNone)
	if n := testing.AllocsPerRun(100, func() {
		set.add("HeLLo", foldASCII)
		set.add("wörld", foldNone)
	}); n != 0 {
		t.Errorf("%v allocations per lookup of known units, want 0", n)
	}
}
