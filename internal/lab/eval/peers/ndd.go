package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nddmilter/nddmilter/internal/action"
	"github.com/nddmilter/nddmilter/internal/andd"
	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/imatchbag"
	"github.com/nddmilter/nddmilter/internal/store"
)

// Reporter is the reporter identity of every junk report the comparison
// makes (one reporter, like `nddmilter report --reporter peers`).
const Reporter = "peers"

// NDD is nddmilter's engine in-process over a Badger store, built exactly as
// the nddmilter commands build it (embedded lexicon and model, default
// options). It is what `nddmilter serve` runs behind the milter.
type NDD struct {
	st  *store.Badger
	eng *campaign.Engine
	// Record makes Check count hits like the milter does (Checker.Check);
	// false is the dry run of `nddmilter check` (Engine.Evaluate), which
	// does not depend on the order of the checks.
	Record bool
}

// OpenNDD opens (creating if needed) the store in dir and builds the engine.
func OpenNDD(dir string, log *slog.Logger) (*NDD, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := store.Open(dir, store.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	lex, err := imatchbag.DefaultLexicon()
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("load lexicon: %w", err)
	}
	model, err := andd.DefaultModel()
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("load model: %w", err)
	}
	eng, err := campaign.New(st, lex, model, campaign.Options{}, log)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("build engine: %w", err)
	}
	return &NDD{st: st, eng: eng}, nil
}

// Name implements Detector.
func (n *NDD) Name() string { return "nddmilter (in-process)" }

// ErrSkipped is returned by NDD.Report when the engine could not use the
// message (no signature: too few terms, no text).
var ErrSkipped = errors.New("report skipped")

// Report implements Detector: a junk report by Reporter.
func (n *NDD) Report(ctx context.Context, raw []byte) error {
	o, err := n.eng.Ingester.Report(ctx, raw, store.KindSpam, Reporter)
	if err != nil {
		return fmt.Errorf("nddmilter report: %w", err)
	}
	if o.Skip != campaign.NotSkipped {
		return fmt.Errorf("%w: %s", ErrSkipped, o.Skipped)
	}
	return nil
}

// Check implements Detector: flagged when the action is not accept.
func (n *NDD) Check(ctx context.Context, raw []byte) (bool, error) {
	var (
		v   campaign.Verdict
		err error
	)
	if n.Record {
		v, err = n.eng.Checker.Check(ctx, raw)
	} else {
		v, err = n.eng.Checker.Evaluate(ctx, raw)
	}
	if err != nil {
		return false, fmt.Errorf("nddmilter check: %w", err)
	}
	return v.Action != action.Accept, nil
}

// Settle implements Detector: reports are visible at once.
func (n *NDD) Settle(context.Context) error { return nil }

// Close implements Detector: closes the store.
func (n *NDD) Close() error { return n.st.Close() }
