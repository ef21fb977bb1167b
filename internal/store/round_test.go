package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// stopAfter is a context whose Err turns context.Canceled after n calls:
// the store stops between two transactions, as a node killed there would
// (each transaction is atomic; what a stop loses is the memory).
type stopAfter struct {
	context.Context
	n *int
}

func (c stopAfter) Err() error {
	if *c.n--; *c.n < 0 {
		return context.Canceled
	}
	return nil
}

// roundEvent is a report event whose reports take several transactions
// and, in the middle, merge a campaign too large for one; roundStore
// opens a store in dir holding the campaigns it merges.
func roundEvent() []ReportInput {
	var ins []ReportInput
	for i := range 240 {
		var ks []string
		for k := range 400 {
			// Long keys: the reports' key lists fill transactions.
			ks = append(ks, fmt.Sprintf("r%d-k%d-%040d", i, k, 0))
		}
		ins = append(ins, spam(fmt.Sprintf("rep%d", i%9), t0, ks...))
		if i == 101 {
			ins = append(ins, spam("joiner", t0, "small", "big-000001"))
		}
	}
	return ins
}

func roundStore(t *testing.T, dir string) *Badger {
	s := openTest(t, dir, roundOptions)
	mustReport(t, s, spam("r", t0, "small"))
	bigCampaign(t, s, "big", 24000)
	return s
}

// roundOptions are the options of the stores of these tests: no
// background flush while an event applies, whose writes could conflict
// with a round's transaction and retry it, one more call of stopAfter's
// Err than the reference run made.
var roundOptions = Options{NoSyncWrites: true, Expiry: -1, HitFlushInterval: time.Hour}

// applyRounds applies ins as event seq from progress p the way
// internal/fleet does (without matching, which is the engine's): rounds
// until the event is applied whole. It returns how many rounds it took.
func applyRounds(ctx context.Context, s *Badger, seq uint64, p Progress, ins []ReportInput) (int, error) {
	if p.Seq != seq || !p.Partial {
		p = Progress{Seq: seq, Partial: true}
	}
	r := &Round{Progress: p, Total: len(ins)}
	rw := s.ForRound(r)
	rounds := 0
	for r.Partial {
		rounds++
		if rounds > 1000 {
			return rounds, errors.New("no progress")
		}
		rest := ins[r.Step:]
		r.Next = make([]int, len(rest))
		for i := range rest {
			r.Next[i] = r.Step + i + 1
		}
		if _, err := rw.ReportBatch(ctx, rest); err != nil && !errors.Is(err, ErrRoundAgain) {
			return rounds, err
		}
	}
	return rounds, nil
}

// A report event killed between any two of its transactions — between
// rounds or in the middle of a large merge — resumes from the recorded
// progress and ends in the state of an uninterrupted run: same campaigns
// (ids included), same state hash.
func TestReportRoundResumes(t *testing.T) {
	ins := roundEvent()
	const seq = 7
	ref := roundStore(t, t.TempDir())
	var calls int = 1 << 30
	rounds, err := applyRounds(stopAfter{ctx, &calls}, ref, seq, Progress{}, ins)
	if err != nil {
		t.Fatal(err)
	}
	stops := 1<<30 - calls
	if p, err := ref.AppliedProgress(ctx); err != nil || p.Partial || p.Seq != seq {
		t.Fatalf("progress after the event: %+v %v", p, err)
	}
	want, err := ref.StateHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ref.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rounds, %d transaction starts, %d campaigns", rounds, stops, c.Campaigns)
	if rounds < 4 {
		t.Fatalf("%d rounds: the event no longer needs several transactions and a merge", rounds)
	}
	sawDrain := false
	for stop := 1; stop < stops; stop++ {
		dir := t.TempDir()
		s := roundStore(t, dir)
		n := stop
		if _, err := applyRounds(stopAfter{ctx, &n}, s, seq, Progress{}, ins); !errors.Is(err, context.Canceled) {
			t.Fatalf("stop %d: %v", stop, err)
		}
		s.Close() // killed: the rounds' memory is lost
		s = openTest(t, dir, roundOptions)
		p, err := s.AppliedProgress(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sawDrain = sawDrain || p.Drain != [2]CampaignID{}
		if _, err := applyRounds(ctx, s, seq, p, ins); err != nil {
			t.Fatalf("stop %d: resume from %+v: %v", stop, p, err)
		}
		if got, err := s.StateHash(ctx); err != nil || got != want {
			t.Errorf("stop %d (progress %+v): state hash %s, want %s (%v)", stop, p, got, want, err)
		}
		s.Close()
	}
	if !sawDrain {
		t.Error("no stop fell in the middle of the large merge")
	}
}

func TestDecodeProgress(t *testing.T) {
	m := &appliedMark{seq: 9, round: &Round{Progress: Progress{Seq: 9, Partial: true, Step: 3, Drain: [2]CampaignID{4, 5}}}}
	p, err := decodeProgress(m.value(2))
	if err != nil || p != (Progress{Seq: 9, Partial: true, Step: 3, NewIDs: 2, Drain: [2]CampaignID{4, 5}}) {
		t.Errorf("partial: %+v %v", p, err)
	}
	m.round.Partial = false
	if p, err := decodeProgress(m.value(2)); err != nil || p != (Progress{Seq: 9}) {
		t.Errorf("whole: %+v %v", p, err)
	}
	for _, b := range [][]byte{nil, {1, 2, 3}, make([]byte, 31), append(append(make([]byte, 8), 0xff, 0xff, 0xff, 0xff), make([]byte, 20)...)} {
		if _, err := decodeProgress(b); err == nil {
			t.Errorf("decodeProgress(%x): no error", b)
		}
	}
}
