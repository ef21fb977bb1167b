package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nddmilter/nddmilter/internal/store"
)

// benchStoreFlags are the flags of `nddmilter bench store`.
type benchStoreFlags struct {
	signatures    int
	dir           string
	reuse         bool
	appendSigs    int
	imatchKeys    int
	anddKeys      int
	batch         int
	workers       int
	repeat        float64
	lookups       int
	lookupKeys    int
	singleReports int
	compact       bool
	cpuProfile    string
	ingestProfile string
	warm          bool
	noSync        bool
	progressEvery time.Duration
}

func newBenchStoreCmd(gf *globalFlags) *cobra.Command {
	f := &benchStoreFlags{}
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Build a store of synthetic signatures and measure lookups, ingestion and disk use",
		Long: `Builds a store holding --signatures index keys through bulk ingestion
(campaigns of --imatch-keys 22-byte I-Match keys and --andd-keys 12-byte ANDD
band keys, one spam report each, plus --repeat of reports joining an existing
campaign), then measures:

  ingestion   reports/s and signatures/s through ReportBatch (fsync per batch)
  disk        bytes on disk per signature
  lookup      latency of Store.Lookup for one message's --lookup-keys keys:
              messages of a known campaign and unknown messages (p50/p99)
  report      latency of single atomic Report calls (fsync each)

Without --dir the store is built in a temporary directory and removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBenchStore(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.signatures, "signatures", 10_000_000, "number of index keys (signatures) to build")
	fl.StringVar(&f.dir, "dir", "", "store directory (default: a temporary directory, removed afterwards)")
	fl.BoolVar(&f.reuse, "reuse", false, "measure an existing store built earlier by this command in --dir, skip ingestion")
	fl.IntVar(&f.appendSigs, "append", 0, "with --reuse: first ingest this many more signatures (new campaigns numbered after the --signatures ones) into the existing store")
	fl.IntVar(&f.imatchKeys, "imatch-keys", 6, "I-Match keys (22 bytes) per campaign")
	fl.IntVar(&f.anddKeys, "andd-keys", 5, "ANDD band keys (12 bytes) per campaign")
	fl.IntVar(&f.batch, "batch", 1000, "reports per ReportBatch call")
	fl.IntVar(&f.workers, "workers", 4, "concurrent ingesting goroutines (their commits share fsyncs)")
	fl.Float64Var(&f.repeat, "repeat", 0.1, "fraction of reports that repeat a known campaign (joins)")
	fl.IntVar(&f.lookups, "lookups", 50_000, "messages to look up")
	fl.IntVar(&f.lookupKeys, "lookup-keys", 16, "keys per looked-up message (11+b)")
	fl.IntVar(&f.singleReports, "single-reports", 500, "single atomic reports to time")
	fl.BoolVar(&f.warm, "warm", true, "read the table files into the page cache before timing lookups")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the lookup phase to FILE")
	fl.StringVar(&f.ingestProfile, "ingest-cpuprofile", "", "write a CPU profile of the ingestion phase to FILE")
	fl.BoolVar(&f.compact, "compact", false, "compact the store after building it (and measure its size again)")
	fl.BoolVar(&f.noSync, "no-sync", false, "do not fsync commits (faster, not crash-safe)")
	fl.DurationVar(&f.progressEvery, "progress", 10*time.Second, "progress report period on stderr (0: none)")
	return cmd
}

// benchKey fills a deterministic synthetic key: the j-th key of campaign
// c. I-Match-like keys are 22 bytes (version, family, lexicon id, bag,
// 16-byte hash, pad); ANDD band keys are 12 bytes (version, family, band,
// 8-byte hash).
func benchKey(seed uint64, c, j int, imatch bool) []byte {
	h1 := mix64(seed ^ uint64(c)<<20 ^ uint64(j))
	h2 := mix64(h1 ^ 0x9e3779b97f4a7c15)
	if imatch {
		k := make([]byte, 0, 22)
		k = append(k, 1, 'i', 0, 1, byte(j))
		k = binary.BigEndian.AppendUint64(k, h1)
		k = binary.BigEndian.AppendUint64(k, h2)
		return append(k, 0)
	}
	k := make([]byte, 0, 12)
	k = append(k, 1, 'a')
	k = binary.BigEndian.AppendUint16(k, uint16(j))
	return binary.BigEndian.AppendUint64(k, h1)
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

const benchSeed = 0x6e64646d696c7472

func (f *benchStoreFlags) campaignKeys(c int) [][]byte {
	ks := make([][]byte, 0, f.imatchKeys+f.anddKeys)
	for j := 0; j < f.imatchKeys; j++ {
		ks = append(ks, benchKey(benchSeed, c, j, true))
	}
	for j := 0; j < f.anddKeys; j++ {
		ks = append(ks, benchKey(benchSeed, c, f.imatchKeys+j, false))
	}
	return ks
}

// dirSize returns the bytes allocated on disk by the files under dir
// (sparse, preallocated log files count only what they use).
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// warmFiles reads every table file under dir into the page cache.
func warmFiles(dir string) (int64, error) {
	var n int64
	buf := make([]byte, 1<<20)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() || filepath.Ext(path) != ".sst" {
			return err
		}
		fh, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed by a compaction meanwhile
		}
		if err != nil {
			return err
		}
		defer fh.Close()
		m, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{fh}, buf)
		n += m
		return err
	})
	return n, err
}

// cpuTime is the CPU time (user+system) used by this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

func fmtLatency(ds []time.Duration) string {
	slices.Sort(ds)
	return fmt.Sprintf("p50 %v  p90 %v  p99 %v  p99.9 %v  max %v",
		percentile(ds, 0.5).Round(time.Microsecond/10), percentile(ds, 0.9).Round(time.Microsecond/10),
		percentile(ds, 0.99).Round(time.Microsecond/10), percentile(ds, 0.999).Round(time.Microsecond/10),
		ds[len(ds)-1].Round(time.Microsecond/10))
}

func runBenchStore(ctx context.Context, f *benchStoreFlags, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	perCampaign := f.imatchKeys + f.anddKeys
	if perCampaign <= 0 || f.signatures <= 0 || f.batch <= 0 || f.lookupKeys < perCampaign {
		return errors.New("bench store: need --signatures > 0, --batch > 0, keys per campaign > 0 and --lookup-keys ≥ keys per campaign")
	}
	dir := f.dir
	if dir == "" {
		if f.reuse {
			return errors.New("bench store: --reuse needs --dir")
		}
		tmp, err := os.MkdirTemp("", "nddmilter-bench-store-")
		if err != nil {
			return fmt.Errorf("bench store: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := store.Options{Logger: log, NoSyncWrites: f.noSync, Expiry: -1}
	st, err := store.Open(dir, opts)
	if err != nil {
		return fmt.Errorf("bench store: %w", err)
	}
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	campaigns := (f.signatures + perCampaign - 1) / perCampaign
	fmt.Fprintf(out, "store           %s\n", dir)
	fmt.Fprintf(out, "shape           %d campaigns × %d keys (%d I-Match 22 B + %d ANDD 12 B) = %d signatures\n",
		campaigns, perCampaign, f.imatchKeys, f.anddKeys, campaigns*perCampaign)

	// Ingestion creates the campaigns base..base+count-1.
	base, count := 0, campaigns
	if f.reuse {
		s, err := st.Stats(ctx)
		if err != nil {
			return err
		}
		if s.Keys < int64(campaigns*perCampaign) {
			return fmt.Errorf("bench store: --reuse: %s holds %d signatures, want %d", dir, s.Keys, campaigns*perCampaign)
		}
		base, count = campaigns, (max(f.appendSigs, 0)+perCampaign-1)/perCampaign
		if count > 0 {
			fmt.Fprintf(out, "append          %d campaigns (%d signatures) to the %d signatures in the store\n",
				count, count*perCampaign, s.Keys)
		}
	}
	if count > 0 {
		if f.ingestProfile != "" {
			pf, err := os.Create(f.ingestProfile)
			if err != nil {
				return fmt.Errorf("bench store: %w", err)
			}
			defer pf.Close()
			if err := pprof.StartCPUProfile(pf); err != nil {
				return fmt.Errorf("bench store: %w", err)
			}
		}
		start, cpu0 := time.Now(), cpuTime()
		var reports, created atomic.Int64
		at := time.Now().Add(-time.Hour)
		workers := max(f.workers, 1)
		ictx, cancel := context.WithCancel(ctx)
		defer cancel()
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			// Worker w creates the campaigns c ≡ w (mod workers) and
			// repeats only its own, so workers never conflict.
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(1, uint64(w)))
				mine := 0
				total := (count - w + workers - 1) / workers
				batch := make([]store.ReportInput, 0, f.batch)
				for mine < total {
					batch = batch[:0]
					for len(batch) < f.batch && mine < total {
						var c int
						if mine > 0 && rng.Float64() < f.repeat {
							c = base + w + workers*rng.IntN(mine) // a copy of a known campaign
						} else {
							c = base + w + workers*mine
							mine++
							created.Add(1)
						}
						batch = append(batch, store.ReportInput{
							Time: at, Kind: store.KindSpam, Reporter: fmt.Sprintf("user%d@example.org", rng.IntN(5000)),
							Keys: f.campaignKeys(c), Sketch: binary.BigEndian.AppendUint64(nil, mix64(uint64(c))),
							Create: true, Index: true, Subject: fmt.Sprintf("campaign %d", c), From: "spam@example.com",
						})
					}
					if _, err := st.ReportBatch(ictx, batch); err != nil {
						errs <- fmt.Errorf("bench store: ingest: %w", err)
						cancel()
						return
					}
					reports.Add(int64(len(batch)))
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		tick := time.NewTicker(max(f.progressEvery, time.Second))
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-tick.C:
				if f.progressEvery > 0 {
					fmt.Fprintf(os.Stderr, "  ingested %d reports, %d/%d campaigns, %.0f reports/s\n",
						reports.Load(), created.Load(), count, float64(reports.Load())/time.Since(start).Seconds())
				}
			}
		}
		tick.Stop()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		nrep := reports.Load()
		el, cpu := time.Since(start), cpuTime()-cpu0
		if f.ingestProfile != "" {
			pprof.StopCPUProfile()
		}
		fmt.Fprintf(out, "ingestion       %d reports in %v: %.0f reports/s, %.0f signatures/s (ReportBatch of %d, fsync %v)\n",
			nrep, el.Round(time.Millisecond), float64(nrep)/el.Seconds(),
			float64(count*perCampaign)/el.Seconds(), f.batch, !f.noSync)
		fmt.Fprintf(out, "ingestion       %d concurrent writers\n", workers)
		fmt.Fprintf(out, "ingestion CPU   %v: %.1f µs CPU per report (%.0f reports/s per busy core), %.0f%% of %d cores\n",
			cpu.Round(time.Millisecond), float64(cpu.Microseconds())/float64(nrep),
			float64(nrep)/cpu.Seconds(), 100*cpu.Seconds()/el.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU())
	}
	campaigns = base + count
	sigs := int64(campaigns * perCampaign)
	// Disk use is measured with the store closed (memtables flushed, no
	// preallocated log files).
	report := func(label string) error {
		if err := st.Close(); err != nil {
			return err
		}
		ds, err := dirSize(dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "disk %-10s %d bytes (%.1f MiB), %.1f bytes/signature\n", label, ds, float64(ds)/(1<<20), float64(ds)/float64(sigs))
		st, err = store.Open(dir, opts)
		return err
	}
	if err := report("(built)"); err != nil {
		return err
	}
	if f.compact {
		t := time.Now()
		if _, err := st.Compact(ctx); err != nil {
			return err
		}
		fmt.Fprintf(out, "compaction      %v\n", time.Since(t).Round(time.Millisecond))
		if err := report("(compact)"); err != nil {
			return err
		}
	}

	// Lookups.
	if f.warm {
		// A running milter's store is in the page cache; a freshly opened
		// one is not. Read the table files once so that the figures are
		// those of the steady state (use --warm=false for a cold store).
		t := time.Now()
		n, err := warmFiles(dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "warm-up         read %d MiB of table files in %v\n", n>>20, time.Since(t).Round(time.Millisecond))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var known, unknown []time.Duration
	msgs := make([][][]byte, f.lookups)
	for i := range msgs {
		msg := make([][]byte, 0, f.lookupKeys)
		if i%2 == 0 { // a copy of a known campaign, plus unknown keys
			msg = append(msg, f.campaignKeys(rng.IntN(campaigns))...)
		}
		for len(msg) < f.lookupKeys {
			msg = append(msg, benchKey(benchSeed^0xabcdef, rng.Int(), len(msg), len(msg) < f.imatchKeys))
		}
		msgs[i] = msg
	}
	// The probe is a fixed CPU task timed between lookups: its spread is
	// the scheduling noise of the machine at that moment.
	var probes []time.Duration
	probeBuf := make([]byte, 128<<10)
	runtime.GC()
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pf.Close()
	}
	found, cpu0 := 0, cpuTime()
	var probeCPU time.Duration
	for i, msg := range msgs {
		isKnown := i%2 == 0
		t := time.Now()
		hits, err := st.Lookup(ctx, msg)
		d := time.Since(t)
		if err != nil {
			return err
		}
		if isKnown {
			known = append(known, d)
			if len(hits) == perCampaign {
				found++
			}
		} else {
			unknown = append(unknown, d)
			if len(hits) != 0 {
				return fmt.Errorf("bench store: random keys found in the store (%d hits)", len(hits))
			}
		}
		c := cpuTime()
		t = time.Now()
		probeSum := sha256.Sum256(probeBuf)
		probeBuf[0] = probeSum[0]
		probes = append(probes, time.Since(t))
		probeCPU += cpuTime() - c
	}
	if found != len(known) {
		return fmt.Errorf("bench store: only %d of %d known messages found all their keys", found, len(known))
	}
	lookupCPU := cpuTime() - cpu0 - probeCPU
	if f.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	all := append(slices.Clone(known), unknown...)
	fmt.Fprintf(out, "lookup known    %d msgs × %d keys: %s\n", len(known), f.lookupKeys, fmtLatency(known))
	fmt.Fprintf(out, "lookup unknown  %d msgs × %d keys: %s\n", len(unknown), f.lookupKeys, fmtLatency(unknown))
	fmt.Fprintf(out, "lookup all      %d msgs: %s; %.1f µs CPU per message\n", len(all), fmtLatency(all),
		float64(lookupCPU.Microseconds())/float64(len(all)))
	fmt.Fprintf(out, "noise probe     fixed CPU task (SHA-256 of 128 KiB) timed between lookups: %s\n", fmtLatency(probes))

	// Single atomic reports (the API path).
	if f.singleReports > 0 {
		var ds []time.Duration
		for i := 0; i < f.singleReports; i++ {
			c := rng.IntN(campaigns)
			in := store.ReportInput{Time: time.Now(), Kind: store.KindSpam, Reporter: fmt.Sprintf("single%d", i),
				Keys: f.campaignKeys(c), Create: true, Index: true}
			if i%2 == 1 {
				in.Keys = [][]byte{benchKey(benchSeed^0x5151, i, 0, true), benchKey(benchSeed^0x5151, i, 1, false)}
			}
			t := time.Now()
			if _, err := st.Report(ctx, in); err != nil {
				return err
			}
			ds = append(ds, time.Since(t))
		}
		fmt.Fprintf(out, "report single   %d atomic reports (fsync %v): %s\n", len(ds), !f.noSync, fmtLatency(ds))
	}
	err = st.Close()
	st = nil
	return err
}
