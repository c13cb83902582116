package auditlogtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

func testIssueConcurrent(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	const requests, racers = 10, 5
	got := make([][racers]event.Receipt, requests)
	errs := make([][racers]error, requests)
	var wg sync.WaitGroup
	for i := range requests {
		for j := range racers {
			wg.Go(func() {
				got[i][j], errs[i][j] = auditlog.Issue(ctx, s, Receipt("acme", fmt.Sprintf("req-%02d", i)))
			})
		}
	}
	wg.Wait()
	seqs := map[int64]string{}
	for i := range requests {
		for j := range racers {
			if errs[i][j] != nil {
				t.Fatalf("Issue(req-%02d) racer %d: %v", i, j, errs[i][j])
			}
			if !sameJSON(got[i][j], got[i][0]) {
				t.Fatalf("racers of req-%02d got different receipts: %s and %s", i, js(got[i][0]), js(got[i][j]))
			}
		}
		r := got[i][0]
		if prev, dup := seqs[r.Seq]; dup {
			t.Fatalf("seq %d issued to %s and %s", r.Seq, prev, r.RequestID)
		}
		seqs[r.Seq] = r.RequestID
		if r.Hash != auditlog.HashReceipt(r) || r.ReceiptID != "rcpt-"+r.RequestID || len(r.Stores) != 1 {
			t.Errorf("issued receipt %s is not the given one with a valid hash: %s", r.RequestID, js(r))
		}
	}
	rs, err := s.Receipts(ctx, "acme")
	must(t, err)
	if len(rs) != requests {
		t.Fatalf("%d receipts stored, want %d", len(rs), requests)
	}
	for i, r := range rs {
		if r.Seq != int64(i+1) || seqs[r.Seq] != r.RequestID {
			t.Fatalf("receipt %d: seq %d of %s, want seq %d of %s", i, r.Seq, r.RequestID, i+1, seqs[int64(i+1)])
		}
	}
	if err := auditlog.VerifyChain(ctx, s, "acme"); err != nil {
		t.Errorf("VerifyChain: %v", err)
	}
	if h, _ := s.Head(ctx, "acme"); h.Seq != requests || h.Hash != rs[requests-1].Hash {
		t.Errorf("head at seq %d, want %d", h.Seq, requests)
	}
}

func testIssueIdempotent(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	a, err := auditlog.Issue(ctx, s, Receipt("acme", "req-a"))
	must(t, err)
	if a.Seq != 1 || a.PrevHash != "" {
		t.Fatalf("first receipt: seq %d prev %q, want seq 1 and no previous hash", a.Seq, a.PrevHash)
	}
	changed := Receipt("acme", "req-a")
	changed.ElapsedMS = 999
	again, err := auditlog.Issue(ctx, s, changed)
	must(t, err)
	if !sameJSON(again, a) {
		t.Fatalf("Issue again returned %s, want the first receipt %s", js(again), js(a))
	}
	b, err := auditlog.Issue(ctx, s, Receipt("acme", "req-b"))
	must(t, err)
	if b.Seq != 2 || b.PrevHash != a.Hash {
		t.Fatalf("second receipt: seq %d prev %q, want seq 2 linked to %q", b.Seq, b.PrevHash, a.Hash)
	}
	g, err := auditlog.Issue(ctx, s, Receipt("globex", "req-g"))
	must(t, err)
	if g.Seq != 1 || g.PrevHash != "" {
		t.Errorf("another tenant's first receipt: seq %d, want its own chain from 1", g.Seq)
	}
	for _, tenant := range []string{"acme", "globex"} {
		if err := auditlog.VerifyChain(ctx, s, tenant); err != nil {
			t.Errorf("VerifyChain(%s): %v", tenant, err)
		}
	}
	if _, err := auditlog.Issue(ctx, s, event.Receipt{TenantID: "acme"}); err == nil {
		t.Error("Issue accepted a receipt without a request id")
	}
}

// crashAfterSwap does the first half of Issue by hand: it links the receipt of id into the
// head and "crashes" before writing it.
func crashAfterSwap(t *testing.T, s auditlog.Store, tenant, id string) event.Receipt {
	t.Helper()
	ctx := context.Background()
	h, err := s.Head(ctx, tenant)
	must(t, err)
	r := Receipt(tenant, id)
	r.Seq, r.PrevHash = h.Seq+1, h.Hash
	r.Hash = auditlog.HashReceipt(r)
	must(t, s.SwapHead(ctx, tenant, h.Seq, auditlog.Head{Seq: r.Seq, Hash: r.Hash, RequestID: id, Receipt: r}))
	return r
}

