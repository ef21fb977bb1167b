package mime

import "testing"

func TestSignatureAt(t *testing.T) {
	cases := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"no signature", 12},
		{"note\n-- \nsig", 5},
		{"note\n--\nsig", 5},
		{"note\n-- \r\nsig", 5},
		{"note\n-- \nold sig\n-- \nnew sig", 17},
		{"note\n--\n", 5},
		{"a -- b\n---\n> --\n--x", 19},
	}
	for _, c := range cases {
		if got := SignatureAt(c.in); got != c.want {
			t.Errorf("SignatureAt(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}
