package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/daemon"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/store"
)

// syntheticSubject starts the sample subject of every synthetic campaign.
const syntheticSubject = "synthetic campaign "

// completeMark, in a store directory, says the benchmark store is complete.
const completeMark = "BENCH-COMPLETE"

// milterStore builds (or reuses) the benchmark's store: the templates as
// real campaigns reported by five users each, then synthetic campaigns up
// to o.Campaigns.
func milterStore(ctx context.Context, cfg *config.Config, o *MilterOptions, templates [][]byte, out io.Writer) (*daemon.Runtime, error) {
	dir := o.Dir
	if dir == "" {
		dir = filepath.Join(".cache", fmt.Sprintf("bench-milter-v3-%d-%d", o.Campaigns, o.Templates))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := os.Stat(filepath.Join(dir, completeMark)); err == nil {
		cfg.Store.Dir = dir
		t := time.Now()
		rt, err := daemon.OpenRuntime(cfg, log)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "open            %v (store, engine, lexicon and model: lookups at full speed from then on)\n", time.Since(t).Round(time.Millisecond))
		s, err := rt.Store.Stats(ctx)
		if err != nil {
			rt.Close()
			return nil, err
		}
		fmt.Fprintf(out, "store           %s (reused: %d campaigns, %d keys)\n", dir, s.Campaigns, s.Keys)
		return rt, nil
	}
	// Build in a private directory and move it into place when complete,
	// so that concurrent or interrupted runs never share or reuse a
	// half-built store.
	build := fmt.Sprintf("%s.building-%d", dir, os.Getpid())
	if err := os.MkdirAll(build, 0o755); err != nil {
		return nil, fmt.Errorf("bench milter: %w", err)
	}
	t0 := time.Now()
	cfg.Store.Dir = build
	if err := fillMilterStore(ctx, cfg, log, o.Campaigns, templates); err != nil {
		os.RemoveAll(build)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(build, completeMark), []byte("complete\n"), 0o644); err != nil {
		os.RemoveAll(build)
		return nil, err
	}
	if err := os.Rename(build, dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench milter: %v; using %s\n", err, build)
		dir = build
	}
	fmt.Fprintf(out, "store           %s (built %d campaigns in %s)\n", dir, o.Campaigns, time.Since(t0).Round(time.Second))
	cfg.Store.Dir = dir
	return daemon.OpenRuntime(cfg, log)
}

// fillMilterStore reports the templates through the engine and adds the
// synthetic campaigns through the store's bulk ReportBatch, then closes
// the store.
func fillMilterStore(ctx context.Context, cfg *config.Config, log *slog.Logger, campaigns int, templates [][]byte) (err error) {
	rt, err := daemon.OpenRuntime(cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := rt.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("bench milter: build store: %w", cerr)
		}
	}()
	for i, tmpl := range templates {
		for j, user := range []string{"alice", "bob", "carol", "dave", "erin"} {
			m, err := campaignCopy(tmpl, uint64(1_000_000+i*10+j), i)
			if err != nil {
				return err
			}
			if _, err := rt.Engine.Ingester.Report(ctx, m.raw(), store.KindSpam, user+"@example.org"); err != nil {
				return fmt.Errorf("bench milter: report: %w", err)
			}
		}
	}
	keys, err := newSyntheticKeys(cfg)
	if err != nil {
		return err
	}
	synthetic := campaigns - len(templates)
	const batch = 2000
	ins := make([]store.ReportInput, 0, batch)
	at := time.Now().Add(-time.Hour)
	for c := 0; c < synthetic; c += batch {
		ins = ins[:0]
		for j := c; j < min(c+batch, synthetic); j++ {
			ins = append(ins, store.ReportInput{
				Time: at, Kind: store.KindSpam, Reporter: fmt.Sprintf("user%d@example.org", j%5000),
				Keys: keys.campaign(), Create: true, Index: true, Subject: fmt.Sprintf("%s%d", syntheticSubject, j), From: "spam@example.com",
			})
		}
		if _, err := rt.Store.ReportBatch(ctx, ins); err != nil {
			return fmt.Errorf("bench milter: build store: %w", err)
		}
		if (c/batch)%50 == 0 {
			fmt.Fprintf(os.Stderr, "\rbuilding store: %d/%d campaigns", c+len(ins)+len(templates), campaigns)
		}
	}
	fmt.Fprintln(os.Stderr)
	return nil
}

// syntheticKeys makes the index keys of synthetic campaigns: the I-Match
// signatures of the configured lexicon, one per bag as a signed message
// has, in imatchbag's own wire form, with random hashes (so that no
// message's signature matches them).
type syntheticKeys struct {
	lexicon uint32
	bags    int
}

func newSyntheticKeys(cfg *config.Config) (*syntheticKeys, error) {
	lex, err := daemon.LoadLexicon(cfg)
	if err != nil {
		return nil, err
	}
	s, err := imatchbag.NewSigner(lex, daemon.EngineOptions(cfg).IMatch)
	if err != nil {
		return nil, fmt.Errorf("bench milter: %w", err)
	}
	return &syntheticKeys{lexicon: lex.ID(), bags: s.Options().K + 1}, nil
}

func (k *syntheticKeys) campaign() [][]byte {
	keys := make([][]byte, k.bags)
	for b := range keys {
		sig := imatchbag.Signature{Lexicon: k.lexicon, Bag: uint8(b)}
		rand.Read(sig.Hash[:])
		keys[b] = sig.Key()
	}
	return keys
}
