package store

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4/skl"
	"github.com/dgraph-io/badger/v4/y"
)

// BenchmarkSkiplistPut measures what an index key costs Badger's memtable
// (a skiplist): a report event's worth of inserts (13,200: 220 reports of
// 60 keys) into a skiplist already holding others, with random keys (as
// index keys are), the same keys sorted, and a small memtable.
//
//	go test ./internal/store -run '^$' -bench SkiplistPut -benchtime 5x
func BenchmarkSkiplistPut(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 163_200)
	for i := range keys {
		k := make([]byte, 17)
		k[0] = pfxIndex
		binary.BigEndian.PutUint64(k[1:], r.Uint64())
		binary.BigEndian.PutUint64(k[9:], r.Uint64())
		keys[i] = y.KeyWithTs(k, 1)
	}
	const batch = 13_200
	for _, tc := range []struct {
		name    string
		arena   int64
		prefill int
		sorted  bool
	}{
		{"random/32MiB", memTableSize, 150_000, false},
		{"sorted/32MiB", memTableSize, 150_000, true},
		{"random/4MiB", 4 << 20, 10_000, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			v := y.ValueStruct{Value: make([]byte, 8)}
			for range b.N {
				b.StopTimer()
				s := skl.NewSkiplist(tc.arena)
				for _, k := range keys[:tc.prefill] {
					s.Put(k, v)
				}
				ins := slices.Clone(keys[tc.prefill : tc.prefill+batch])
				if tc.sorted {
					slices.SortFunc(ins, bytes.Compare)
				}
				b.StartTimer()
				for _, k := range ins {
					s.Put(k, v)
				}
				b.StopTimer()
				s.DecrRef()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/insert")
		})
	}
}
