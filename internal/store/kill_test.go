package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "NDD_STORE_INGEST_DIR"

// TestHelperIngest is not a test: run as a child process by TestKill9, it
// ingests reports forever (single reports and batches, joins and merges)
// and prints "ack N" once report N has been acknowledged.
func TestHelperIngest(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestKill9")
	}
	s, err := Open(dir, Options{Logger: testLogger(t)})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	var start int
	fmt.Sscan(os.Getenv(helperEnv+"_START"), &start)
	w := bufio.NewWriter(os.Stdout)
	for i := start; ; {
		if i%5 == 4 {
			// A batch of 10 reports, acknowledged together.
			var ins []ReportInput
			for j := i; j < i+10; j++ {
				ins = append(ins, killReport(j))
			}
			if _, err := s.ReportBatch(ctx, ins); err != nil {
				fmt.Println("batch:", err)
				os.Exit(2)
			}
			for j := i; j < i+10; j++ {
				fmt.Fprintf(w, "ack %d\n", j)
			}
			i += 10
		} else {
			if _, err := s.Report(ctx, killReport(i)); err != nil {
				fmt.Println("report:", err)
				os.Exit(2)
			}
			fmt.Fprintf(w, "ack %d\n", i)
			i++
		}
		w.Flush()
	}
}

// killReport is report i: its own key, and every 7th report bridges to an
// earlier campaign (join or merge).
func killReport(i int) ReportInput {
	ks := []string{fmt.Sprintf("kill-%d", i)}
	if i%7 == 3 {
		ks = append(ks, fmt.Sprintf("kill-%d", i/2))
	}
	return spam(fmt.Sprintf("reporter-%d", i%13), t0.Add(time.Duration(i)*time.Second), ks...)
}

// TestKill9 kills an ingesting process with SIGKILL and checks that every
// acknowledged report is in the reopened store and that it verifies clean.
func TestKill9(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("in the helper")
	}
	dir := t.TempDir()
	var all []int // every acknowledged report, over all rounds
	for round := 0; round < 3; round++ {
		start := round * 100000
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperIngest$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir, fmt.Sprintf("%s_START=%d", helperEnv, start))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := start - 1
		sc := bufio.NewScanner(out)
		deadline := time.Now().Add(20 * time.Second)
		killAt := 150 + 97*round
		killed := false
		for sc.Scan() {
			line := sc.Text()
			var n int
			if _, err := fmt.Sscanf(line, "ack %d", &n); err != nil {
				t.Fatalf("helper: %s", line)
			}
			if n != acked+1 {
				t.Fatalf("acks out of order: %d after %d", n, acked)
			}
			acked = n
			all = append(all, n)
			if !killed && (n-start >= killAt || time.Now().After(deadline)) {
				// Kill mid-stream; acks already written still count.
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		err = cmd.Wait()
		if !killed || err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("helper was not killed: %v", err)
		}
		t.Logf("round %d: killed after %d acknowledged reports", round, acked+1-start)

		// The store is readable as it was left (read-only: the
		// backup, stats and verify commands), then reopened read-write.
		ro := openTest(t, dir, Options{ReadOnly: true})
		if id := lookupOne(t, ro, fmt.Sprintf("kill-%d", acked)); id == 0 {
			t.Errorf("read-only open after kill: last acknowledged report %d missing", acked)
		}
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
		s := openTest(t, dir, Options{})
		if how, _, _, _ := s.keyIndexInfo(); how != "rebuilt" {
			t.Errorf("key index after kill -9: %s, want rebuilt (the checkpoint is older than the store)", how)
		}
		for _, i := range all {
			k := fmt.Sprintf("kill-%d", i)
			id := lookupOne(t, s, k)
			if id == 0 {
				t.Fatalf("acknowledged report %d lost (key %s not indexed)", i, k)
			}
			c := mustGet(t, s, id)
			if c.SpamReports < 1 {
				t.Fatalf("report %d: campaign %d has no reports", i, id)
			}
		}
		verifyClean(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
