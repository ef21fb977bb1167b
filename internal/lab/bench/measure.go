// Package bench drives the speed benchmarks of `nddlab bench`: the
// milter under concurrent sessions (Milter) and the store's ingestion,
// lookups and disk use (Store). It belongs to the measurement lab: the
// daemon never links it.
package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/stats"
)

// percentile is the lab's one definition (nearest rank, internal/eval/stats).
func percentile(sorted []time.Duration, p float64) time.Duration {
	return stats.Percentile(sorted, p)
}

// fmtLatency sorts ds and renders its percentiles.
func fmtLatency(ds []time.Duration) string {
	slices.Sort(ds)
	return fmt.Sprintf("p50 %v  p90 %v  p99 %v  p99.9 %v  max %v",
		percentile(ds, 0.5).Round(time.Microsecond/10), percentile(ds, 0.9).Round(time.Microsecond/10),
		percentile(ds, 0.99).Round(time.Microsecond/10), percentile(ds, 0.999).Round(time.Microsecond/10),
		ds[len(ds)-1].Round(time.Microsecond/10))
}

// startCPUProfile starts a CPU profile into path; stop ends it.
func startCPUProfile(path, flag string) (stop func(), err error) {
	pf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return func() {
		pprof.StopCPUProfile()
		pf.Close()
	}, nil
}

// writeHeapProfile writes the allocation profile (go tool pprof
// -sample_index=alloc_space shows what the run allocated).
func writeHeapProfile(path string) error {
	mf, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	defer mf.Close()
	if err := pprof.Lookup("allocs").WriteTo(mf, 0); err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return mf.Close()
}

// procCPU reads the user and system CPU time of process pid from
// /proc/PID/stat (in clock ticks of 1/100 s, as Linux reports them).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	return time.Duration(u+s) * 10 * time.Millisecond, nil
}

// procMemory reads VmRSS and VmHWM from /proc/PID/status ("self": this
// process).
func procMemory(pid string) (rss, hwm string) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return "?", "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	rss, hwm = "?", "?"
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	return rss, hwm
}
