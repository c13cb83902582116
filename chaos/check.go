package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/replay"
)

// Result is the outcome of a run: its figures and every broken guarantee found.
type Result struct {
	Requests       int            // erasure requests submitted
	Acknowledged   int            // of those, answered 202
	Unacknowledged int            // never answered 202 before the deadline
	SubmitRetries  int            // submissions sent again with the same Idempotency-Key
	Kills          map[string]int // SIGKILLs by target
	Broker         string         // the Kafka under the run (Brokers.Version)
	BrokerKills    []string       // each broker node killed, with its roles then
	// LeaderElections and ControllerElections are the increases of partition and KRaft
	// quorum leader epochs the cluster's metadata showed during the run.
	LeaderElections, ControllerElections int
	Restarts                             int
	ScaleEvents                          []string
	Receipts                             int      // acknowledged requests with a stored receipt
	Duplicates                           int      // receipts beyond the first stored for one request
	Lost                                 int      // acknowledged requests without a receipt at the deadline
	Unexpected                           int      // receipts of requests never acknowledged
	Redriven                             int      // re-drives of FAILED stores through the retry endpoint
	FailedReports                        []string // FAILED store reports seen (request, attempt, store, reason)
	Replay                               replay.Report
	Findings                             map[replay.Kind]int
	Chains                               int // tenants whose receipt chain verified
	StoreChecks                          int // subject×store read-backs that matched expectations
	Submit, Drain                        time.Duration
	Wall                                 time.Duration // from the first submission to the last receipt
	Seed                                 uint64
	Dir                                  string
	Problems                             []string // broken guarantees: the run fails
	// Defects are inaccuracies of the evidence: receipts whose counts differ from the
	// latest stored reports (replay receipt_mismatch) or that report NOTHING_FOUND with zero
	// deleted for a store the subject demonstrably had data in. They fail the run as
	// problems do: a receipt must count what was deleted, also after a crash.
	Defects []string

	mu sync.Mutex
}

func (r *Result) problem(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
}

func (r *Result) defect(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Defects = append(r.Defects, fmt.Sprintf(format, a...))
}

func (r *Result) count(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
}

func (r *Result) totalKills() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range r.Kills {
		n += k
	}
	return n
}

// OK reports whether every guarantee held and the evidence is exact (no defect).
func (r *Result) OK() bool { return len(r.Problems) == 0 && len(r.Defects) == 0 }