func testIssueHeals(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	_, err := auditlog.Issue(ctx, s, Receipt("acme", "req-a"))
	must(t, err)
	b := crashAfterSwap(t, s, "acme", "req-b")
	if _, err := s.GetReceipt(ctx, "req-b"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("crashed writer's receipt: %v, want ErrNotFound", err)
	}
	if err := auditlog.VerifyChain(ctx, s, "acme"); !errors.Is(err, auditlog.ErrChainPending) {
		t.Fatalf("VerifyChain with a pending receipt: %v, want ErrChainPending", err)
	}
	c, err := auditlog.Issue(ctx, s, Receipt("acme", "req-c"))
	must(t, err)
	if c.Seq != 3 || c.PrevHash != b.Hash {
		t.Fatalf("next receipt: seq %d, want 3 linked to the crashed writer's receipt", c.Seq)
	}
	if got, err := s.GetReceipt(ctx, "req-b"); err != nil || !sameJSON(got, b) {
		t.Fatalf("crashed writer's receipt after healing = %s, %v; want %s", js(got), err, js(b))
	}
	// The crashed request's own retry finds its receipt in the head and writes it.
	d := crashAfterSwap(t, s, "acme", "req-d")
	got, err := auditlog.Issue(ctx, s, Receipt("acme", "req-d"))
	must(t, err)
	if !sameJSON(got, d) {
		t.Fatalf("retry of the crashed request issued %s, want its linked receipt %s", js(got), js(d))
	}
	if err := auditlog.VerifyChain(ctx, s, "acme"); err != nil {
		t.Fatalf("VerifyChain after healing: %v", err)
	}
	if rs, _ := s.Receipts(ctx, "acme"); len(rs) != 4 {
		t.Errorf("%d receipts, want 4", len(rs))
	}
}

// interleaved runs between once, right after the first Head or GetReceipt read returns.
type interleaved struct {
	auditlog.Store
	once    sync.Once
	between func()
}

func (s *interleaved) Head(ctx context.Context, tenant string) (auditlog.Head, error) {
	h, err := s.Store.Head(ctx, tenant)
	s.once.Do(s.between)
	return h, err
}

func (s *interleaved) GetReceipt(ctx context.Context, id string) (event.Receipt, error) {
	r, err := s.Store.GetReceipt(ctx, id)
	s.once.Do(s.between)
	return r, err
}

// testIssueRace: while Issue(A) is between its first two reads, another instance links A
// and crashes, and a third issues B (writing A's receipt and moving the head past it).
// Issue(A) must return A's receipt, not link A a second time.
func testIssueRace(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	var a event.Receipt
	w := &interleaved{Store: s, between: func() {
		a = crashAfterSwap(t, s, "acme", "req-a")
		_, err := auditlog.Issue(ctx, s, Receipt("acme", "req-b"))
		must(t, err)
	}}
	got, err := auditlog.Issue(ctx, w, Receipt("acme", "req-a"))
	must(t, err)
	if !sameJSON(got, a) {
		t.Fatalf("Issue(A) = seq %d, want A's receipt at seq %d", got.Seq, a.Seq)
	}
	if err := auditlog.VerifyChain(ctx, s, "acme"); err != nil {
		t.Fatalf("VerifyChain: %v", err)
	}
	if h, _ := s.Head(ctx, "acme"); h.Seq != 2 || h.RequestID != "req-b" {
		t.Errorf("head at seq %d of %s, want seq 2 of req-b", h.Seq, h.RequestID)
	}
}

