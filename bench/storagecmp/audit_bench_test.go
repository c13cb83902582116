package storagecmp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/auditlogtest"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// Each benchmark has one sub-benchmark per store (store=wal: auditlog.DirStore over
// pkg/wal; store=bbolt: BoltAudit), so `benchstat -col /store` sets them side by side.

// fixtureRecords is the size of the stores the read and open benchmarks use.
const fixtureRecords = 100_000

type auditStore interface {
	auditlog.Store
	Close() error
}

type auditKind struct {
	name string
	open func(dir string) (auditStore, error)
}

var auditKinds = []auditKind{
	{"wal", func(dir string) (auditStore, error) { return auditlog.OpenDir(filepath.Join(dir, "audit")) }},
	{"bbolt", func(dir string) (auditStore, error) { return OpenBoltAudit(filepath.Join(dir, "audit.db")) }},
}

// requestID returns a request id shaped like the intake's: er_ and 32 random hex digits.
func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "er_" + hex.EncodeToString(b[:])
}

func openAudit(b *testing.B, k auditKind, dir string) auditStore {
	s, err := k.open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchWrites runs write once per op on an empty store of each kind, one writer.
func benchWrites(b *testing.B, write func(ctx context.Context, s auditlog.Store, r event.Receipt) error) {
	for _, k := range auditKinds {
		b.Run("store="+k.name, func(b *testing.B) {
			s := openAudit(b, k, b.TempDir())
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := write(ctx, s, auditlogtest.Receipt("acme", requestID())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutReceipt is one durable conditional create of a receipt (fsync before it
// returns), one writer, into a store that grows with b.N.
func BenchmarkPutReceipt(b *testing.B) {
	benchWrites(b, func(ctx context.Context, s auditlog.Store, r event.Receipt) error { return s.PutReceipt(ctx, r) })
}

// BenchmarkIssue is the aggregator's receipt append, auditlog.Issue, the same code on
// both stores: read the tenant's head, look the receipt up, swap the head and create the
// receipt (two durable writes).
func BenchmarkIssue(b *testing.B) {
	benchWrites(b, func(ctx context.Context, s auditlog.Store, r event.Receipt) error {
		_, err := auditlog.Issue(ctx, s, r)
		return err
	})
}

// writers is the number of concurrent writers of BenchmarkPutReceipt8Writers.
const writers = 8

// BenchmarkPutReceipt8Writers is BenchmarkPutReceipt from 8 goroutines at once; ns/op is
// wall time per receipt. The WAL shares one fsync among the writers waiting (group
// commit); bbolt's Update serialises them, each with its own fsyncs, and its Batch (the
// store=bbolt-batch row, default MaxBatchDelay 10 ms and MaxBatchSize 1000) coalesces
// them into one transaction.
func BenchmarkPutReceipt8Writers(b *testing.B) {
	kinds := append(append([]auditKind(nil), auditKinds...), auditKind{"bbolt-batch", func(dir string) (auditStore, error) {
		s, err := OpenBoltAudit(filepath.Join(dir, "audit.db"))
		if err == nil {
			s.Batch = true
		}
		return s, err
	}})
	for _, k := range kinds {
		b.Run("store="+k.name, func(b *testing.B) {
			s := openAudit(b, k, b.TempDir())
			ctx := context.Background()
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if err := s.PutReceipt(ctx, auditlogtest.Receipt("acme", requestID())); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// fixtures holds, per store kind, a directory with fixtureRecords receipts and their ids,
// built once per process (every -count round reuses it) and removed by TestMain.
var fixtures = struct {
	sync.Mutex
	root string
	dirs map[string]fixture
}{dirs: map[string]fixture{}}

type fixture struct {
	dir string
	ids []string
}

func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("", "storagecmp-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtures.root = root
	code := m.Run()
	os.RemoveAll(root)
	os.Exit(code)
}

// auditFixture returns the fixture of k, building it on first use: fixtureRecords receipts
// each written as its own write. The WAL is filled by 64 concurrent writers (the file is
// the same as one writer's, records in completion order); bbolt one transaction per
// receipt with NoSync during the fill only (the pages are those of durable single-receipt
// transactions; only the fdatasyncs are skipped), then synced.
func auditFixture(b *testing.B, k auditKind) fixture {
	fixtures.Lock()
	defer fixtures.Unlock()
	if f, ok := fixtures.dirs[k.name]; ok {
		return f
	}
	f := fixture{dir: filepath.Join(fixtures.root, "audit-"+k.name), ids: make([]string, fixtureRecords)}
	for i := range f.ids {
		f.ids[i] = requestID()
	}
	ctx := context.Background()
	switch k.name {
	case "wal":
		s, err := k.open(f.dir)
		if err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < fixtureRecords; i = next.Add(1) - 1 {
					if err := s.PutReceipt(ctx, auditlogtest.Receipt("acme", f.ids[i])); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	case "bbolt":
		if err := os.MkdirAll(f.dir, 0o700); err != nil {
			b.Fatal(err)
		}
		s, err := OpenBoltAudit(filepath.Join(f.dir, "audit.db"))
		if err != nil {
			b.Fatal(err)
		}
		s.db.NoSync = true
		for _, id := range f.ids {
			if err := s.PutReceipt(ctx, auditlogtest.Receipt("acme", id)); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.db.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if b.Failed() {
		b.FailNow()
	}
	fixtures.dirs[k.name] = f
	return f
}

// dirBytes is the size of the regular files under dir.
func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		n += fi.Size()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkOpen100k opens a store of 100k receipts and reads one back (the WAL replays the
// whole log into memory; bbolt maps the file and reads its meta pages), then closes it.
// disk-bytes is the size of the store's files; used-bytes, for bbolt, the part of its
// file that pages in use reach (tx.Size).
func BenchmarkOpen100k(b *testing.B) {
	for _, k := range auditKinds {
		b.Run("store="+k.name, func(b *testing.B) {
			f := auditFixture(b, k)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				s, err := k.open(f.dir)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.GetReceipt(ctx, f.ids[i%len(f.ids)]); err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(dirBytes(b, f.dir)), "disk-bytes")
			if k.name == "bbolt" { // bbolt grows its file ahead of use: the pages in use
				s, err := OpenBoltAudit(filepath.Join(f.dir, "audit.db"))
				if err != nil {
					b.Fatal(err)
				}
				var used int64
				_ = s.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
				s.Close()
				b.ReportMetric(float64(used), "used-bytes")
			}
		})
	}
}

// BenchmarkGetReceipt100k reads one receipt by request id from an open store of 100k.
func BenchmarkGetReceipt100k(b *testing.B) {
	for _, k := range auditKinds {
		b.Run("store="+k.name, func(b *testing.B) {
			f := auditFixture(b, k)
			s := openAudit(b, k, f.dir)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				id := f.ids[(i*7919)%len(f.ids)]
				r, err := s.GetReceipt(ctx, id)
				if err != nil || r.RequestID != id {
					b.Fatalf("get %d: %v (got %q)", i, err, r.RequestID)
				}
			}
		})
	}
}
