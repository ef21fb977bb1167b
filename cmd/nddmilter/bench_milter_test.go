package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestBenchMilter runs bench milter end to end on a tiny store, over TCP
// and over a Unix socket (the clients' buffered connections included), and
// checks that campaign copies are acted on and legitimate mail is not.
func TestBenchMilter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			var out bytes.Buffer
			f := &benchMilterFlags{sessions: 3, messages: 60, campaigns: 40, templates: 4, spam: 0.5,
				dir: dir, seed: 1, network: network}
			if err := runBenchMilter(context.Background(), &globalFlags{}, f, &out); err != nil {
				t.Fatalf("bench milter: %v\n%s", err, out.String())
			}
			m := regexp.MustCompile(`campaign copies acted on (\d+)/(\d+), legitimate acted on (\d+)/`).FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no actions line:\n%s", out.String())
			}
			caught, copies, fp := benchAtoi(m[1]), benchAtoi(m[2]), benchAtoi(m[3])
			if copies == 0 || caught < copies*9/10 || fp != 0 {
				t.Errorf("copies acted on %d/%d, legitimate acted on %d:\n%s", caught, copies, fp, out.String())
			}
			for _, want := range []string{"throughput", "µs per message", "p99", "record cache", "VmRSS"} {
				if !bytes.Contains(out.Bytes(), []byte(want)) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func benchAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
