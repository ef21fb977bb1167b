package mime

import (
	"math/rand/v2"
	"testing"
)

// TestPlainRun checks that every byte plainRun vouches for is one that
// writeText's byte loop copies, and that plain text is mostly vouched for.
func TestPlainRun(t *testing.T) {
	keep := func(b []byte, j int) bool {
		return !htmlSpace[b[j]] || b[j] == ' ' && j+1 < len(b) && !htmlSpace[b[j+1]]
	}
	alphabet := []byte{'a', 'Z', ' ', ' ', '\n', '\t', '\r', '\f', 0x1f, 0x20, 0x21, 0x7f, 0x80, 0xc3, 0xa9, 0xff, 0}
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			if r.IntN(3) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = byte('a' + r.IntN(26))
			}
		}
		got := plainRun(b)
		if got > len(b) {
			t.Fatalf("case %d %q: plainRun = %d > len", n, b, got)
		}
		for j := range got {
			if !keep(b, j) {
				t.Fatalf("case %d %q: plainRun = %d vouches for byte %d", n, b, got, j)
			}
		}
	}
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"short", 0}, {"exactly8", 7}, {"one two three four five", 21},
		{"one  two three four", 0}, {"abcdefg\nhij", 0}, {"abcdefgh\nij", 7},
		{"été été été", 14},
	} {
		if got := plainRun([]byte(tc.in)); got != tc.want {
			t.Errorf("plainRun(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
