package bench

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
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nddmilter/nddmilter/internal/lab/cputime"
	"github.com/nddmilter/nddmilter/internal/store"
)

// StoreOptions configure Store (the flags of `nddlab bench store`,
// whose defaults are documented there).
type StoreOptions struct {
	Signatures    int    // index keys to build
	Dir           string // store directory; "" for a temporary one
	Reuse         bool   // measure the store in Dir, skip ingestion
	Append        int    // with Reuse: signatures to ingest first
	IMatchKeys    int    // 22-byte keys per campaign
	ANDDKeys      int    // 12-byte keys per campaign
	Batch         int    // reports per ReportBatch
	Workers       int    // concurrent ingesting goroutines
	Repeat        float64
	Lookups       int // messages looked up
	LookupKeys    int // keys per looked-up message
	SingleReports int // single atomic reports timed
	Compact       bool
	CPUProfile    string // of the lookups
	IngestProfile string // of the ingestion
	Warm          bool   // read the table files before the lookups
	NoSync        bool
	Progress      time.Duration // period of progress lines on stderr; 0 for none
}

// synthKey fills a deterministic synthetic key: the j-th key of campaign
// c, of the sizes of the signature families' keys. The store holds keys as
// opaque bytes: their layout does not matter to what is measured here.
func synthKey(seed uint64, c, j int, long bool) []byte {
	h1 := mix64(seed ^ uint64(c)<<20 ^ uint64(j))
	h2 := mix64(h1 ^ 0x9e3779b97f4a7c15)
	if long {
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

const storeSeed = 0x6e64646d696c7472

func (o *StoreOptions) perCampaign() int { return o.IMatchKeys + o.ANDDKeys }

func (o *StoreOptions) campaignKeys(c int) [][]byte {
	ks := make([][]byte, 0, o.perCampaign())
	for j := 0; j < o.IMatchKeys; j++ {
		ks = append(ks, synthKey(storeSeed, c, j, true))
	}
	for j := 0; j < o.ANDDKeys; j++ {
		ks = append(ks, synthKey(storeSeed, c, o.IMatchKeys+j, false))
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

// storeRun is one run of Store.
type storeRun struct {
	o    *StoreOptions
	out  io.Writer
	dir  string
	opts store.Options
	st   *store.Badger
	// campaigns are those in the store after ingestion.
	campaigns int
	// rng draws the looked-up and the single-reported campaigns.
	rng *rand.Rand
}

// Store builds a store of synthetic signatures (or reuses one) and
// measures ingestion, disk use, lookups and single reports, printing to
// out.
func Store(ctx context.Context, o StoreOptions, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	per := o.perCampaign()
	if per <= 0 || o.Signatures <= 0 || o.Batch <= 0 || o.LookupKeys < per {
		return errors.New("bench store: need --signatures > 0, --batch > 0, keys per campaign > 0 and --lookup-keys ≥ keys per campaign")
	}
	r := &storeRun{o: &o, out: out, dir: o.Dir, rng: rand.New(rand.NewPCG(3, 4))}
	if r.dir == "" {
		if o.Reuse {
			return errors.New("bench store: --reuse needs --dir")
		}
		tmp, err := os.MkdirTemp("", "nddmilter-bench-store-")
		if err != nil {
			return fmt.Errorf("bench store: %w", err)
		}
		defer os.RemoveAll(tmp)
		r.dir = tmp
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r.opts = store.Options{Logger: log, NoSyncWrites: o.NoSync, Expiry: -1}
	var err error
	if r.st, err = store.Open(r.dir, r.opts); err != nil {
		return fmt.Errorf("bench store: %w", err)
	}
	defer func() {
		if r.st != nil {
			r.st.Close()
		}
	}()
	if err := r.build(ctx); err != nil {
		return err
	}
	if err := r.measureDisk(ctx); err != nil {
		return err
	}
	if err := r.lookups(ctx); err != nil {
		return err
	}
	if err := r.singleReports(ctx); err != nil {
		return err
	}
	err = r.st.Close()
	r.st = nil
	return err
}

// build ingests the campaigns (or the appended ones with Reuse).
func (r *storeRun) build(ctx context.Context) error {
	o, out, per := r.o, r.out, r.o.perCampaign()
	campaigns := (o.Signatures + per - 1) / per
	fmt.Fprintf(out, "store           %s\n", r.dir)
	fmt.Fprintf(out, "shape           %d campaigns × %d keys (%d I-Match 22 B + %d ANDD 12 B) = %d signatures\n",
		campaigns, per, o.IMatchKeys, o.ANDDKeys, campaigns*per)

	// Ingestion creates the campaigns base..base+count-1.
	base, count := 0, campaigns
	if o.Reuse {
		s, err := r.st.Stats(ctx)
		if err != nil {
			return err
		}
		if s.Keys < int64(campaigns*per) {
			return fmt.Errorf("bench store: --reuse: %s holds %d signatures, want %d", r.dir, s.Keys, campaigns*per)
		}
		base, count = campaigns, (max(o.Append, 0)+per-1)/per
		if count > 0 {
			fmt.Fprintf(out, "append          %d campaigns (%d signatures) to the %d signatures in the store\n",
				count, count*per, s.Keys)
		}
	}
	r.campaigns = base + count
	if count == 0 {
		return nil
	}
	return r.ingest(ctx, base, count)
}

// ingest creates the campaigns base..base+count-1 (and repeats) with
// o.Workers concurrent writers, and prints the rates.
func (r *storeRun) ingest(ctx context.Context, base, count int) error {
	o, out := r.o, r.out
	if o.IngestProfile != "" {
		stop, err := startCPUProfile(o.IngestProfile, "bench store")
		if err != nil {
			return err
		}
		defer stop()
	}
	start, cpu0 := time.Now(), cputime.Process()
	var reports, created atomic.Int64
	workers := max(o.Workers, 1)
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.ingestWorker(ictx, w, workers, base, count, &reports, &created); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	r.progress(done, start, count, &reports, &created)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	nrep := reports.Load()
	el, cpu := time.Since(start), cputime.Process()-cpu0
	fmt.Fprintf(out, "ingestion       %d reports in %v: %.0f reports/s, %.0f signatures/s (ReportBatch of %d, fsync %v)\n",
		nrep, el.Round(time.Millisecond), float64(nrep)/el.Seconds(),
		float64(count*o.perCampaign())/el.Seconds(), o.Batch, !o.NoSync)
	fmt.Fprintf(out, "ingestion       %d concurrent writers\n", workers)
	fmt.Fprintf(out, "ingestion CPU   %v: %.1f µs CPU per report (%.0f reports/s per busy core), %.0f%% of %d cores\n",
		cpu.Round(time.Millisecond), float64(cpu.Microseconds())/float64(nrep),
		float64(nrep)/cpu.Seconds(), 100*cpu.Seconds()/el.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU())
	return nil
}

// ingestWorker creates the campaigns c ≡ w (mod workers) and repeats only
// its own, so that workers never conflict.
func (r *storeRun) ingestWorker(ctx context.Context, w, workers, base, count int, reports, created *atomic.Int64) error {
	o := r.o
	rng := rand.New(rand.NewPCG(1, uint64(w)))
	at := time.Now().Add(-time.Hour)
	mine := 0
	total := (count - w + workers - 1) / workers
	batch := make([]store.ReportInput, 0, o.Batch)
	for mine < total {
		batch = batch[:0]
		for len(batch) < o.Batch && mine < total {
			var c int
			if mine > 0 && rng.Float64() < o.Repeat {
				c = base + w + workers*rng.IntN(mine) // a copy of a known campaign
			} else {
				c = base + w + workers*mine
				mine++
				created.Add(1)
			}
			batch = append(batch, store.ReportInput{
				Time: at, Kind: store.KindSpam, Reporter: fmt.Sprintf("user%d@example.org", rng.IntN(5000)),
				Keys: o.campaignKeys(c), Sketch: binary.BigEndian.AppendUint64(nil, mix64(uint64(c))),
				Create: true, Index: true, Subject: fmt.Sprintf("campaign %d", c), From: "spam@example.com",
			})
		}
		if _, err := r.st.ReportBatch(ctx, batch); err != nil {
			return fmt.Errorf("bench store: ingest: %w", err)
		}
		reports.Add(int64(len(batch)))
	}
	return nil
}

// progress prints the ingestion's progress on stderr until done.
func (r *storeRun) progress(done <-chan struct{}, start time.Time, count int, reports, created *atomic.Int64) {
	tick := time.NewTicker(max(r.o.Progress, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if r.o.Progress > 0 {
				fmt.Fprintf(os.Stderr, "  ingested %d reports, %d/%d campaigns, %.0f reports/s\n",
					reports.Load(), created.Load(), count, float64(reports.Load())/time.Since(start).Seconds())
			}
		}
	}
}

// measureDisk prints the disk use, with the store closed (memtables
// flushed, no preallocated log files), and after a compaction when asked.
func (r *storeRun) measureDisk(ctx context.Context) error {
	sigs := int64(r.campaigns * r.o.perCampaign())
	report := func(label string) error {
		if err := r.st.Close(); err != nil {
			return err
		}
		ds, err := dirSize(r.dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.out, "disk %-10s %d bytes (%.1f MiB), %.1f bytes/signature\n", label, ds, float64(ds)/(1<<20), float64(ds)/float64(sigs))
		t := time.Now()
		if r.st, err = store.Open(r.dir, r.opts); err != nil {
			return err
		}
		fmt.Fprintf(r.out, "open            %v (lookups at full speed from then on)\n", time.Since(t).Round(time.Millisecond))
		return nil
	}
	if err := report("(built)"); err != nil {
		return err
	}
	if !r.o.Compact {
		return nil
	}
	t := time.Now()
	if _, err := r.st.Compact(ctx); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "compaction      %v\n", time.Since(t).Round(time.Millisecond))
	return report("(compact)")
}

// lookupMessages returns the key sets looked up: even ones are copies of a
// known campaign plus unknown keys, odd ones unknown.
func (r *storeRun) lookupMessages() [][][]byte {
	o, rng := r.o, r.rng
	msgs := make([][][]byte, o.Lookups)
	for i := range msgs {
		msg := make([][]byte, 0, o.LookupKeys)
		if i%2 == 0 {
			msg = append(msg, o.campaignKeys(rng.IntN(r.campaigns))...)
		}
		for len(msg) < o.LookupKeys {
			msg = append(msg, synthKey(storeSeed^0xabcdef, rng.Int(), len(msg), len(msg) < o.IMatchKeys))
		}
		msgs[i] = msg
	}
	return msgs
}

// lookups times Store.Lookup of known and unknown messages.
func (r *storeRun) lookups(ctx context.Context) error {
	o, out := r.o, r.out
	if o.Warm {
		// A running milter's store is in the page cache; a freshly opened
		// one is not. Read the table files once so that the figures are
		// those of the steady state (use --warm=false for a cold store).
		t := time.Now()
		n, err := warmFiles(r.dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "warm-up         read %d MiB of table files in %v\n", n>>20, time.Since(t).Round(time.Millisecond))
	}
	msgs := r.lookupMessages()
	runtime.GC()
	if o.CPUProfile != "" {
		stop, err := startCPUProfile(o.CPUProfile, "--cpuprofile")
		if err != nil {
			return err
		}
		defer stop()
	}
	lt, err := r.timeLookups(ctx, msgs)
	if err != nil {
		return err
	}
	all := append(slices.Clone(lt.known), lt.unknown...)
	fmt.Fprintf(out, "lookup known    %d msgs × %d keys: %s\n", len(lt.known), o.LookupKeys, fmtLatency(lt.known))
	fmt.Fprintf(out, "lookup unknown  %d msgs × %d keys: %s\n", len(lt.unknown), o.LookupKeys, fmtLatency(lt.unknown))
	fmt.Fprintf(out, "lookup all      %d msgs: %s; %.1f µs CPU per message\n", len(all), fmtLatency(all),
		float64(lt.cpu.Microseconds())/float64(len(all)))
	fmt.Fprintf(out, "noise probe     fixed CPU task (SHA-256 of 128 KiB) timed between lookups: %s\n", fmtLatency(lt.probes))
	return nil
}

type lookupTimes struct {
	known, unknown, probes []time.Duration
	cpu                    time.Duration // of the lookups, probes excluded
}

// timeLookups looks the messages up one by one. Between lookups, a fixed
// CPU task is timed: its spread is the scheduling noise of the machine at
// that moment.
func (r *storeRun) timeLookups(ctx context.Context, msgs [][][]byte) (*lookupTimes, error) {
	per := r.o.perCampaign()
	lt := &lookupTimes{}
	probeBuf := make([]byte, 128<<10)
	found, cpu0 := 0, cputime.Process()
	var probeCPU time.Duration
	for i, msg := range msgs {
		t := time.Now()
		hits, err := r.st.Lookup(ctx, msg)
		d := time.Since(t)
		if err != nil {
			return nil, err
		}
		if i%2 == 0 {
			lt.known = append(lt.known, d)
			if len(hits) == per {
				found++
			}
		} else {
			lt.unknown = append(lt.unknown, d)
			if len(hits) != 0 {
				return nil, fmt.Errorf("bench store: random keys found in the store (%d hits)", len(hits))
			}
		}
		c := cputime.Process()
		t = time.Now()
		probeSum := sha256.Sum256(probeBuf)
		probeBuf[0] = probeSum[0]
		lt.probes = append(lt.probes, time.Since(t))
		probeCPU += cputime.Process() - c
	}
	if found != len(lt.known) {
		return nil, fmt.Errorf("bench store: only %d of %d known messages found all their keys", found, len(lt.known))
	}
	lt.cpu = cputime.Process() - cpu0 - probeCPU
	return lt, nil
}

// singleReports times single atomic reports (the API path).
func (r *storeRun) singleReports(ctx context.Context) error {
	o := r.o
	if o.SingleReports <= 0 {
		return nil
	}
	var ds []time.Duration
	for i := 0; i < o.SingleReports; i++ {
		c := r.rng.IntN(r.campaigns)
		in := store.ReportInput{Time: time.Now(), Kind: store.KindSpam, Reporter: fmt.Sprintf("single%d", i),
			Keys: o.campaignKeys(c), Create: true, Index: true}
		if i%2 == 1 {
			in.Keys = [][]byte{synthKey(storeSeed^0x5151, i, 0, true), synthKey(storeSeed^0x5151, i, 1, false)}
		}
		t := time.Now()
		if _, err := r.st.Report(ctx, in); err != nil {
			return err
		}
		ds = append(ds, time.Since(t))
	}
	fmt.Fprintf(r.out, "report single   %d atomic reports (fsync %v): %s\n", len(ds), !o.NoSync, fmtLatency(ds))
	return nil
}
