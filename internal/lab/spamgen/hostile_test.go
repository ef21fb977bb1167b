package spamgen

import (
	"bytes"
	"testing"
)

func TestNewHostile(t *testing.T) {
	for _, h := range HostileKinds() {
		got, err := ParseHostile(" " + string(h) + " ")
		if err != nil || got != h {
			t.Errorf("ParseHostile(%q) = %q, %v", h, got, err)
		}
		a, b := NewHostile(h, 10<<10), NewHostile(h, 10<<10)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: not deterministic", h)
		}
		if len(a) < 10<<10 || len(a) > 20<<10 {
			t.Errorf("%s: %d bytes for 10 KiB of hostile content", h, len(a))
		}
		if !bytes.Contains(a, []byte("\r\n\r\n")) {
			t.Errorf("%s: no header/body separator", h)
		}
	}
	if _, err := ParseHostile("nope"); err == nil {
		t.Error("ParseHostile accepted an unknown name")
	}
}
