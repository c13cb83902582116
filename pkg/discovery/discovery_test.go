package discovery_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

type scripted struct {
	found []deletion.Uncovered
	err   error
}

func (s *scripted) Discover(context.Context, *inventory.Inventory, deletion.DiscoverOptions) ([]deletion.Uncovered, error) {
	return s.found, s.err
}

// A run records its report and the gauge; a failed run keeps the previous report and says
// why, masked.
func TestRunOnce(t *testing.T) {
	m := metrics.New()
	s := &scripted{found: []deletion.Uncovered{{Kind: "redis", Location: "crm:{tenant}:{id}", Reason: "r", Count: 2}}}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r := &discovery.Runner{Kind: "redis", Store: s, Inventory: inventory.Reference(), Metrics: m, Now: func() time.Time { return at }}
	if _, _, ok := r.LastRun("redis"); ok {
		t.Error("LastRun before any run says it ran")
	}
	rep := r.RunOnce(context.Background())
	if rep.RunAt == nil || !rep.RunAt.Equal(at) || len(rep.Uncovered) != 1 || rep.Error != "" {
		t.Fatalf("report %+v", rep)
	}
	if got, n, ok := (discovery.Set{r}).LastRun("redis"); !ok || !got.Equal(at) || n != 1 {
		t.Errorf("LastRun = %v %d %v", got, n, ok)
	}
	if v := testutil.ToFloat64(m.InventoryUncovered.WithLabelValues("redis")); v != 1 {
		t.Errorf("gauge %v, want 1", v)
	}
	s.found, s.err = nil, errors.New("scan: connection refused by jane.doe@example.com")
	rep = r.RunOnce(context.Background())
	if len(rep.Uncovered) != 1 || !rep.RunAt.Equal(at) || rep.Error == "" || strings.Contains(rep.Error, "jane.doe") {
		t.Errorf("failed run: %+v; want the previous report and a masked error", rep)
	}
	if _, _, ok := (discovery.Set{r}).LastRun("dataset"); ok {
		t.Error("LastRun of a kind without a runner says it ran")
	}
}

func TestSettings(t *testing.T) {
	env := map[string]string{"LETHE_DISCOVERY_INTERVAL": "15m", "LETHE_DISCOVERY_FIELDS": "kunde, email ", "LETHE_DISCOVERY_SAMPLE": "50", "LETHE_DISCOVERY_TENANTS": "acme,globex"}
	var s discovery.Settings
	err := envconf.Load(&s, func(k string) string { return env[k] })
	o := s.Options()
	if err != nil || o.Interval != 15*time.Minute || strings.Join(o.Fields, "|") != "kunde|email" || o.Sample != 50 || len(o.Tenants) != 2 {
		t.Errorf("Options = %+v, %v", o, err)
	}
	env["LETHE_DISCOVERY_INTERVAL"] = "soon"
	if err := envconf.Load(&s, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "LETHE_DISCOVERY_INTERVAL") {
		t.Errorf("bad interval: %v", err)
	}
	// The declared defaults are the stores' own.
	if err := envconf.Defaults(&s); err != nil || !slices.Equal(s.Fields, deletion.DefaultFields) || s.Sample != deletion.DefaultSample || s.Interval != time.Hour {
		t.Errorf("defaults %+v, %v; want deletion.DefaultFields, deletion.DefaultSample, hourly", s, err)
	}
}
