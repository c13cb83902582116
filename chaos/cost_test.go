package chaos

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCostQuick runs the cost measurement end to end on a few erasures: every receipt is
// COMPLETE, every service has CPU and allocation figures, each counts the calls it makes
// to the backends its work needs, the stand-ins' CPU is apart from the services', and the
// figures are named cost/<service>/<phase>/<figure>. It asserts no timing and no
// threshold: the thresholds are the bench's.
func TestCostQuick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Cost(ctx, CostConfig{Low: 3, Backlog: 12, Dir: logDir(t), Log: tlog{t}})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	res.PrintTable(&table)
	t.Logf("figures:\n%s", table.String())
	if len(res.Current.Phases) != len(CostPhases) {
		t.Fatalf("%d phases, want %d", len(res.Current.Phases), len(CostPhases))
	}
	needs := map[string][]string{ // what each service must be seen calling
		"intake": {"kafka", AuditTableCalls}, "aggregator": {"kafka", AuditTableCalls},
		"qdrant-deleter": {"kafka", "qdrant"}, "redis-deleter": {"kafka", "redis"},
		"dataset-deleter": {"kafka", "s3"}, "audit-verifier": {"kafka", AuditTableCalls},
	}
	for _, ph := range res.Current.Phases {
		if ph.Complete != ph.Erasures {
			t.Errorf("%s: %d of %d receipts COMPLETE", ph.Name, ph.Complete, ph.Erasures)
		}
		for _, svc := range Services {
			c, ok := ph.Services[svc]
			if !ok || c.CPUms < 0 || c.Allocs <= 0 {
				t.Errorf("%s: %s has CPU %.3f ms and %.0f allocations per erasure (measured: %v)", ph.Name, svc, c.CPUms, c.Allocs, ok)
			}
			for _, b := range needs[svc] {
				if c.Calls[b] <= 0 {
					t.Errorf("%s: %s made no %s calls: %v", ph.Name, svc, b, c.Calls)
				}
			}
			if c.Calls["s3"] > 0 && svc != "dataset-deleter" {
				t.Errorf("%s: %s counted S3 calls it does not make: %v", ph.Name, svc, c.Calls)
			}
		}
		for _, name := range []string{"kafka", "dynamodb", "s3", "qdrant", "redis"} {
			if _, ok := ph.StandIns[name]; !ok {
				t.Errorf("%s: no CPU figure of the stand-in %s: %v", ph.Name, name, ph.StandIns)
			}
			if _, ok := ph.Services[name]; ok {
				t.Errorf("%s: stand-in %s counted as a service", ph.Name, name)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(path, []byte(`[{"name":"e2e/x","value":1,"unit":"ms"},{"name":"cost/old","value":2,"unit":"ms"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MergeFigures(path, res.Figures()); err != nil {
		t.Fatal(err)
	}
	var figs []Figure
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &figs); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range figs {
		names[f.Name] = true
	}
	for _, want := range []string{"e2e/x", "cost/aggregator/backlog/cpu_ms_per_erasure", "cost/intake/low_rate/allocs_per_erasure",
		"cost/lethe/backlog/audit_table_calls_per_erasure", "cost/qdrant-deleter/low_rate/calls_per_erasure/qdrant", "cost/standins/dynamodb/backlog/cpu_ms_per_erasure"} {
		if !names[want] {
			t.Errorf("results lack %s", want)
		}
	}
	if names["cost/old"] {
		t.Error("an earlier run's cost figure was kept")
	}
}

func TestBackendOf(t *testing.T) {
	for series, want := range map[string]string{
		`lethe_backend_calls_total{backend="dynamodb",op="PutItem",target="lethe-audit"}`: "dynamodb/lethe-audit",
		`lethe_backend_calls_total{backend="kafka",op="Produce",target=""}`:               "kafka",
		`lethe_store_batch_subjects_count{op="erase",store="x"}`:                          "",
	} {
		got, ok := backendOf(series, false)
		if got != want || ok != (want != "") {
			t.Errorf("backendOf(%s) = %q, %v; want %q", series, got, ok, want)
		}
	}
}
