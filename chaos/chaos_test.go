package chaos

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// tlog writes the harness's progress to the test log.
type tlog struct{ t *testing.T }

func (w tlog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// logDir is a directory for a run's logs and data, removed after the test unless it failed.
func logDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "lethe-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// TestChaos is the short run: 200 erasures while services and the broker are SIGKILLed
// and restarted. Every acknowledged request must end in exactly one receipt, every store
// read back clean for the erased and intact for the others.
func TestChaos(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{N: 200, Kills: 8, Gap: 700 * time.Millisecond, MaxDown: 700 * time.Millisecond,
		Deadline: 3 * time.Minute, Dir: logDir(t), Log: tlog{t}})
	if res != nil {
		t.Logf("figures:\n%s", res)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.totalKills() < 6 || res.Restarts != res.totalKills() {
		t.Errorf("chaos did not happen as configured: %d kills, %d restarts", res.totalKills(), res.Restarts)
	}
	if !res.OK() || res.Receipts != res.Acknowledged || res.Acknowledged != res.Requests {
		t.Fatalf("delivery guarantee broken: %d acknowledged, %d receipts, %d duplicates, %d lost, %d problems",
			res.Acknowledged, res.Receipts, res.Duplicates, res.Lost, len(res.Problems))
	}
}

// TestScaleDeleterGroup grows the redis-deleter group from 1 to 3 instances and back
// (orderly) while 150 erasures flow: no request is lost or receipted twice.
func TestScaleDeleterGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{N: 150, Kills: -1, Gap: 8 * time.Second, Scale: "redis-deleter",
		Deadline: 2 * time.Minute, Dir: logDir(t), Log: tlog{t}})
	if res != nil {
		t.Logf("figures:\n%s", res)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ScaleEvents) != 2 {
		t.Errorf("scaling did not happen: %v", res.ScaleEvents)
	}
	if !res.OK() || res.Receipts != res.Requests || res.Duplicates != 0 || res.Lost != 0 {
		t.Fatalf("delivery guarantee broken while scaling: %d receipts of %d, %d duplicates, %d lost", res.Receipts, res.Requests, res.Duplicates, res.Lost)
	}
}
