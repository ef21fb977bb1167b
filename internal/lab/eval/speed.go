package eval

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/lab/stats"
	"github.com/nddmilter/nddmilter/internal/mime"
	"github.com/nddmilter/nddmilter/internal/qgram"
)

// Machine describes the computer measurements were taken on.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryMiB int64  `json:"memory_mib"`
	Go        string `json:"go"`
	OS        string `json:"os"`
	Kernel    string `json:"kernel,omitempty"`
	// Load is /proc/loadavg's 1, 5 and 15 minute load averages when the
	// machine was described: a busy machine slows wall-clock figures.
	Load string `json:"load,omitempty"`
}

// DescribeMachine reads the CPU model and memory from /proc (Linux) and
// the Go version from the runtime.
func DescribeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemoryMiB = kb / 1024
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	if m.CPU == "" {
		m.CPU = "unknown"
	}
	return m
}

func (m Machine) String() string {
	s := fmt.Sprintf("%s, %d cores, %.1f GiB RAM, %s, kernel %s, %s", m.CPU, m.Cores, float64(m.MemoryMiB)/1024, m.OS, m.Kernel, m.Go)
	if m.Load != "" {
		s += ", load average " + m.Load
	}
	return s
}

// SpeedOptions configure RunSpeed. The zero value selects the defaults.
type SpeedOptions struct {
	// MinDuration is how long the pipeline loop runs at least (whole
	// passes over the corpus). Default 5s.
	MinDuration time.Duration
	// Children are the sibling commands run for the store and milter
	// figures, each an argument list for the nddlab binary (Executable).
	// Default: DefaultChildren. An empty non-nil slice runs none.
	Children [][]string
	// Executable is the nddlab binary. Default os.Executable().
	Executable string
	// Log receives progress and the children's stderr. Default: discard.
	Log *slog.Logger
}

// DefaultChildren are the benchmark commands RunSpeed runs by default.
var DefaultChildren = [][]string{
	{"bench", "store", "--signatures", "1000000", "--progress", "0"},
	{"bench", "store", "--signatures", "10000000", "--progress", "0"},
	// its own store folder: built once, then reused;
	// 4 sessions for the latency target (p99 < 5 ms), 16 for the
	// throughput with more work queued than cores
	{"bench", "milter", "--dir", ".cache/eval-bench-milter", "--sessions", "4"},
	{"bench", "milter", "--dir", ".cache/eval-bench-milter", "--sessions", "16"},
}

// Stage is the per-message cost of one step of the signature pipeline.
type Stage struct {
	Name       string  `json:"name"`
	MicrosPer  float64 `json:"micros_per_message"`
	MsgsPerSec float64 `json:"messages_per_second"`
}

// LatencyPoint is one percentile of a latency distribution.
type LatencyPoint struct {
	Percentile float64 `json:"percentile"`
	Millis     float64 `json:"ms"`
}

// ChildResult is the output of one benchmark command.
type ChildResult struct {
	Args    []string    `json:"args"`
	Lines   [][2]string `json:"lines"` // label, value
	MaxRSS  int64       `json:"max_rss_bytes"`
	Elapsed string      `json:"elapsed"`
	Error   string      `json:"error,omitempty"`
}

// SpeedResult is the outcome of RunSpeed.
type SpeedResult struct {
	Machine Machine `json:"machine"`
	// Messages and Bytes are processed per pass; Passes passes were run
	// with GOMAXPROCS=1.
	Messages int   `json:"messages"`
	Bytes    int64 `json:"bytes"`
	Passes   int   `json:"passes"`
	// MsgsPerSec is per second of process CPU time (GC included) with
	// GOMAXPROCS=1; WallMsgsPerSec per second of wall-clock time, which a
	// busy machine lowers.
	MsgsPerSec     float64 `json:"messages_per_cpu_second"`
	WallMsgsPerSec float64 `json:"messages_per_wall_second"`
	// CPUClock tells whether stages were timed with the thread CPU clock
	// (Linux) rather than the wall clock.
	CPUClock bool    `json:"cpu_clock"`
	MBPerSec float64 `json:"mb_per_second_per_core"`
	Stages   []Stage `json:"stages"`
	// Seeds are the costs of the seed methods (SpotSigs, PPJoin).
	Seeds []SeedCost `json:"seeds,omitempty"`
	// Latency holds percentiles by measurement: the pipeline's own per
	// message, and those parsed from the children's output.
	Latency  map[string][]LatencyPoint `json:"latency"`
	Children []ChildResult             `json:"children"`
	// Measured says when and by which command, when the result was read
	// from an earlier run rather than measured now.
	Measured string `json:"measured,omitempty"`
}

