package worker_test

import (
	"context"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// The worker frames its reports and finds as each topic's framing says: here store.done
// for the registry and store.found in single-object encoding; both decode through the
// Codec. Without a Registry (every other test) both are single-object.
func TestRecordsFollowTheTopicsFraming(t *testing.T) {
	ctx := context.Background()
	reg, _ := testenv.Registry(t, "registry,erasure.store.found=single-object")
	f := findingStore{newFake(map[string]*behaviour{"redis": {items: 3}}), &eventLog{}}
	w, addrs := setup(t, map[string]deletion.Store{"redis": f})
	w.Registry = reg
	if err := w.Handle(ctx, record(t, request([]string{"redis"}, nil, 1))); err != nil {
		t.Fatal(err)
	}
	dones := testenv.ReadTopic(t, addrs, event.TopicStoreDone)
	if len(dones) != 1 {
		t.Fatalf("%d reports, want 1", len(dones))
	}
	for _, r := range dones {
		var d event.StoreDone
		if r.Value[0] != 0 {
			t.Errorf("store.done record starts %#x, want the registry framing", r.Value[0])
		}
		if err := reg.Decode(ctx, event.Done, r.Value, &d); err != nil || d.Store != "redis" || d.Deleted() != 3 {
			t.Errorf("store.done record decodes to %+v, %v", d, err)
		}
	}
	founds := testenv.ReadTopic(t, addrs, event.TopicStoreFound)
	if len(founds) != 1 {
		t.Fatalf("%d finds, want 1", len(founds))
	}
	var fr event.StoreFound
	if err := event.Found.Decode(founds[0].Value, &fr); err != nil || fr.Found() != 3 {
		t.Errorf("store.found record is not single-object: %+v, %v", fr, err)
	}
}
