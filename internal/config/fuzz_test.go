package config

import (
	"os"
	"testing"
)

// FuzzParse feeds arbitrary bytes as a configuration file: Parse returns
// a configuration that validates, or an error; it never panics, and what
// it accepts survives a Marshal and Parse round trip.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../../config/nddmilter.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(""))
	f.Add([]byte("milter:\n  listen: unix:/run/nddmilter.sock\n  overrides:\n    example.org: tag\n"))
	f.Add([]byte("policy:\n  max_action: quarantine\n  cost_fp:\n    tag: 2\n"))
	f.Add([]byte("store:\n  expiry: 1d12h\nlog:\n  level: debug\n"))
	f.Add([]byte("milter: [1, 2\n"))
	f.Add([]byte("signatures:\n  imatch:\n    bags: -3\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Parse(in)
		if err != nil {
			if c != nil {
				t.Fatalf("configuration and error both returned: %v", err)
			}
			return
		}
		b, err := c.Marshal()
		if err != nil {
			t.Fatalf("accepted configuration does not marshal: %v", err)
		}
		if _, err := Parse(b); err != nil {
			t.Fatalf("accepted configuration does not parse back: %v\n%s", err, b)
		}
	})
}