// RunSpeed measures the signature pipeline in process on one core, then
// runs the benchmark children.
func RunSpeed(ctx context.Context, c *Corpus, opts SpeedOptions) (*SpeedResult, error) {
	if opts.MinDuration <= 0 {
		opts.MinDuration = 5 * time.Second
	}
	if opts.Children == nil {
		opts.Children = DefaultChildren
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		return nil, fmt.Errorf("load lexicon: %w", err)
	}
	model, err := andd.DefaultModel()
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	im, err := imatchbag.NewSigner(lex, imatchbag.Options{})
	if err != nil {
		return nil, fmt.Errorf("I-Match signer: %w", err)
	}
	as, err := andd.NewSigner(model, lex)
	if err != nil {
		return nil, fmt.Errorf("ANDD signer: %w", err)
	}
	res := &SpeedResult{Machine: DescribeMachine(), Messages: len(c.Docs), Latency: map[string][]LatencyPoint{}}
	for i := range c.Docs {
		res.Bytes += int64(len(c.Docs[i].Raw))
	}

	// One core: GOMAXPROCS=1 and this goroutine locked to its thread, whose
	// CPU clock times the stages (other processes on a busy machine do not
	// inflate it); the process CPU time, GC included, gives the throughput.
	prev := runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	var stage [5]time.Duration
	qs := qgram.NewSketcher(qgram.SketchOptions{})
	var per []time.Duration
	start, cpu0 := time.Now(), processCPU()
	for time.Since(start) < opts.MinDuration || res.Passes == 0 {
		if err := ctx.Err(); err != nil {
			runtime.UnlockOSThread()
			runtime.GOMAXPROCS(prev)
			return nil, err
		}
		for i := range c.Docs {
			t0 := threadCPU()
			doc := mime.Parse(c.Docs[i].Raw, mime.Options{})
			t1 := threadCPU()
			// The engine's path (internal/pipeline): one analysis pass
			// serves both signature families.
			terms := mime.Analyze(doc, mime.TokenOptions{})
			t2 := threadCPU()
			for _, s := range im.SignSorted(terms.Sorted).Signatures {
				_ = s.AppendKey(nil)
			}
			t3 := threadCPU()
			if sk := as.SketchTerms(doc, terms); !sk.IsEmpty() {
				_ = as.BandKeys(sk)
			}
			t4 := threadCPU()
			if sk, ok := qs.Sketch(doc.Subject, "\n", doc.Text); ok {
				_ = qgram.BandKeys(&sk)
			}
			t5 := threadCPU()
			stage[0] += t1 - t0
			stage[1] += t2 - t1
			stage[2] += t3 - t2
			stage[3] += t4 - t3
			stage[4] += t5 - t4
			per = append(per, t5-t0)
		}
		res.Passes++
	}
	wall, cpu := time.Since(start), processCPU()-cpu0
	runtime.UnlockOSThread()
	runtime.GOMAXPROCS(prev)
	n := float64(res.Passes * len(c.Docs))
	res.WallMsgsPerSec = n / wall.Seconds()
	res.MsgsPerSec = n / cpu.Seconds()
	res.MBPerSec = float64(res.Bytes) * float64(res.Passes) / cpu.Seconds() / 1e6
	res.CPUClock = haveCPUClock
	for i, name := range []string{"MIME parse and normalize", "tokenize, unique terms and term statistics", "I-Match signatures (1 + 10 bags)", "ANDD weights, sketch and band keys", "q-gram sketch and band keys"} {
		us := stage[i].Seconds() * 1e6 / n
		res.Stages = append(res.Stages, Stage{Name: name, MicrosPer: us, MsgsPerSec: 1e6 / us})
	}
	res.Latency["signature pipeline (1 core)"] = percentiles(per)
	res.Seeds = seedSpeed(c)
	opts.Log.Info("pipeline", "msgs_per_cpu_sec", int(res.MsgsPerSec), "msgs_per_wall_sec", int(res.WallMsgsPerSec), "passes", res.Passes)

	exe := opts.Executable
	if exe == "" && len(opts.Children) > 0 {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find nddlab binary: %w", err)
		}
	}
	for _, args := range opts.Children {
		opts.Log.Info("running", "command", "nddlab "+strings.Join(args, " "))
		cr := runChild(ctx, exe, args, opts.Log)
		res.Children = append(res.Children, cr)
		for _, l := range cr.Lines {
			if pts := parsePercentiles(l[1]); len(pts) > 0 {
				res.Latency[strings.Join(args[1:2], " ")+" "+l[0]+sizeTag(args)] = pts
			}
		}
	}
	return res, nil
}

func sizeTag(args []string) string {
	for i, a := range args {
		if a == "--signatures" && i+1 < len(args) {
			if n, err := strconv.Atoi(args[i+1]); err == nil && n >= 1_000_000 {
				return fmt.Sprintf(" (%dM)", n/1_000_000)
			}
			return " (" + args[i+1] + ")"
		}
	}
	return ""
}