// String prints the figures and the problems.
func (r *Result) String() string {
	var b strings.Builder
	var kills []string
	for k, n := range r.Kills {
		kills = append(kills, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kills)
	var findings []string
	for k, n := range r.Findings {
		findings = append(findings, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(findings)
	if len(findings) == 0 {
		findings = []string{"none"}
	}
	fmt.Fprintf(&b, "requests %d  acknowledged %d  unacknowledged %d  submission retries %d\n", r.Requests, r.Acknowledged, r.Unacknowledged, r.SubmitRetries)
	fmt.Fprintf(&b, "kills %d (%s)  restarts %d  scaling %v\n", r.totalKills(), strings.Join(kills, " "), r.Restarts, r.ScaleEvents)
	fmt.Fprintf(&b, "broker %s: %d node kills, elections seen: %d partition leaders, %d controller\n", r.Broker, len(r.BrokerKills), r.LeaderElections, r.ControllerElections)
	for _, k := range r.BrokerKills {
		fmt.Fprintf(&b, "  killed %s\n", k)
	}
	fmt.Fprintf(&b, "receipts %d  duplicates %d  lost %d  unexpected %d  failed reports %d  re-driven %d\n", r.Receipts, r.Duplicates, r.Lost, r.Unexpected, len(r.FailedReports), r.Redriven)
	fmt.Fprintf(&b, "replay: %d requests, %d complete, %d published, %d stored, %d undecodable; findings: %s\n", r.Replay.Requests, r.Replay.Complete, r.Replay.Published, r.Replay.Stored, r.Replay.Undecodable, strings.Join(findings, " "))
	fmt.Fprintf(&b, "chains verified %d  store read-backs ok %d  defects %d\n", r.Chains, r.StoreChecks, len(r.Defects))
	fmt.Fprintf(&b, "wall %s (submitting %s, draining %s)  seed %d  logs %s\n", r.Wall.Round(time.Millisecond), r.Submit.Round(time.Millisecond), r.Drain.Round(time.Millisecond), r.Seed, r.Dir)
	for _, f := range r.FailedReports {
		fmt.Fprintf(&b, "  failed report: %s\n", f)
	}
	for _, d := range r.Defects {
		fmt.Fprintf(&b, "  DEFECT: %s\n", d)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  PROBLEM: %s\n", p)
	}
	return b.String()
}

// check verifies the outcome against the audit table, the event trail and the stores.
func check(ctx context.Context, sys *System, pop *Population, acked map[int]string, before []Footprint, res *Result) error {
	ackedIDs := map[string]bool{}
	for _, id := range acked {
		ackedIDs[id] = true
	}
	// Exactly one receipt per acknowledged request, proving every store clean.
	for idx, id := range acked {
		rc, err := sys.Audit.GetReceipt(ctx, id)
		if errors.Is(err, auditlog.ErrNotFound) {
			res.Lost++
			st, serr := sys.Status(ctx, id)
			res.problem("lost: subject %d request %s has no receipt (state %s, stores %+v, status error %v)", idx, id, st.State, st.Stores, serr)
			continue
		}
		if err != nil {
			return fmt.Errorf("chaos: read receipt: %w", err)
		}
		res.Receipts++
		if rc.Status != event.ReceiptComplete || len(rc.Stores) != len(sys.Inventory.Stores) {
			res.problem("receipt %s: status %s with %d stores", id, rc.Status, len(rc.Stores))
		}
		for _, s := range rc.Stores {
			if !s.Verification.Clean() || s.Status == event.StatusFailed {
				res.problem("receipt %s: store %s %s remaining %d unexamined %d", id, s.Store, s.Status,
					s.Verification.Remaining, s.Verification.Unexamined)
			}
			if s.Status != event.StatusNoPII && s.Deleted == 0 {
				res.defect("receipt %s understates: store %s %s deleted 0, but the subject's data was seeded there and is gone", id, s.Store, s.Status)
			}
		}
	}
	// One receipt per request id in each tenant's chain, which must verify.
	for _, t := range pop.Tenants {
		rcs, err := sys.Audit.Receipts(ctx, t)
		if err != nil {
			return fmt.Errorf("chaos: list receipts: %w", err)
		}
		seen := map[string]int{}
		for _, rc := range rcs {
			if seen[rc.RequestID]++; seen[rc.RequestID] > 1 {
				res.Duplicates++
				res.problem("duplicate receipt for %s in tenant %s", rc.RequestID, t)
			}
			if !ackedIDs[rc.RequestID] {
				res.Unexpected++
			}
		}
		if err := verifySettled(ctx, sys, t); err != nil {
			res.problem("chain of %s: %v", t, err)
		} else {
			res.Chains++
		}
	}
	// The audit table against the event trail.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	trail, err := replay.Rebuild(rctx, sys.Broker, replay.Topics{}, nil) // the services run without a registry: single-object records
	if err != nil {
		return fmt.Errorf("chaos: replay: %w", err)
	}
	res.Replay = replay.Compare(ctx, trail, sys.Audit)
	res.Findings = map[replay.Kind]int{}
	for _, f := range res.Replay.Findings {
		res.Findings[f.Kind]++
		switch f.Kind {
		case replay.KindChainPending:
		case replay.KindReceiptMismatch:
			res.defect("replay %s: request %s: %s", f.Kind, f.RequestID, f.Detail)
		default:
			res.problem("replay finding %s: request %s: %s", f.Kind, f.RequestID, f.Detail)
		}
	}
	// Read every store back: the erased are gone, the others intact.
	after, err := sys.Footprints(ctx, pop)
	if err != nil {
		return fmt.Errorf("chaos: read back: %w", err)
	}
	for _, sub := range pop.Subjects {
		b, a := before[sub.Index], after[sub.Index]
		if b.Qdrant == 0 || b.Redis == 0 || b.DatasetCurrent == 0 {
			res.problem("seed: subject %d had no data in a store: %+v", sub.Index, b)
		}
		_, erased := acked[sub.Index]
		switch {
		case erased && (a.Qdrant != 0 || a.Redis != 0 || a.DatasetAll != 0):
			res.problem("subject %d was erased but the stores hold %+v", sub.Index, a)
		case !erased && sub.Erase:
			// never acknowledged: no expectation
		case !erased && (a.Qdrant != b.Qdrant || a.Redis != b.Redis || a.DatasetCurrent != b.DatasetCurrent):
			res.problem("bystander %d changed: before %+v, after %+v", sub.Index, b, a)
		default:
			res.StoreChecks += 3
		}
	}
	return nil
}

// verifySettled verifies tenant's chain, waiting up to a minute while its head is pending:
// the system is still running, and a receipt or a re-verification sweep's addendum may be
// between its head and its record. A head that stays pending that long is reported.
func verifySettled(ctx context.Context, sys *System, tenant string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := auditlog.VerifyChain(ctx, sys.Audit, tenant)
		if !errors.Is(err, auditlog.ErrChainPending) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
