package peers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// fileLists are the messages of a Setup as files, for tools that read
// files: the reported and checked paths (corpus files, and the copies
// written under workdir/copies), the index of each checked path in
// Checked ++ Copies, and list files of both.
type fileLists struct {
	reported, checked         []string
	pos                       map[string]int
	reportedList, checkedList string
}

func writeFiles(s *Setup, workdir string) (*fileLists, error) {
	copyDir := filepath.Join(workdir, "copies")
	if err := os.MkdirAll(copyDir, 0o755); err != nil {
		return nil, err
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	fl := &fileLists{pos: make(map[string]int)}
	for _, i := range s.Split.Reported {
		fl.reported = append(fl.reported, abs(s.Corpus[i].Path))
	}
	for k, i := range s.Split.Checked {
		p := abs(s.Corpus[i].Path)
		fl.checked = append(fl.checked, p)
		fl.pos[p] = k
	}
	for k, c := range s.Copies {
		p := filepath.Join(abs(copyDir), fmt.Sprintf("%05d-%s.eml", k, c.Kind))
		if err := os.WriteFile(p, c.Raw, 0o644); err != nil {
			return nil, fmt.Errorf("write copy: %w", err)
		}
		fl.checked = append(fl.checked, p)
		fl.pos[p] = len(s.Split.Checked) + k
	}
	writeList := func(name string, paths []string) (string, error) {
		p := filepath.Join(workdir, name)
		return p, os.WriteFile(p, []byte(strings.Join(paths, "\n")+"\n"), 0o644)
	}
	var err error
	if fl.reportedList, err = writeList("reported.txt", fl.reported); err != nil {
		return nil, err
	}
	if fl.checkedList, err = writeList("checked.txt", fl.checked); err != nil {
		return nil, err
	}
	return fl, nil
}

// RunCLI runs the same detection pass through the nddmilter binary, the
// way an administrator would: `nddmilter --store DIR report --reporter peers
// --files-from LIST` for the reported spam, then `nddmilter --store DIR
// check --json --files-from LIST` for the checked messages and the copies
// (written under workdir). It returns flags aligned like Run's and the
// wall-clock rates of the two commands (process start and store opening
// included, one process each). The store DIR is workdir/store and must not
// exist yet.
func RunCLI(ctx context.Context, bin string, s *Setup, workdir string) (*Result, error) {
	storeDir := filepath.Join(workdir, "store")
	if _, err := os.Stat(storeDir); err == nil {
		return nil, fmt.Errorf("nddmilter cli: store %s already exists", storeDir)
	}
	fl, err := writeFiles(s, workdir)
	if err != nil {
		return nil, fmt.Errorf("nddmilter cli: %w", err)
	}
	reported, checked, pos, repList, chkList := fl.reported, fl.checked, fl.pos, fl.reportedList, fl.checkedList

	r := &Result{Name: "nddmilter (CLI)"}
	var stderr bytes.Buffer
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, bin, "--store", storeDir, "report", "--reporter", Reporter, "--json", "--files-from", repList)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("nddmilter report: %w: %s", err, truncate(stderr.Bytes(), 500))
	}
	learnTime := time.Since(t0)
	r.Learned, r.Lost = parseReportSummary(out, len(reported))

	stderr.Reset()
	t0 = time.Now()
	cmd = exec.CommandContext(ctx, bin, "--store", storeDir, "check", "--json", "--files-from", chkList)
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	checkTime := time.Since(t0)
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("nddmilter check: %w: %s", err, truncate(stderr.Bytes(), 500))
	}
	flags := make([]bool, len(checked))
	answered := make([]bool, len(checked))
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line struct {
			Path   string `json:"path"`
			Action string `json:"action"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("nddmilter check: bad JSON line %q: %w", truncate(sc.Bytes(), 100), err)
		}
		k, ok := pos[line.Path]
		if !ok {
			// A file that starts with an mbox "From " line is read as an
			// mbox: its message(s) are named PATH#N.
			if h := strings.LastIndexByte(line.Path, '#'); h > 0 {
				k, ok = pos[line.Path[:h]]
			}
			if !ok {
				continue
			}
			if answered[k] {
				flags[k] = flags[k] || (line.Action != "" && line.Action != "accept")
				continue
			}
		}
		answered[k] = true
		seen++
		if line.Error != "" {
			r.Errors++
			if r.FirstError == nil {
				r.FirstError = fmt.Errorf("%s: %s", line.Path, line.Error)
			}
		}
		flags[k] = line.Action != "" && line.Action != "accept"
	}
	if missing := len(checked) - seen; missing > 0 {
		r.Errors += missing
		if r.FirstError == nil {
			r.FirstError = fmt.Errorf("nddmilter check: %d messages without an answer: %s", missing, truncate(stderr.Bytes(), 300))
		}
	}
	r.Checked = flags[:len(s.Split.Checked)]
	r.Copies = flags[len(s.Split.Checked):]
	r.Detection = Speed{LearnRate: rate(len(reported), learnTime), CheckRate: rate(len(checked), checkTime)}
	return r, nil
}

// parseReportSummary reads `nddmilter report --json`'s summary: used =
// read − skipped − errors. Without a readable summary every report counts
// as used.
func parseReportSummary(out []byte, n int) (used, lost int) {
	var sum struct {
		Read    int            `json:"messages_read"`
		Skipped map[string]int `json:"skipped"`
		Errors  int            `json:"errors"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &sum); err != nil || sum.Read == 0 {
		return n, 0
	}
	for _, v := range sum.Skipped {
		lost += v
	}
	lost += sum.Errors
	return sum.Read - lost, lost
}
