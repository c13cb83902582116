package chaos

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestScalingQuick runs the scaling measurement's quick path end to end (a few erasures,
// one and two instances of the dataset deleter, one of the others, no latency): every
// receipt is COMPLETE, only the scaled deleter has two instances, and the figures are
// there and positive. It asserts no timing.
func TestScalingQuick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Scaling(ctx, ScalingConfig{N: 12, Instances: []int{1, 2}, Scale: []string{"dataset-deleter"}, Latency: map[string]time.Duration{}, Warmup: 6,
		Dir: logDir(t), Log: tlog{t}})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	res.PrintTable(&table)
	t.Logf("figures:\n%s", table.String())
	if len(res.Phases) != 2 {
		t.Fatalf("%d phases, want 2", len(res.Phases))
	}
	for _, ph := range res.Phases {
		if ph.Erasures != 12 || ph.Complete != ph.Erasures || ph.Other != 0 {
			t.Errorf("%d instances: %d of %d receipts COMPLETE, %d other", ph.Instances, ph.Complete, ph.Erasures, ph.Other)
		}
		for _, svc := range sortedDeleters() {
			want := 1
			if svc == "dataset-deleter" {
				want = ph.Instances
			}
			if ph.Deployed[svc] != want {
				t.Errorf("%d instances: %s ran %d, want %d", ph.Instances, svc, ph.Deployed[svc], want)
			}
		}
		if ph.PerSecond <= 0 || ph.AckedPerSecond <= 0 {
			t.Errorf("%d instances: %.3f erasures/s, %.3f acks/s", ph.Instances, ph.PerSecond, ph.AckedPerSecond)
		}
		for st := range Deleters {
			if ph.StoreRate[st] <= 0 {
				t.Errorf("%d instances: no report rate for a %s store: %v", ph.Instances, st, ph.StoreRate)
			}
		}
		var total float64
		for _, svc := range Services {
			v, ok := ph.CPUPerErasure[svc]
			if !ok || v < 0 {
				t.Errorf("%d instances: CPU of %s = %v (%v)", ph.Instances, svc, v, ok)
			}
			total += v
		}
		if total <= 0 {
			t.Errorf("%d instances: the services used no CPU: %v", ph.Instances, ph.CPUPerErasure)
		}
	}
	out := filepath.Join(t.TempDir(), "scaling.json")
	if err := res.WriteJSON(out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var figs []Figure
	if err := json.Unmarshal(b, &figs); err != nil {
		t.Fatal(err)
	}
	names := map[string]float64{}
	for _, f := range figs {
		names[f.Name] = f.Value
	}
	for _, n := range []string{"scaling/batch_max=default/instances=1/erasures_per_s", "scaling/batch_max=default/instances=2/erasures_per_s",
		"scaling/batch_max=default/ratio_2_over_1", "scaling/batch_max=default/instances=1/steady_erasures_per_s"} {
		if names[n] <= 0 {
			t.Errorf("figure %s = %v in %s", n, names[n], b)
		}
	}
}

// statCPU reads utime and stime after the command name, which may hold spaces and
// parentheses.
func TestStatCPU(t *testing.T) {
	line := "4242 (data set) (x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 37 0 0 20 0 12 0 100 0 0\n"
	got, err := statCPU(line)
	if err != nil || got != 2870*time.Millisecond {
		t.Fatalf("statCPU = %s, %v; want 2.87s", got, err)
	}
	if _, err := statCPU("4242 (short) S 1 2"); err == nil {
		t.Fatal("a short line parsed")
	}
}

// rates leaves the burst's first and last tenth out of the steady rate: a slow tail (one
// instance finishing its share alone) lengthens the wall time but not the steady rate.
func TestRates(t *testing.T) {
	start := time.Unix(1000, 0)
	var ats []time.Time
	for i := range 100 {
		at := start.Add(time.Duration(i+1) * 10 * time.Millisecond)
		if i > 90 {
			at = start.Add(5 * time.Second)
		}
		ats = append(ats, at)
	}
	slices.Reverse(ats) // rates sorts them
	wall, steady := rates(start, ats)
	if wall != 5*time.Second {
		t.Errorf("wall = %s, want 5s", wall)
	}
	if steady < 99.9 || steady > 100.1 {
		t.Errorf("steady = %.2f/s, want 100/s (80 receipts in 800ms)", steady)
	}
	if _, s := rates(start, ats[:5]); s != 0 {
		t.Errorf("steady rate of 5 receipts = %v, want 0", s)
	}
}
