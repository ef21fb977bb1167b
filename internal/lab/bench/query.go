package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/lab/stats"
	"github.com/nddmilter/nddmilter/internal/store"
)

// QueryOptions configure Query (the flags of `nddlab bench query`,
// whose defaults are documented there).
type QueryOptions struct {
	// Dir is the store: one built by `bench milter` (reused as is; a
	// schema 1 store is upgraded in place), built here when it is not
	// complete. Default .cache/bench-milter-v3-CAMPAIGNS-TEMPLATES, the
	// store of `bench milter`.
	Dir                  string
	Campaigns, Templates int // of a store built here
	// Hits is how many matched messages are counted, over the last 24
	// hours, on campaigns drawn with a Zipf law before the queries run;
	// HamReports how many not-spam reports.
	Hits, HamReports int
	// Runs is how often each query runs.
	Runs int
	// ConfigPath is the daemon's configuration ("" for the defaults), for
	// the readiness measurement (the daemon is started on the store).
	ConfigPath string
	Config     *config.Config
}

// Query measures the campaign queries of the API, the command line and
// the dashboard on a large store: the daemon's time to readiness and
// /readyz latency, the time to count hits, then each query's latency
// (median and slowest of Runs), and the process's resident memory.
func Query(ctx context.Context, o QueryOptions, out io.Writer) error {
	if o.Config == nil {
		o.Config = config.Default()
	}
	if o.Runs <= 0 {
		o.Runs = 5
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(".cache", fmt.Sprintf("bench-milter-v3-%d-%d", o.Campaigns, o.Templates))
	}
	if _, err := os.Stat(filepath.Join(o.Dir, completeMark)); err != nil {
		voc, err := newVocab()
		if err != nil {
			return err
		}
		mo := MilterOptions{Campaigns: o.Campaigns, Templates: o.Templates, Dir: o.Dir}
		rt, err := milterStore(ctx, o.Config, &mo, voc.templates(o.Templates), out)
		if err != nil {
			return err
		}
		if err := rt.Close(); err != nil {
			return err
		}
	}
	if err := measureReady(ctx, o, out); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := *o.Config
	cfg.Store.Dir = o.Dir
	rt, err := daemon.OpenRuntime(&cfg, log)
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := countHits(ctx, rt, o, out); err != nil {
		return err
	}
	eng := rt.Engine
	day := time.Now().Add(-24 * time.Hour)
	var top store.CampaignID
	queries := []struct {
		name string
		f    func() (int, error)
	}{
		{"list volume", listQ(ctx, eng, store.Query{Sort: store.SortVolume})},
		{"list recent since 24h", listQ(ctx, eng, store.Query{Sort: store.SortRecent, Since: day})},
		{"list volume since 24h", listQ(ctx, eng, store.Query{Sort: store.SortVolume, Since: day})},
		{"list reports", listQ(ctx, eng, store.Query{Sort: store.SortReports})},
		{"list day (24h volume)", listQ(ctx, eng, store.Query{Sort: store.SortDay})},
		{"list volume page 101", listQ(ctx, eng, store.Query{Sort: store.SortVolume, Offset: 10000})},
		{"now view (hour)", func() (int, error) {
			v, err := eng.Reader.Now(ctx, campaign.NowQuery{Limit: 50})
			if err == nil && len(v.Campaigns) > 0 {
				top = v.Campaigns[0].ID
			}
			return len(v.Campaigns), err
		}},
		{"now view (day)", func() (int, error) {
			v, err := eng.Reader.Now(ctx, campaign.NowQuery{Sort: store.SortDay, Limit: 50})
			return len(v.Campaigns), err
		}},
		{"one campaign", func() (int, error) {
			if top == 0 {
				return 0, errors.New("no ranked campaign to show")
			}
			d, err := api.GetDetail(ctx, eng.Reader, top)
			return len(d.Hours), err
		}},
		{"false-positive watch", func() (int, error) {
			cs, err := eng.Reader.FalsePositiveWatch(ctx, campaign.WatchOptions{Limit: 100})
			return len(cs), err
		}},
		{"stats", func() (int, error) {
			s, err := eng.Reader.Stats(ctx)
			return int(s.Campaigns), err
		}},
	}
	for _, q := range queries {
		var ds []time.Duration
		n := 0
		for range o.Runs {
			t0 := time.Now()
			var err error
			n, err = q.f()
			ds = append(ds, time.Since(t0))
			if err != nil {
				return fmt.Errorf("bench query: %s: %w", q.name, err)
			}
		}
		slices.Sort(ds)
		fmt.Fprintf(out, "%-22s median %8s  max %8s  (%d results)\n", q.name, stats.Median(ds).Round(time.Microsecond), ds[len(ds)-1].Round(time.Microsecond), n)
	}
	rss, hwm := procMemory("self")
	fmt.Fprintf(out, "memory          VmRSS %s, VmHWM %s (whole process: store, key index, engine)\n", rss, hwm)
	return nil
}