func percentiles(ds []time.Duration) []LatencyPoint {
	if len(ds) == 0 {
		return nil
	}
	ps := []float64{50, 90, 99, 99.9}
	qs := make([]float64, len(ps))
	for i, p := range ps {
		qs[i] = p / 100
	}
	var out []LatencyPoint
	for i, d := range stats.Percentiles(ds, qs...) {
		out = append(out, LatencyPoint{Percentile: ps[i], Millis: d.Seconds() * 1000})
	}
	return out
}

var pctRE = regexp.MustCompile(`\bp(\d+(?:\.\d+)?)[ =:]+([0-9.]+(?:ns|µs|us|ms|s|m))`)

// parsePercentiles extracts "p50 1.2ms  p99 3ms" style figures.
func parsePercentiles(s string) []LatencyPoint {
	var out []LatencyPoint
	for _, m := range pctRE.FindAllStringSubmatch(s, -1) {
		p, err1 := strconv.ParseFloat(m[1], 64)
		d, err2 := time.ParseDuration(strings.Replace(m[2], "µs", "us", 1))
		if err1 == nil && err2 == nil {
			out = append(out, LatencyPoint{Percentile: p, Millis: d.Seconds() * 1000})
		}
	}
	return out
}

// runChild runs one benchmark command and splits its output into
// (label, value) lines at the first run of two or more spaces.
func runChild(ctx context.Context, exe string, args []string, log *slog.Logger) ChildResult {
	cr := ChildResult{Args: args}
	start := time.Now()
	cmd := exec.CommandContext(ctx, exe, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = logWriter{log}
	err := cmd.Run()
	cr.Elapsed = time.Since(start).Round(time.Second).String()
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cr.MaxRSS = ru.Maxrss * 1024 // KiB on Linux
		}
	}
	if err != nil {
		cr.Error = err.Error()
	}
	for _, l := range strings.Split(out.String(), "\n") {
		l = strings.TrimRight(l, " \t\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if i := strings.Index(l, "  "); i > 0 {
			cr.Lines = append(cr.Lines, [2]string{strings.TrimSpace(l[:i]), strings.TrimSpace(l[i:])})
		} else {
			cr.Lines = append(cr.Lines, [2]string{"", strings.TrimSpace(l)})
		}
	}
	return cr
}

type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l != "" {
			w.log.Info("child", "stderr", l)
		}
	}
	return len(p), nil
}

// WriteMarkdown prints the speed table as Markdown.
func (r *SpeedResult) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s.\n\n", r.Machine)
	if r.Measured != "" {
		fmt.Fprintf(w, "Measured %s.\n\n", r.Measured)
	}
	fmt.Fprintln(w, "| measurement | result |")
	fmt.Fprintln(w, "| --- | --- |")
	fmt.Fprintf(w, "| signature pipeline, 1 core (GOMAXPROCS=1), %d messages × %d passes | **%.0f messages/s per CPU-second** (%.1f MB/s); %.0f messages/s of wall-clock time at load average %s |\n",
		r.Messages, r.Passes, r.MsgsPerSec, r.MBPerSec, r.WallMsgsPerSec, r.Machine.Load)
	clock := "thread CPU time"
	if !r.CPUClock {
		clock = "wall-clock time"
	}
	for _, s := range r.Stages {
		fmt.Fprintf(w, "| · %s | %.0f µs/message (%s) |\n", s.Name, s.MicrosPer, clock)
	}
	if pts := r.Latency["signature pipeline (1 core)"]; len(pts) > 0 {
		fmt.Fprintf(w, "| · per-message pipeline time | %s (%s) |\n", fmtPoints(pts), clock)
	}
	defer writeSeedCosts(w, r.Seeds, clock)
	for _, c := range r.Children {
		cmd := "nddlab " + strings.Join(c.Args, " ")
		if c.Error != "" {
			fmt.Fprintf(w, "| `%s` | not available: %s |\n", cmd, strings.ReplaceAll(c.Error, "|", "/"))
			continue
		}
		fmt.Fprintf(w, "| `%s` | ran %s, max resident memory %.0f MiB |\n", cmd, c.Elapsed, float64(c.MaxRSS)/(1<<20))
		for _, l := range c.Lines {
			if markdownOmits(l[0]) {
				continue
			}
			fmt.Fprintf(w, "| · %s | %s |\n", strings.ReplaceAll(l[0], "|", "/"), strings.ReplaceAll(l[1], "|", "/"))
		}
	}
}

// markdownOmits reports the benchmark lines the tables leave out: the
// temporary store's path, the noise probe, the cache warm-up and the
// record cache's hit rate say nothing about the product, and a sample
// verdict is not a figure (--json keeps them all).
func markdownOmits(line string) bool {
	switch line {
	case "store", "noise probe", "warm-up", "record cache", "sample tag":
		return true
	}
	return false
}

func fmtPoints(pts []LatencyPoint) string {
	var s []string
	for _, p := range pts {
		s = append(s, fmt.Sprintf("p%g %.3f ms", p.Percentile, p.Millis))
	}
	return strings.Join(s, ", ")
}