func testTamper(t *testing.T, newStore func(t *testing.T) auditlog.Store) {
	ctx := context.Background()
	forge := func(id string, seq int64, prev string) event.Receipt {
		r := Receipt("acme", id)
		r.Seq, r.PrevHash = seq, prev
		r.Hash = auditlog.HashReceipt(r)
		return r
	}
	overwrite := func(t *testing.T, s auditlog.Store, r event.Receipt) {
		ow, ok := s.(ReceiptOverwriter)
		if !ok {
			t.Fatalf("%T does not implement auditlogtest.ReceiptOverwriter", s)
		}
		must(t, ow.OverwriteReceipt(ctx, r))
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, s auditlog.Store, rs []event.Receipt)
		want   string
	}{
		{"ModifiedReceipt", func(t *testing.T, s auditlog.Store, rs []event.Receipt) {
			r := rs[1]
			r.Stores[0].Deleted = 0
			overwrite(t, s, r)
		}, "seq 2: receipt of request req-2 does not match its hash"},
		{"ModifiedAndRehashed", func(t *testing.T, s auditlog.Store, rs []event.Receipt) {
			r := rs[1]
			r.Regulation = "LGPD"
			r.Hash = auditlog.HashReceipt(r)
			overwrite(t, s, r)
		}, "seq 3: receipt of request req-3 does not link"},
		{"MovedToAnotherTenant", func(t *testing.T, s auditlog.Store, rs []event.Receipt) {
			r := rs[0]
			r.TenantID = "globex"
			overwrite(t, s, r)
		}, "has seq 2, want 1"},
		{"ForgedDuplicateSeq", func(t *testing.T, s auditlog.Store, rs []event.Receipt) {
			must(t, s.PutReceipt(ctx, forge("req-x", 2, rs[0].Hash)))
		}, "duplicate seq 2"},
		{"ForgedAppended", func(t *testing.T, s auditlog.Store, rs []event.Receipt) {
			must(t, s.PutReceipt(ctx, forge("req-x", 4, rs[2].Hash)))
		}, "head at seq 3, but the last record has seq 4"},
		{"HeadRewritten", func(t *testing.T, s auditlog.Store, rs []event.Receipt) {
			must(t, s.SwapHead(ctx, "acme", 3, auditlog.Head{Seq: 3, Hash: "bogus", RequestID: "req-3", Receipt: rs[2]}))
		}, "head at seq 3 does not match"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			var rs []event.Receipt
			for i := 1; i <= 3; i++ {
				r, err := auditlog.Issue(ctx, s, Receipt("acme", fmt.Sprintf("req-%d", i)))
				must(t, err)
				rs = append(rs, r)
			}
			must(t, auditlog.VerifyChain(ctx, s, "acme"))
			c.tamper(t, s, rs)
			err := auditlog.VerifyChain(ctx, s, "acme")
			if !errors.Is(err, auditlog.ErrChainBroken) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("VerifyChain = %v, want ErrChainBroken with %q", err, c.want)
			}
		})
	}
}

// testIssueHeadCaches checks Issue by processes that each keep the heads they linked
// (auditlog.HeadCache), interleaved with one another and with addenda: every request gets
// one receipt however often and by whichever process it is issued, each seq is used once,
// and the chain verifies.
func testIssueHeadCaches(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	procs := []auditlog.Chain{{Store: s, Heads: &auditlog.HeadCache{}}, {Store: s, Heads: &auditlog.HeadCache{}}}
	_, canAppend := s.(auditlog.Addenda)
	issued := map[string]event.Receipt{}
	for i := range 12 {
		id := fmt.Sprintf("req-%02d", i%8) // requests 0-3 are issued twice, by either process
		r, err := procs[i%2].Issue(ctx, Receipt("acme", id))
		must(t, err)
		if prev, ok := issued[id]; ok && !sameJSON(prev, r) {
			t.Fatalf("%s issued twice: %s and %s", id, js(prev), js(r))
		}
		issued[id] = r
		if canAppend && i%5 == 4 { // an addendum moves the head past both caches
			_, _, err := procs[(i+1)%2].Append(ctx, auditlog.Addendum{AddendumID: fmt.Sprintf("add-%d", i), TenantID: "acme", RequestID: id, ReceiptID: r.ReceiptID,
				Type: auditlog.AddendumReverified, At: T0})
			must(t, err)
		}
	}
	// a process whose cached head is the chain's head, asked again for a receipt another
	// process issued
	last, err := procs[0].Issue(ctx, Receipt("acme", "req-last"))
	must(t, err)
	for _, id := range []string{"req-01", "req-last"} {
		r, err := procs[0].Issue(ctx, Receipt("acme", id))
		must(t, err)
		if want := map[string]event.Receipt{"req-01": issued["req-01"], "req-last": last}[id]; !sameJSON(r, want) {
			t.Fatalf("%s issued again as %s, want %s", id, js(r), js(want))
		}
	}
	rs, err := s.Receipts(ctx, "acme")
	must(t, err)
	if len(rs) != 9 {
		t.Errorf("%d receipts stored, want one for each of 9 requests", len(rs))
	}
	must(t, auditlog.VerifyChain(ctx, s, "acme"))
}
