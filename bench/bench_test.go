package bench_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/bench"
)

// TestQuickRun runs the driver in quick mode and checks that results.json holds every
// figure, each with a positive value, and a baseline and ratio where Lethe is compared.
func TestQuickRun(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is required (Debian package redis-server)")
	}
	cfg := bench.Quick()
	cfg.Subjects, cfg.Rate, cfg.Throughput, cfg.InFlight, cfg.Burst = 2, 40, 40, 500, 30
	var log strings.Builder
	cfg.Log = &log
	res, err := bench.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	path := filepath.Join(t.TempDir(), "results.json")
	if err := res.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []bench.Result
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	byName := map[string]bench.Result{}
	for _, r := range got {
		if r.Name == "" || r.Unit == "" {
			t.Errorf("figure without name or unit: %+v", r)
		}
		byName[r.Name] = r
	}
	var want []string
	for _, store := range []string{"qdrant", "redis", "dataset"} {
		for _, size := range []string{"small", "large"} {
			want = append(want, store+"/"+size+"/erase_verify_p50", store+"/"+size+"/erase_verify_p95")
		}
		want = append(want, store+"/lethe_large_over_small_p50", store+"/baseline_large_over_small_p50")
	}
	for _, b := range []string{bench.BrokerKfake, bench.BrokerKafka} {
		want = append(want, b+"/e2e/latency_p50", b+"/e2e/latency_p95", b+"/e2e/latency_p99", b+"/e2e/receipts_of_submitted",
			b+"/e2e_low_rate/latency_p50", b+"/e2e_low_rate/latency_p95", b+"/e2e_low_rate/latency_p99",
			b+"/e2e/store_dataset_p50", b+"/e2e/store_dataset_p99", b+"/e2e/store_qdrant_p99", b+"/e2e/store_redis_p99",
			b+"/throughput/instances_1", b+"/throughput/instances_3", b+"/throughput/instances_3_over_1")
	}
	want = append(want, "qdrant/large/baseline_with_payload_index_p50", "redis/large/with_scan_fallback_p50",
		"memory/in_flight_peak", "memory/heap_inuse_idle", "memory/heap_inuse_at_peak", "memory/rss_idle", "memory/rss_at_peak",
		"burst/erasures_per_s", "burst/dataset_rewrites", "burst/subjects_per_rewrite_mean", "burst/rows_checked")
	for _, name := range want {
		r, ok := byName[name]
		switch {
		case !ok:
			t.Errorf("results.json lacks %s", name)
		case r.Value <= 0:
			t.Errorf("%s = %v %s, want a positive value", name, r.Value, r.Unit)
		case strings.Contains(name, "/erase_verify_") && (r.Baseline == nil || r.Ratio == nil || *r.Baseline <= 0):
			t.Errorf("%s has no baseline or ratio: %+v", name, r)
		}
	}
	if r, want := byName["burst/rows_checked"], float64(cfg.Burst+cfg.Large.DatasetRows); r.Value != want {
		t.Errorf("burst/rows_checked = %v, want the %v rows seeded", r.Value, want)
	}
	for _, b := range []string{bench.BrokerKfake, bench.BrokerKafka} {
		if r := byName[b+"/e2e/receipts_of_submitted"]; r.Value != 1 {
			t.Errorf("on %s only %v of the submitted erasures got a receipt", b, r.Value)
		}
	}
}
