package aggregator

import (
	"context"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// The watchdog frames erasure.overdue as the topic's framing says, also on a topic renamed
// from the default (registered under its own subject on first use).
func TestWatchdogFramesOverdue(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	store := openRequest(t, t0, 100*time.Hour)
	for _, topic := range []string{event.TopicOverdue, "team.overdue"} {
		reg, _ := testenv.Registry(t, "single-object,"+topic+"=registry")
		prod := &capture{}
		w := &Watchdog{Store: store, Producer: prod, Topic: topic, Registry: reg, Now: func() time.Time { return t0.Add(55 * time.Hour) }}
		if err := w.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if len(prod.recs) != 1 {
			t.Fatalf("%s: %d records, want 1", topic, len(prod.recs))
		}
		rec := prod.recs[0]
		var o event.Overdue
		if rec.Topic != topic || rec.Value[0] != 0 {
			t.Errorf("record on %s starts %#x, want %s in the registry framing", rec.Topic, rec.Value[0], topic)
		}
		if err := reg.Decode(ctx, event.Overdues, rec.Value, &o); err != nil || o.RequestID != "r" || o.Threshold != 50 {
			t.Errorf("%s: record decodes to %+v, %v", topic, o, err)
		}
	}
}
