package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/api"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/config"
	"github.com/nddmilter/nddmilter/internal/dashboard"
	"github.com/nddmilter/nddmilter/internal/ledger"
	"github.com/nddmilter/nddmilter/internal/metrics"
	"github.com/nddmilter/nddmilter/internal/milter"
	"github.com/nddmilter/nddmilter/internal/store"
	"github.com/nddmilter/nddmilter/internal/zap"
	"github.com/nddmilter/nddmilter/internal/zap/doveadm"
	"github.com/nddmilter/nddmilter/internal/zap/imap"
	"github.com/nddmilter/nddmilter/internal/zap/move"
)

// zapper is zero-hour purge in the daemon (config zap): the delivery
// ledger the milter records into, and the purger that watches the
// campaigns and runs the jobs. Its settings change only on restart.
type zapper struct {
	ledger *ledger.Ledger
	purger *zap.Purger
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// currentEngine is the engine of the moment (swapped on reload), as the
// purger reads it: the read queries and MatchEvidence only.
type currentEngine struct{ d *daemon }

func (c currentEngine) List(ctx context.Context, q store.Query) ([]store.Campaign, error) {
	return c.d.eng.Load().Reader.List(ctx, q)
}

func (c currentEngine) Get(ctx context.Context, id store.CampaignID) (*store.Campaign, error) {
	return c.d.eng.Load().Reader.Get(ctx, id)
}

func (c currentEngine) ExactCopy(cp *store.Campaign) campaign.Decision {
	return c.d.eng.Load().Reader.ExactCopy(cp)
}

func (c currentEngine) MatchEvidence(ctx context.Context, ev, signs []byte) (campaign.Verdict, error) {
	return c.d.eng.Load().Checker.MatchEvidence(ctx, ev, signs)
}

// newMover is the backend the configuration names.
func newMover(z config.Zap) (move.Mover, error) {
	if d := z.Doveadm; d.URL != "" {
		o := doveadm.Options{URL: d.URL}
		var err error
		if d.APIKeyFile != "" {
			o.APIKey, err = config.ReadSecret("zap.doveadm.api_key_file", d.APIKeyFile)
		} else {
			o.Password, err = config.ReadSecret("zap.doveadm.password_file", d.PasswordFile)
		}
		if err != nil {
			return nil, err
		}
		return doveadm.New(o)
	}
	m := z.IMAP
	pw, err := config.ReadSecret("zap.imap.password_file", m.PasswordFile)
	if err != nil {
		return nil, err
	}
	return imap.New(imap.Options{Addr: m.Addr, TLS: m.TLS, MasterUser: m.MasterUser, Password: pw, Separator: m.Separator})
}

// startZap opens the ledger and starts the purger when a backend is
// configured (d.zap stays nil otherwise).
func (d *daemon) startZap(cfg *config.Config) error {
	z := cfg.Zap
	if !z.Enabled() {
		return nil
	}
	mover, err := newMover(z)
	if err != nil {
		return fmt.Errorf("zap: %w", err)
	}
	trigger, _ := action.Parse(z.Trigger) // validated with the configuration
	rps, _ := z.RatePerSecond()
	um, err := zap.ParseUserMap(z.UserMap)
	if err != nil {
		return err
	}
	dir := z.LedgerDir(cfg.Store.Dir)
	l, err := ledger.Open(dir, ledger.Options{Window: z.Window.D(), MaxBytes: z.MaxBytes, Logger: d.log})
	if err != nil {
		return fmt.Errorf("zap: %w", err)
	}
	zm := d.met.Zap(func() metrics.ZapStats {
		s := l.Stats()
		n, _ := l.PendingJobs()
		return metrics.ZapStats{LedgerEntries: s.Entries, LedgerBytes: s.Bytes, LedgerDropped: s.Dropped,
			LedgerEvicted: s.Evicted, JobsPending: n}
	})
	p, err := zap.New(l, currentEngine{d}, mover, zap.Options{Mode: z.Mode, Trigger: trigger, Sources: z.Sources, Junk: z.Junk,
		MoveRead: !z.UnreadOnly, Rate: rps, UserMap: um, Logger: d.log, Metrics: zm})
	if err != nil {
		l.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.zap = &zapper{ledger: l, purger: p, cancel: cancel}
	d.zap.done.Add(1)
	go func() {
		defer d.zap.done.Done()
		p.Run(ctx)
	}()
	d.log.Info("zero-hour purge on", "mode", z.Mode, "trigger", z.Trigger, "ledger", dir, "backend", backendName(z))
	return nil
}

func backendName(z config.Zap) string {
	if z.Doveadm.URL != "" {
		return "doveadm " + z.Doveadm.URL
	}
	return "imap " + z.IMAP.Addr
}

// stopZap stops the purger and closes the ledger (writing what is
// queued); call it after the milter drained.
func (d *daemon) stopZap() {
	if d.zap == nil {
		return
	}
	d.zap.cancel()
	d.zap.done.Wait()
	if err := d.zap.ledger.Close(); err != nil {
		d.log.Error("zap: close the ledger", "err", err)
	}
}

// milterOptions are the milter's options with the ledger, when zap is on.
func (d *daemon) milterOptions(cfg *config.Config, log *slog.Logger, met *metrics.Metrics) milter.Options {
	o := milterOptions(cfg, log, met)
	if d.zap != nil {
		o.Ledger = d.zap.ledger
	}
	return o
}

// keepZapSettings keeps the running zap section on reload (it changes
// only on restart).
func keepZapSettings(cfg, old *config.Config, log *slog.Logger) {
	if !reflect.DeepEqual(old.Zap, cfg.Zap) {
		log.Warn("setting changes only on restart", "key", "zap")
		cfg.Zap = old.Zap
	}
}

// zapPurges is what the purge took back, per campaign, and its undo by
// hand, as the API and the dashboard serve them.
type zapPurges struct {
	d *daemon
	p *zap.Purger
}

// known fails with store.ErrNotFound when neither the store nor the
// ledger knows campaign id.
func (z zapPurges) known(ctx context.Context, id store.CampaignID, p ledger.Purge) error {
	if p.Total > 0 || p.Mark != (ledger.Mark{}) {
		return nil
	}
	_, err := z.d.eng.Load().Reader.Get(ctx, id)
	return err // names the campaign
}

func (z zapPurges) Purge(ctx context.Context, id store.CampaignID, limit int) (ledger.Purge, error) {
	p, err := z.p.Purge(uint64(id), limit)
	if err != nil {
		return p, err
	}
	return p, z.known(ctx, id, p)
}

func (z zapPurges) UndoPurge(ctx context.Context, id store.CampaignID, who string) (int, error) {
	p, err := z.p.Purge(uint64(id), 0)
	if err != nil {
		return 0, err
	}
	if err := z.known(ctx, id, p); err != nil {
		return 0, err
	}
	return z.p.UndoPurge(ctx, uint64(id), who)
}

// apiPurges is the purge for the API (nil when zap is off).
func (d *daemon) apiPurges() api.Purges {
	if d.zap == nil {
		return nil
	}
	return zapPurges{d: d, p: d.zap.purger}
}

// dashboardPurges is the purge for the dashboard (nil when zap is off).
func (d *daemon) dashboardPurges() dashboard.Purges {
	if d.zap == nil {
		return nil
	}
	return zapPurges{d: d, p: d.zap.purger}
}
