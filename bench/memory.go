package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
)

// MemSample is the process's memory at one moment.
type MemSample struct {
	InFlight  int
	HeapInUse uint64 // bytes, runtime.MemStats.HeapInuse
	RSS       uint64 // bytes, VmRSS of /proc/self/status
}

// sampleMemory reads the heap in use and the resident set size.
func sampleMemory() (heap, rss uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, procStatus("VmRSS")
}

// procStatus returns a kB field of /proc/self/status in bytes (0 when unreadable).
func procStatus(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// inFlight publishes n erasure.requested events straight to the broker, faster than the
// deleters complete them, sampling memory every 50 ms until every event is published and
// then for settle more. It returns the baseline sample (before publishing) and the sample
// with the most requests in flight (published, no receipt yet).
func (s *system) inFlight(ctx context.Context, n int, settle time.Duration) (base, peak MemSample, err error) {
	runtime.GC()
	base.HeapInUse, base.RSS = sampleMemory()
	before := s.receipts.count()
	var published int64
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			mu.Lock()
			inflight := int(published) - (s.receipts.count() - before)
			mu.Unlock()
			if inflight > peak.InFlight {
				peak.InFlight = inflight
				peak.HeapInUse, peak.RSS = sampleMemory()
			}
		}
	}()
	prod := s.System.Stack
	cl, err := prod.Broker.NewProducer(kgo.MaxBufferedRecords(20000))
	if err != nil {
		return base, peak, fmt.Errorf("producer: %w", err)
	}
	defer cl.Close()
	now := time.Now()
	var perr error
	var wg sync.WaitGroup
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		c := NewCustomer(s.tenant, "inflight", i)
		req := event.Requested{
			RequestID: fmt.Sprintf("er_inflight%021d", i), TenantID: c.Tenant, SubjectHash: s.Key.Pseudonym(c.Tenant, c.ID), KeyID: s.Key.ID(),
			Identifiers: event.Identifiers{SubjectID: c.ID, SessionIDs: c.Sessions}, Scope: event.ScopeSubject, Regulation: "GDPR",
			RequestedAt: now, DueAt: now.Add(30 * 24 * time.Hour), InventoryVersion: s.Inventory.Version,
			ExpectedStores: s.Inventory.Names(), OnlyStores: []string{}, Attempt: 1,
		}
		// Sealed and signed as the intake publishes them: deleters refuse anything else.
		sealed, err := s.System.Sealer.SealIdentifiers(ctx, req.RequestID, req.Identifiers)
		if err != nil {
			return base, peak, fmt.Errorf("seal: %w", err)
		}
		req.Sealed, req.Identifiers = sealed, event.Identifiers{SessionIDs: []string{}}
		b, err := event.Request.Encode(&req)
		if err != nil {
			return base, peak, fmt.Errorf("encode: %w", err)
		}
		rec := &kgo.Record{Topic: event.TopicRequested, Key: []byte(req.RequestID), Value: b}
		if err := integrity.Sign(s.System.MAC, event.Request, rec); err != nil {
			return base, peak, fmt.Errorf("sign: %w", err)
		}
		recs = append(recs, rec)
	}
	for _, rec := range recs { // the burst: produced at once, once every record is ready
		wg.Add(1)
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			if err != nil && perr == nil {
				perr = err
			}
			published++
			mu.Unlock()
		})
	}
	wg.Wait()
	if perr != nil {
		close(stop)
		<-sampled
		return base, peak, fmt.Errorf("publish: %w", perr)
	}
	time.Sleep(settle)
	close(stop)
	<-sampled
	return base, peak, nil
}
