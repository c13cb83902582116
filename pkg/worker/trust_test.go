package worker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

const (
	macSecret   = "deployment-mac-secret-0123456789abcdef"
	otherSecret = "someone-elses-secret-0123456789abcdef"
)

func signed(t *testing.T, r *integrity.Ring, req event.Requested) *kgo.Record {
	t.Helper()
	rec := record(t, req)
	if err := integrity.Sign(r, event.Request, rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// A deleter with a key-encryption key erases only sealed subject requests: a request whose
// identifiers travel in the clear (anyone who can produce to erasure.requested can write
// one) touches no store, every store reports FAILED with the reason, so no receipt can
// follow, and the record is dead-lettered (a permanent error). The development switch
// accepts it.
func TestUnsealedSubjectRequestIsRefused(t *testing.T) {
	for _, dry := range []bool{false, true} {
		fake := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 2}})
		w, addrs := setup(t, map[string]deletion.Store{"redis": fake})
		w.Sealer = testenv.Sealer(t)
		req := request(allStores, nil, 1)
		req.DryRun = dry
		err := w.Handle(t.Context(), record(t, req))
		if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), "not sealed") {
			t.Fatalf("dry run %v: Handle = %v, want a permanent error saying the identifiers are not sealed", dry, err)
		}
		if n := len(fake.calls); n != 0 {
			t.Errorf("dry run %v: %d store calls for an unsealed request, want none", dry, n)
		}
		got := reports(t, addrs)
		if !slices.Equal(keys(got), []string{"langgraph", "redis"}) {
			t.Fatalf("dry run %v: reports for %v, want langgraph and redis", dry, keys(got))
		}
		for name, d := range got {
			if d.Status != event.StatusFailed || d.Error != worker.ReasonUnsealed || d.Verification.Remaining != -1 {
				t.Errorf("dry run %v: %s reported %s %q, want FAILED %q", dry, name, d.Status, d.Error, worker.ReasonUnsealed)
			}
		}
	}

	fake := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 2}})
	w, _ := setup(t, map[string]deletion.Store{"redis": fake})
	w.Sealer, w.AllowUnsealed = testenv.Sealer(t), true
	if err := w.Handle(t.Context(), record(t, request(allStores, nil, 1))); err != nil {
		t.Fatalf("with AllowUnsealed: %v", err)
	}
	if got := keys(fake.erased()); !slices.Equal(got, []string{"langgraph", "redis"}) {
		t.Errorf("with AllowUnsealed erased %v, want langgraph and redis", got)
	}
}

// A TENANT request carries no identifiers, so sealing does not apply to it (its MAC
// authenticates it); one that carries clear identifiers is refused.
func TestUnsealedTenantRequest(t *testing.T) {
	fake := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 2}})
	w, _ := setup(t, map[string]deletion.Store{"redis": fake})
	w.Sealer = testenv.Sealer(t)
	req := request(allStores, nil, 1)
	req.Scope, req.Identifiers = event.ScopeTenant, event.Identifiers{SessionIDs: []string{}}
	if err := w.Handle(t.Context(), record(t, req)); err != nil {
		t.Fatalf("TENANT request: %v", err)
	}
	if got := keys(fake.erased()); !slices.Equal(got, []string{"langgraph", "redis"}) {
		t.Errorf("TENANT request erased %v, want langgraph and redis", got)
	}
	req.RequestID, req.Identifiers = "er_2", event.Identifiers{SubjectID: "alice", SessionIDs: []string{}}
	if err := w.Handle(t.Context(), record(t, req)); !retry.IsPermanent(err) {
		t.Errorf("TENANT request with a clear subject id: %v, want it refused", err)
	}
}

// With a MAC key, a request without a valid MAC (unsigned, signed by another key, or
// altered after signing: here turned into a whole-tenant erasure) is refused before
// anything else: no store is touched and nothing is reported, since nothing in it can be
// believed. A signed request is erased, and its reports carry a MAC that verifies.
func TestRequestWithoutValidMACIsRefused(t *testing.T) {
	k := testenv.Ring(t, "mac1", macSecret)
	sealedReq, sealer := sealedRequest(t, testKEK(t))
	altered := signed(t, k, sealedReq)
	var tenantWide event.Requested
	if err := event.Request.Decode(altered.Value, &tenantWide); err != nil {
		t.Fatal(err)
	}
	tenantWide.Scope = event.ScopeTenant
	b, err := event.Request.Encode(&tenantWide)
	if err != nil {
		t.Fatal(err)
	}
	altered.Value = b
	for name, rec := range map[string]*kgo.Record{
		"unsigned":      record(t, sealedReq),
		"other key":     signed(t, testenv.Ring(t, "mac1", otherSecret), sealedReq),
		"unknown key":   signed(t, testenv.Ring(t, "mac9", macSecret), sealedReq),
		"altered":       altered,
		"malformed MAC": {Topic: event.TopicRequested, Value: record(t, sealedReq).Value, Headers: []kgo.RecordHeader{{Key: integrity.Header, Value: []byte("v1:mac1:00")}}},
	} {
		t.Run(name, func(t *testing.T) {
			fake := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 2}})
			w, addrs := setup(t, map[string]deletion.Store{"redis": fake})
			w.Sealer, w.MAC = sealer, k
			err := w.Handle(t.Context(), rec)
			if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), "request refused") {
				t.Fatalf("Handle = %v, want a permanent refusal", err)
			}
			if n := len(fake.calls); n != 0 {
				t.Errorf("%d store calls for a request without a valid MAC", n)
			}
			if got := reports(t, addrs); len(got) != 0 {
				t.Errorf("reports for %v, want none", keys(got))
			}
		})
	}

	fake := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 2}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": fake})
	w.Sealer, w.MAC = sealer, k
	if err := w.Handle(t.Context(), signed(t, k, sealedReq)); err != nil {
		t.Fatalf("signed request: %v", err)
	}
	if got := keys(fake.erased()); !slices.Equal(got, []string{"langgraph", "redis"}) {
		t.Errorf("signed request erased %v, want langgraph and redis", got)
	}
	recs := testenv.ReadTopic(t, addrs, event.TopicStoreDone)
	if len(recs) != 2 {
		t.Fatalf("%d reports, want 2", len(recs))
	}
	for _, r := range recs {
		if err := integrity.Verify(k, event.Done, r); err != nil {
			t.Errorf("report %s: %v", r.Key, err)
		}
	}
}

// What a Counter counted before an erase is signed too: the aggregator counts it.
func TestFindsAreSigned(t *testing.T) {
	k := testenv.Ring(t, "mac1", macSecret)
	fake := newFake(map[string]*behaviour{"redis": {items: 3}, "langgraph": {items: 2}})
	w, addrs := setup(t, map[string]deletion.Store{"redis": findingStore{fake, &eventLog{}}})
	w.MAC = k
	if err := w.Handle(t.Context(), signed(t, k, request(allStores, nil, 1))); err != nil {
		t.Fatal(err)
	}
	finds := testenv.ReadTopic(t, addrs, event.TopicStoreFound)
	if len(finds) != 2 {
		t.Fatalf("%d finds, want 2", len(finds))
	}
	for _, r := range finds {
		if err := integrity.Verify(k, event.Found, r); err != nil {
			t.Errorf("find: %v", err)
		}
	}
	if err := integrity.Verify(k, event.Done, finds[0]); !errors.Is(err, integrity.ErrMismatch) {
		t.Errorf("a find verified as a report: %v", err)
	}
}
