package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
)

// TestBenchMilter runs bench milter end to end on a tiny store, over TCP
// and over a Unix socket (the clients' buffered connections included), and
// with d--j/go-milter's server for comparison, and checks that campaign
// copies are acted on and legitimate mail is not.
func TestBenchMilter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	for _, tc := range []struct{ network, server string }{
		{"tcp", "own"}, {"unix", "own"}, {"tcp", "d--j"}, {"unix", "d--j-buffered"},
	} {
		t.Run(tc.network+"/"+tc.server, func(t *testing.T) {
			var out bytes.Buffer
			o := MilterOptions{Sessions: 3, Messages: 60, Campaigns: 40, Templates: 4, Spam: 0.5,
				Dir: dir, Seed: 1, Network: tc.network, Server: tc.server}
			if err := Milter(context.Background(), o, &out); err != nil {
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

// TestSyntheticKeys checks that the synthetic campaigns' keys are I-Match
// signatures in imatchbag's wire form, one per bag, all distinct.
func TestSyntheticKeys(t *testing.T) {
	k, err := newSyntheticKeys(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 3 {
		keys := k.campaign()
		if len(keys) != imatchbag.DefaultK+1 {
			t.Fatalf("%d keys, want %d (one per bag)", len(keys), imatchbag.DefaultK+1)
		}
		for b, key := range keys {
			sig, err := imatchbag.ParseKey(key)
			if err != nil || int(sig.Bag) != b {
				t.Errorf("key %x: %+v, %v", key, sig, err)
			}
			if seen[string(key)] {
				t.Errorf("key %x repeated", key)
			}
			seen[string(key)] = true
		}
	}
}

// TestStore runs bench store on a tiny store.
func TestStore(t *testing.T) {
	var out bytes.Buffer
	o := StoreOptions{Signatures: 1100, IMatchKeys: 6, ANDDKeys: 5, Batch: 50, Workers: 2, Repeat: 0.1,
		Lookups: 100, LookupKeys: 16, SingleReports: 10, Warm: true}
	if err := Store(context.Background(), o, &out); err != nil {
		t.Fatalf("bench store: %v\n%s", err, out.String())
	}
	for _, want := range []string{"100 campaigns × 11 keys", "ingestion CPU", "bytes/signature", "lookup known", "report single   10"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
