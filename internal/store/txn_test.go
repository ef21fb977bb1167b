package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// updateEach writes every item, at least one per transaction however
// large need is, and reports how many were committed before an error.
func TestUpdateEach(t *testing.T) {
	errStop := errors.New("stop")
	tests := []struct {
		name     string
		need     int
		failAt   int // -1: none
		wantDone int
		wantTxns int
	}{
		{"all in one transaction", 1, -1, 5, 1},
		{"one per transaction", 1 << 30, -1, 5, 5},
		{"error in the fourth", 1 << 30, 3, 3, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, "", Options{})
			txns := 0
			last := -1
			done, err := s.updateEach(ctx, 5, tc.need, func(w *wtx, i int) error {
				if i <= last {
					return fmt.Errorf("item %d after %d", i, last)
				}
				if i == 0 || w.entries == 0 {
					txns++
				}
				last = i
				if i == tc.failAt {
					return errStop
				}
				return w.set([]byte(fmt.Sprintf("mtest%d", i)), nil)
			})
			if done != tc.wantDone || txns != tc.wantTxns || (tc.failAt >= 0) != errors.Is(err, errStop) {
				t.Fatalf("done %d in %d transactions, err %v; want %d in %d", done, txns, err, tc.wantDone, tc.wantTxns)
			}
			for i := range 5 {
				err := s.view(func(txn *badger.Txn) error { _, err := txn.Get([]byte(fmt.Sprintf("mtest%d", i))); return err })
				if written := err == nil; written != (i < tc.wantDone) {
					t.Errorf("item %d written %v", i, written)
				}
			}
		})
	}
}
