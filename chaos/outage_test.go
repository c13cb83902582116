package chaos

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/intake"
)

// outageEnv is a running system with seeded subjects and a watcher, for outage tests.
type outageEnv struct {
	t    *testing.T
	sys  *System
	pop  *Population
	w    *Watcher
	next int // next subject to erase
}

func newOutageEnv(t *testing.T, n int) *outageEnv {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sys, err := Start(ctx, root, logDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	pop := NewPopulation(n, 4)
	if err := sys.Seed(ctx, pop); err != nil {
		t.Fatal(err)
	}
	w, err := Watch(sys.Broker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return &outageEnv{t: t, sys: sys, pop: pop, w: w}
}

// submit erases the next k subjects in the background, retrying until acknowledged;
// wait returns their request ids by subject.
func (e *outageEnv) submit(k int) (wait func() map[*Subject]string) {
	subs := e.pop.Erased()[e.next : e.next+k]
	e.next += k
	done := make(chan map[*Subject]string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ids := map[*Subject]string{}
		for _, s := range subs {
			id, _, err := e.sys.Submit(ctx, s, "outage-"+s.ID)
			if err != nil {
				e.t.Errorf("submit: %v", err)
				continue
			}
			ids[s] = id
		}
		done <- ids
	}()
	return func() map[*Subject]string { return <-done }
}

// until polls cond every 50 ms until it holds or d passes.
func until(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// receipted waits until every request has exactly one stored receipt and the subjects'
// data is gone from every store.
func (e *outageEnv) receipted(ids map[*Subject]string, d time.Duration) {
	e.t.Helper()
	ok := until(d, func() bool {
		for _, id := range ids {
			if !e.w.Completed(id) {
				return false
			}
		}
		return true
	})
	ctx := context.Background()
	if !ok {
		for _, id := range ids {
			if !e.w.Completed(id) {
				st, err := e.sys.Status(ctx, id)
				e.t.Logf("request %s without receipt: status %+v %v", id, st, err)
			}
		}
		e.t.Fatalf("not every request got a receipt within %s", d)
	}
	fps, err := e.sys.Footprints(ctx, e.pop)
	if err != nil {
		e.t.Fatal(err)
	}
	for s, id := range ids {
		rcs, err := e.sys.Audit.Receipts(ctx, s.Tenant)
		if err != nil {
			e.t.Fatal(err)
		}
		n := 0
		for _, rc := range rcs {
			if rc.RequestID == id {
				n++
			}
		}
		if n != 1 {
			e.t.Errorf("request %s has %d receipts, want 1", id, n)
		}
		if fp := fps[s.Index]; fp.Qdrant+fp.Redis+fp.DatasetAll != 0 {
			e.t.Errorf("request %s receipted but the stores hold %+v", id, fp)
		}
	}
}

// TestStoreOutageWithinBudget takes each store down for 800 ms while requests flow and
// brings it back: the deleters' capped-backoff retries ride it out, the other stores'
// reports keep arriving meanwhile, and every request completes with one receipt.
func TestStoreOutageWithinBudget(t *testing.T) {
	e := newOutageEnv(t, 48)
	for _, store := range Stores {
		t.Run(store, func(t *testing.T) {
			e.t = t
			before := e.submit(4)
			firstIDs := before()
			down := time.Now()
			e.sys.Proxies[store].Down()
			during := e.submit(4)
			time.Sleep(800 * time.Millisecond)
			e.sys.Proxies[store].Up()
			up := time.Now()
			ids := during()
			for s, id := range firstIDs {
				ids[s] = id
			}
			e.receipted(ids, 2*time.Minute)
			flow := e.w.ReportsBetween(down, up)
			t.Logf("%s down %s: reports that arrived meanwhile by store: %v; requests %d", store, up.Sub(down).Round(time.Millisecond), flow, len(ids))
			if store != "dynamodb" { // the data-key table is in DynamoDB: every deleter waits for it
				others := 0
				for st, n := range flow {
					if !slices.Contains(affected[store], st) {
						others += n
					}
				}
				if others == 0 {
					t.Errorf("no other store reported while %s was down", store)
				}
			}
		})
	}
}

// affected are the inventory stores each component outage touches.
var affected = map[string][]string{"redis": {"redis", "langgraph"}, "qdrant": {"qdrant"}, "s3": {"dataset"}, "dynamodb": {"audit_log"}}

// TestStoreOutagePastBudget keeps a store down past the deleters' retry budget: the
// store reports FAILED with a reason, the request's status is FAILED naming it, no
// receipt is issued; after recovery, POST /v1/erasures/{id}/retry yields exactly one
// receipt. For DynamoDB (audit table and data keys) nothing is accepted while it is
// down, and requests in flight complete after recovery.
func TestStoreOutagePastBudget(t *testing.T) {
	e := newOutageEnv(t, 32)
	ctx := context.Background()
	for _, store := range []string{"redis", "qdrant", "s3"} {
		t.Run(store, func(t *testing.T) {
			e.t = t
			e.sys.Proxies[store].Down()
			ids := e.submit(2)()
			for _, id := range ids {
				if !until(30*time.Second, func() bool { return len(e.w.Failed(id, 1)) > 0 }) {
					t.Fatalf("request %s: no FAILED report while %s is down", id, store)
				}
				// The status follows the reports the aggregator has consumed: wait for it.
				var st intake.Status
				var err error
				until(10*time.Second, func() bool {
					st, err = e.sys.Status(ctx, id)
					return err == nil && st.State == intake.StateFailed
				})
				if err != nil {
					t.Fatal(err)
				}
				if st.State != intake.StateFailed {
					t.Errorf("request %s: state %s, want FAILED", id, st.State)
				}
				var failed []string
				for _, ss := range st.Stores {
					if ss.Status == "FAILED" {
						failed = append(failed, ss.Store)
						if ss.Error == "" {
							t.Errorf("store %s FAILED without a reason", ss.Store)
						}
						t.Logf("%s: %s FAILED: %s", id, ss.Store, ss.Error)
					}
				}
				if !slices.Equal(failed, affected[store]) && !(store == "redis" && len(failed) > 0) {
					t.Errorf("failed stores %v, want %v", failed, affected[store])
				}
				if _, err := e.sys.Audit.GetReceipt(ctx, id); err == nil {
					t.Errorf("request %s has a receipt though %s failed", id, store)
				}
			}
			e.sys.Proxies[store].Up()
			for s, id := range ids {
				if err := e.sys.Retry(ctx, id, s, nil); err != nil {
					t.Fatal(err)
				}
			}
			e.receipted(ids, time.Minute)
		})
	}
	t.Run("dynamodb", func(t *testing.T) {
		e.t = t
		inflight := e.submit(2)()
		e.sys.Proxies["dynamodb"].Down()
		var acc intake.Accepted
		sub := e.pop.Erased()[e.next]
		code, err := e.sys.call(ctx, http.MethodPost, "/v1/erasures", "", []byte(`{"tenant_id":"`+sub.Tenant+`","subject_id":"`+sub.ID+`","regulation":"GDPR"}`), &acc)
		if err != nil || code < 500 {
			t.Errorf("submission while DynamoDB is down: %d %v, want a 5xx and nothing accepted", code, err)
		}
		t.Logf("submission while DynamoDB is down answered %d", code)
		time.Sleep(3 * time.Second)
		e.sys.Proxies["dynamodb"].Up()
		e.receipted(inflight, time.Minute)
	})
}