func listQ(ctx context.Context, eng *campaign.Engine, q store.Query) func() (int, error) {
	return func() (int, error) {
		cs, err := eng.Reader.List(ctx, q)
		return len(cs), err
	}
}

// measureReady starts the daemon on the store and measures the time until
// /readyz answers 200 and the latency of /readyz.
func measureReady(ctx context.Context, o QueryOptions, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "nddmilter-bench-query-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	os.Remove(filepath.Join(o.Dir, daemon.AddressFile))
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- daemon.Run(dctx, daemon.Options{ConfigPath: o.ConfigPath, StoreDir: o.Dir,
			MilterListen: "unix:" + filepath.Join(tmp, "milter.sock"), HTTPListen: "127.0.0.1:0", LogOutput: io.Discard})
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	var url string
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if time.Now().After(deadline) {
			return errors.New("bench query: the daemon was not ready within 10 minutes")
		}
		select {
		case err := <-done:
			return fmt.Errorf("bench query: the daemon stopped: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if url == "" {
			url = daemon.RunningAPIURL(o.Dir)
			continue
		}
		if status, _ := get(client, url+"/readyz"); status == http.StatusOK {
			break
		}
	}
	ready := time.Since(start)
	var ds []time.Duration
	for range 20 {
		t0 := time.Now()
		if status, err := get(client, url+"/readyz"); status != http.StatusOK {
			return fmt.Errorf("bench query: /readyz answered %d: %v", status, err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	fmt.Fprintf(out, "daemon ready    %s after start (store open, schema upgrade if any, listeners)\n", ready.Round(time.Millisecond))
	fmt.Fprintf(out, "%-22s median %8s  max %8s  (20 requests)\n", "readyz", stats.Median(ds).Round(time.Microsecond), ds[len(ds)-1].Round(time.Microsecond))
	stop()
	return <-done
}

func get(c *http.Client, url string) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// countHits counts o.Hits matched messages over the last 24 hours on
// campaigns drawn with a Zipf law among the 20,000 most recent synthetic
// ones (never the real campaigns whose copies `bench milter` sends: their
// counts and reputation stay as they were), and o.HamReports not-spam
// reports, and prints the time it took.
func countHits(ctx context.Context, rt *daemon.Runtime, o QueryOptions, out io.Writer) error {
	var ids []store.CampaignID
	for off := 0; len(ids) < 20000; off += store.MaxListLimit {
		cs, err := rt.Engine.Reader.List(ctx, store.Query{Limit: store.MaxListLimit, Offset: off})
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			break
		}
		for _, c := range cs {
			if strings.HasPrefix(c.SampleSubject, syntheticSubject) {
				ids = append(ids, c.ID)
			}
		}
	}
	if len(ids) == 0 {
		return errors.New("bench query: the store has no campaign")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(ids)-1))
	now := time.Now()
	t0 := time.Now()
	for i := range o.Hits {
		at := now.Add(-time.Duration(rng.Int64N(int64(24 * time.Hour))))
		act := "reject"
		if i%3 == 0 {
			act = "tag"
		}
		if err := rt.Store.RecordHit(ctx, ids[zipf.Uint64()], act, at); err != nil {
			return err
		}
		if i%10000 == 9999 {
			if err := rt.Store.FlushHits(ctx); err != nil {
				return err
			}
		}
	}
	if err := rt.Store.FlushHits(ctx); err != nil {
		return err
	}
	hitTime := time.Since(t0)
	for i := range o.HamReports {
		_, err := rt.Store.Report(ctx, store.ReportInput{Kind: store.KindHam, Reporter: fmt.Sprintf("ham%d@example.org", i%50),
			Join: []store.CampaignID{ids[zipf.Uint64()]}})
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "hits            %d matched messages on %d campaigns counted and flushed in %s (%.0f/s); %d not-spam reports\n",
		o.Hits, len(ids), hitTime.Round(time.Millisecond), float64(o.Hits)/hitTime.Seconds(), o.HamReports)
	return nil
}
