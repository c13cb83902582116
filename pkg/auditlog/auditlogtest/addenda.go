package auditlogtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
)

// Addendum returns an unlinked addendum of the issued receipt's request.
func Addendum(id string, typ string, receiptID, requestID, tenant string) auditlog.Addendum {
	return auditlog.Addendum{
		AddendumID: id, ReceiptID: receiptID, RequestID: requestID, TenantID: tenant, Type: typ,
		Purpose: "SWEEP", Pass: "sweep-1", At: T0.Add(time.Hour),
		Stores: []auditlog.AddendumStore{{Store: "qdrant", Status: "DELETED", Deleted: 2}},
	}
}

// testAddenda checks that addenda interleave with receipts in one chain that verifies,
// that appending is idempotent and race-free, and that a forged addendum breaks the chain.
func testAddenda(t *testing.T, s auditlog.Store) {
	as, ok := s.(auditlog.Addenda)
	if !ok {
		t.Fatalf("%T does not keep addenda", s)
	}
	ctx := context.Background()
	r1, err := auditlog.Issue(ctx, s, Receipt("acme", "req-1"))
	must(t, err)
	const racers = 4
	var wg sync.WaitGroup
	got := make([]auditlog.Addendum, racers)
	linkedBy := make([]bool, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			got[i], linkedBy[i], errs[i] = auditlog.Append(ctx, s, Addendum("req-1/sweep-1", auditlog.AddendumReappeared, r1.ReceiptID, "req-1", "acme"))
		})
	}
	wg.Wait()
	linkers := 0
	for i := range racers {
		must(t, errs[i])
		if got[i].Seq != 2 || got[i].Hash != got[0].Hash {
			t.Fatalf("racer %d appended seq %d hash %s, want seq 2 and one hash", i, got[i].Seq, got[i].Hash)
		}
		if linkedBy[i] {
			linkers++
		}
	}
	if linkers != 1 {
		t.Fatalf("%d racers say they linked the addendum, want exactly 1", linkers)
	}
	r2, err := auditlog.Issue(ctx, s, Receipt("acme", "req-2"))
	must(t, err)
	if r2.Seq != 3 || r2.PrevHash != got[0].Hash {
		t.Fatalf("receipt after an addendum: seq %d prev %s, want seq 3 linked to the addendum", r2.Seq, r2.PrevHash)
	}
	a2, linked, err := auditlog.Append(ctx, s, Addendum("req-1/shredded", auditlog.AddendumShredded, r1.ReceiptID, "req-1", "acme"))
	must(t, err)
	if a2.Seq != 4 || a2.PrevHash != r2.Hash || !linked {
		t.Fatalf("second addendum: seq %d, want 4 linked to receipt 3", a2.Seq)
	}
	if again, linked, err := auditlog.Append(ctx, s, Addendum("req-1/sweep-1", auditlog.AddendumReappeared, r1.ReceiptID, "req-1", "acme")); err != nil || again.Seq != 2 || linked {
		t.Fatalf("appending a stored addendum again: seq %d, %v; want the stored one (seq 2)", again.Seq, err)
	}
	must(t, auditlog.VerifyChain(ctx, s, "acme"))
	of, err := as.AddendaOf(ctx, "req-1")
	must(t, err)
	if len(of) != 2 || of[0].Type != auditlog.AddendumReappeared || of[1].Type != auditlog.AddendumShredded {
		t.Fatalf("AddendaOf(req-1) = %s, want REAPPEARED then SHREDDED", js(of))
	}
	if of, _ := as.AddendaOf(ctx, "req-2"); len(of) != 0 {
		t.Fatalf("AddendaOf(req-2) = %s, want none", js(of))
	}
	if _, err := as.GetAddendum(ctx, "nope"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("GetAddendum(unknown) = %v, want ErrNotFound", err)
	}
	if _, _, err := auditlog.Append(ctx, s, auditlog.Addendum{AddendumID: "x", TenantID: "acme"}); err == nil {
		t.Fatal("Append without a receipt or type succeeded")
	}

	// A forged addendum, hashed correctly but for a receipt the chain does not hold.
	forged := Addendum("req-9/sweep-1", auditlog.AddendumReverified, "rcpt-req-9", "req-9", "acme")
	forged.Seq, forged.PrevHash = 5, a2.Hash
	forged.Hash = auditlog.HashAddendum(forged)
	must(t, s.SwapHead(ctx, "acme", 4, auditlog.Head{Seq: 5, Hash: forged.Hash, Addendum: &forged}))
	must(t, as.PutAddendum(ctx, forged))
	err = auditlog.VerifyChain(ctx, s, "acme")
	if !errors.Is(err, auditlog.ErrChainBroken) || !strings.Contains(err.Error(), "names no receipt") {
		t.Fatalf("VerifyChain with an addendum of no receipt = %v, want ErrChainBroken", err)
	}
}

