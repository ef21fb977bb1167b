package peers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// RunPyzor runs the detection pass with Pyzor against a pyzord at server
// (host:port, see scripts/peers/pyzor.sh): the reported spam is reported,
// then every checked message and copy is checked; a message is flagged
// when the server knows its digest (count > 0). script is
// scripts/peers/pyzor_batch.py, which calls Pyzor's own digest and client
// code for each file in one process (python is the interpreter that has the
// pyzor module, /usr/bin/python3 for the Debian package). Rates are
// wall-clock, one client.
func RunPyzor(ctx context.Context, python, script, server string, s *Setup, workdir string) (*Result, error) {
	fl, err := writeFiles(s, workdir)
	if err != nil {
		return nil, fmt.Errorf("pyzor: %w", err)
	}
	r := &Result{Name: "Pyzor"}
	run := func(mode, list string) ([]byte, time.Duration, error) {
		var stderr bytes.Buffer
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, python, script, mode, server, list)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, 0, fmt.Errorf("pyzor %s: %w: %s", mode, err, truncate(stderr.Bytes(), 500))
		}
		return out, time.Since(t0), nil
	}
	out, learnTime, err := run("report", fl.reportedList)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		_, res, _ := strings.Cut(line, "\t")
		if res == "ok" {
			r.Learned++
		} else {
			r.Lost++
		}
	}
	out, checkTime, err := run("check", fl.checkedList)
	if err != nil {
		return nil, err
	}
	flags := make([]bool, len(fl.checked))
	answered := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, res, ok := strings.Cut(sc.Text(), "\t")
		k, known := fl.pos[path]
		if !ok || !known {
			continue
		}
		answered++
		n, err := strconv.Atoi(res)
		if err != nil {
			r.Errors++
			if r.FirstError == nil {
				r.FirstError = fmt.Errorf("pyzor check %s: %s", path, res)
			}
			continue
		}
		flags[k] = n > 0
	}
	if missing := len(fl.checked) - answered; missing > 0 {
		r.Errors += missing
		if r.FirstError == nil {
			r.FirstError = fmt.Errorf("pyzor check: %d messages without an answer", missing)
		}
	}
	r.Checked = flags[:len(s.Split.Checked)]
	r.Copies = flags[len(s.Split.Checked):]
	r.Detection = Speed{LearnRate: rate(len(fl.reported), learnTime), CheckRate: rate(len(fl.checked), checkTime)}
	return r, nil
}
