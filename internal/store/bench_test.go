package store

import (
	"encoding/binary"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/lab/cputime"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"
)

// benchKeys returns the 11 synthetic keys of campaign c: 6 I-Match-like
// keys of 22 bytes and 5 ANDD-band-like keys of 12 bytes.
func benchKeys(seed uint64, c int) [][]byte {
	ks := make([][]byte, 0, 11)
	for j := 0; j < 11; j++ {
		h := rand.New(rand.NewPCG(seed, uint64(c)<<8|uint64(j)))
		if j < 6 {
			k := append([]byte{1, 'i', 0, 1, byte(j)}, binary.BigEndian.AppendUint64(nil, h.Uint64())...)
			ks = append(ks, append(binary.BigEndian.AppendUint64(k, h.Uint64()), 0))
		} else {
			ks = append(ks, binary.BigEndian.AppendUint64([]byte{1, 'a', 0, byte(j)}, h.Uint64()))
		}
	}
	return ks
}

func benchInput(c int) ReportInput {
	return ReportInput{Time: t0, Kind: KindSpam, Reporter: fmt.Sprint("u", c%977), Keys: benchKeys(1, c),
		Create: true, Index: true, Subject: "bench"}
}

var (
	benchStoreOnce sync.Once
	benchStoreDir  string
)

const benchCampaigns = 20000 // 220,000 signatures

// benchStore builds (once per test binary) a store of benchCampaigns
// campaigns through ReportBatch.
func benchStore(b *testing.B) *Badger {
	benchStoreOnce.Do(func() {
		dir, err := mkdirTemp()
		if err != nil {
			b.Fatal(err)
		}
		s, err := Open(dir, Options{Logger: testLogger(b), Expiry: -1})
		if err != nil {
			b.Fatal(err)
		}
		for c := 0; c < benchCampaigns; c += 1000 {
			var ins []ReportInput
			for i := c; i < c+1000; i++ {
				ins = append(ins, benchInput(i))
			}
			if _, err := s.ReportBatch(ctx, ins); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		benchStoreDir = dir
	})
	s, err := Open(benchStoreDir, Options{Logger: testLogger(b), Expiry: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkLookup looks up one message's 16 keys: half the messages are
// copies of a known campaign (11 keys found, verified against its key
// list), half unknown (answered by the key index alone).
func BenchmarkLookup(b *testing.B) {
	s := benchStore(b)
	rng := rand.New(rand.NewPCG(5, 6))
	msgs := make([][][]byte, 1024)
	for i := range msgs {
		var m [][]byte
		if i%2 == 0 {
			m = benchKeys(1, rng.IntN(benchCampaigns))
		}
		for len(m) < 16 {
			m = append(m, benchKeys(99, rng.Int())[len(m)%11])
		}
		msgs[i] = m
	}
	if err := s.db.Flatten(2); err != nil { // no compaction during the runs
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if _, err := s.Lookup(ctx, msgs[i%len(msgs)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReport is the atomic single-report path (fsync per report).
func BenchmarkReport(b *testing.B) {
	s := benchStore(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in := benchInput(benchCampaigns + int(time.Now().UnixNano()%1e9))
		if _, err := s.Report(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReportBatch is bulk ingestion: ns/op is per report.
func BenchmarkReportBatch(b *testing.B) {
	s := benchStore(b)
	base := 1_000_000 + int(time.Now().UnixNano()%1e6)*1000
	b.ResetTimer()
	for i := 0; i < b.N; i += 1000 {
		var ins []ReportInput
		for j := i; j < min(b.N, i+1000); j++ {
			ins = append(ins, benchInput(base+j))
		}
		if _, err := s.ReportBatch(ctx, ins); err != nil {
			b.Fatal(err)
		}
	}
}

func mkdirTemp() (string, error) { return os.MkdirTemp("", "nddmilter-store-bench-") }

func TestMain(m *testing.M) {
	code := m.Run()
	if benchStoreDir != "" {
		os.RemoveAll(benchStoreDir)
	}
	os.Exit(code)
}

// BenchmarkGrowFromEmpty is a store filled from empty, as a new fleet
// node catching up: 20,000 campaigns of 11 signatures through ReportBatch
// (batches of 1,000) into a fresh store per run, with the key index
// growing meanwhile. ns/op is per run; ns/report the mean per report and
// cpu-ns/report the process's CPU time per report.
func BenchmarkGrowFromEmpty(b *testing.B) {
	const n = 20000
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		s, err := Open(b.TempDir(), Options{Logger: testLogger(b), Expiry: -1, NoSyncWrites: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0 := cputime.Process()
		for c := 0; c < n; c += 1000 {
			var ins []ReportInput
			for i := c; i < c+1000; i++ {
				ins = append(ins, benchInput(i))
			}
			if _, err := s.ReportBatch(ctx, ins); err != nil {
				b.Fatal(err)
			}
		}
		cpu += cputime.Process() - cpu0
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/report")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/report")
}
