package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFleetSmoke runs `bench fleet` at its smallest: every phase runs and
// prints its line.
func TestFleetSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JetStream cluster")
	}
	var out bytes.Buffer
	dir := t.TempDir()
	o := FleetOptions{Latency: 3, Reports: 40, Batch: 10, CheckFor: 50 * time.Millisecond, CheckRounds: 2, NoSync: true,
		Dir: dir, ChecksProfile: filepath.Join(dir, "checks.prof")}
	if err := Fleet(context.Background(), o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if fi, err := os.Stat(o.ChecksProfile); err != nil || fi.Size() == 0 {
		t.Errorf("checks profile: %v %v", fi, err)
	}
	o.CPUProfile = filepath.Join(dir, "missing", "cpu.prof")
	if err := Fleet(context.Background(), o, io.Discard); err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Errorf("an unwritable profile: %v, want an error naming --cpuprofile", err)
	}
	for _, want := range []string{"report → protection", "throughput: 40 reports", "catch-up:", "stream:", "snapshot:",
		"standalone", "fleet on", "NATS down", "against standalone", "memory of this process"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the output:\n%s", want, out.String())
		}
	}
}