// testSchedule checks the schedule: due tasks earliest first up to the limit, nothing
// that is not due, rescheduling moves a task, unscheduling removes it.
func testSchedule(t *testing.T, s auditlog.Store) {
	sc, ok := s.(auditlog.Scheduler)
	if !ok {
		t.Fatalf("%T has no schedule", s)
	}
	ctx := context.Background()
	if due, err := sc.Due(ctx, T0, 10); err != nil || len(due) != 0 {
		t.Fatalf("Due on an empty schedule = %v, %v", due, err)
	}
	var tasks []auditlog.Task // latest first: one call must reach back to the earliest's hour
	for i := range 6 {
		tasks = append(tasks, auditlog.Task{
			ID: fmt.Sprintf("t%d", i), Kind: auditlog.TaskSweep, RequestID: fmt.Sprintf("req-%d", i), TenantID: "acme",
			Due: T0.Add(time.Duration(5-i) * 90 * time.Minute), N: 1,
		})
	}
	if err := sc.Schedule(ctx, tasks[0], auditlog.Task{ID: "bad", Kind: auditlog.TaskSweep}); err == nil {
		t.Fatal("Schedule with a task without request or due succeeded")
	}
	if due, _ := sc.Due(ctx, T0.Add(24*time.Hour), 0); len(due) != 0 {
		t.Fatalf("a call refused for one bad task stored %d tasks", len(due))
	}
	must(t, sc.Schedule(ctx, tasks...))
	ids := func(ts []auditlog.Task) string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return strings.Join(out, ",")
	}
	due, err := sc.Due(ctx, T0.Add(3*90*time.Minute), 0)
	must(t, err)
	if got := ids(due); got != "t5,t4,t3,t2" {
		t.Fatalf("Due = %s, want t5,t4,t3,t2 (earliest first, none later)", got)
	}
	due, err = sc.Due(ctx, T0.Add(24*time.Hour), 2)
	must(t, err)
	if got := ids(due); got != "t5,t4" {
		t.Fatalf("Due with limit 2 = %s, want t5,t4", got)
	}
	must(t, sc.Unschedule(ctx, due[0]))
	must(t, sc.Unschedule(ctx, due[0])) // gone already: a no-op
	moved := due[1]
	moved.Due = T0.Add(48 * time.Hour)
	must(t, sc.Schedule(ctx, moved))
	due, err = sc.Due(ctx, T0.Add(24*time.Hour), 0)
	must(t, err)
	if got := ids(due); got != "t3,t2,t1,t0" {
		t.Fatalf("Due after unscheduling t5 and moving t4 = %s, want t3,t2,t1,t0", got)
	}
	due, err = sc.Due(ctx, T0.Add(49*time.Hour), 0)
	must(t, err)
	if got := ids(due); got != "t3,t2,t1,t0,t4" || due[4].RequestID != "req-4" || !due[4].Due.Equal(moved.Due) {
		t.Fatalf("Due later = %s (%v), want t4 last at its new time", got, due)
	}
}
