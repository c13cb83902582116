package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

var reapplyCmd = &command{
	name:    "reapply",
	args:    "--tenant T --store S --since TIME [--wait=false] [--timeout D]",
	summary: "re-run every erasure completed since TIME on one store (after restoring it from a backup)",
	help: `After a store was restored from a backup, the erasures completed since the backup was
taken are undone in it. reapply finds, in the audit store, every receipt of the tenant
completed at or after --since that covers --store, and publishes each request again on
erasure.requested for that store only, marked REAPPLY: its deleter erases again
(idempotent) and verifies by reading back, and the aggregator records the outcome as an
addendum chained after the receipt (REVERIFIED, REAPPEARED when it erased something, or
UNVERIFIED). With --wait (the default) it follows the store's reports and prints each
outcome as it arrives.

Requests whose identifiers are already shredded (their data key destroyed after the
retention, LETHE_RETAIN) cannot be re-run: they are listed as shredded. Their subjects'
pseudonyms stay on the suppression list, so ingestion does not write them back.

--since is an RFC 3339 time (2026-11-30T00:00:00Z) or a duration back from now (72h).

The re-drives are framed as LETHE_FRAMING says for erasure.requested (with
LETHE_SCHEMA_REGISTRY_URL, as the services read them); reports are read in either framing.
They are signed with the services' record MAC key, LETHE_MAC_KEY (or LETHE_MAC_KEY_FILE):
deleters refuse a request without a valid MAC.`,
	example: `lethectl reapply --tenant acme --store redis --since 2026-11-30T00:00:00Z --audit-table lethe-audit
lethectl reapply --tenant acme --store qdrant --since 72h --wait=false`,
	exits: "0 every request re-applied (or none to do); 1 error; 2 usage; 4 some store could not be verified clean; 5 --timeout passed before every report.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var tenant, store, since string
		wait := true
		var timeout time.Duration
		fs.StringVar(&tenant, "tenant", "", "the tenant (required)")
		fs.StringVar(&store, "store", "", "the inventory store that was restored (required)")
		fs.StringVar(&since, "since", "", "re-apply erasures completed at or after this time (required)")
		fs.BoolVar(&wait, "wait", true, "follow the store's reports until every request reported")
		fs.DurationVar(&timeout, "timeout", 10*time.Minute, "give up waiting (exit 5) after this long")
		return func(ctx context.Context, args []string) error {
			if len(args) != 0 {
				return usageErrorf("reapply takes no arguments, got %d", len(args))
			}
			if tenant == "" || store == "" || since == "" {
				return usageErrorf("--tenant, --store and --since are required")
			}
			from, err := parseSince(since, time.Now())
			if err != nil {
				return usageErrorf("--since: %v", err)
			}
			return c.reapply(ctx, tenant, store, from, wait, timeout)
		}
	},
}

// macKey is the injected record MAC key, else LETHE_MAC_KEY's.
func (c *cli) macKey() (*integrity.Ring, error) {
	return loadRing[integrity.MACSettings](c, c.mac, "no record MAC key: set LETHE_MAC_KEY or LETHE_MAC_KEY_FILE (with LETHE_MAC_KEY_ID) as the services have them; deleters refuse unsigned requests")
}

// loadRing is injected when set, else the key ring that settings S declare in the
// environment; missing is the usage error when S declares none.
func loadRing[S any, P interface {
	*S
	Ring() (*integrity.Ring, error)
}](c *cli, injected *integrity.Ring, missing string) (*integrity.Ring, error) {
	if injected != nil {
		return injected, nil
	}
	var s S
	if err := envconf.Load(&s, c.getenv); err != nil {
		return nil, usageErrorf("%v", err)
	}
	r, err := P(&s).Ring()
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	if r == nil {
		return nil, usageErrorf("%s", missing)
	}
	return r, nil
}

// parseSince reads an RFC 3339 time or a duration back from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration such as 72h", s)
	}
	return now.Add(-d), nil
}

// reapplied is one request's line of the outcome.
type reapplied struct {
	RequestID   string    `json:"request_id"`
	CompletedAt time.Time `json:"completed_at"`
	Outcome     string    `json:"outcome"` // published, shredded, or the addendum type its report makes
	Deleted     int64     `json:"deleted,omitempty"`
	ShreddedAt  time.Time `json:"shredded_at,omitzero"`
}

func (c *cli) reapply(ctx context.Context, tenant, store string, since time.Time, wait bool, timeout time.Duration) error {
	audit, err := c.auditStore(ctx)
	if err != nil {
		return err
	}
	rcs, err := audit.Receipts(ctx, tenant)
	if err != nil {
		return fmt.Errorf("read receipts: %w", err)
	}
	var todo []reapplied
	var reqs []auditlog.Request
	for _, rc := range rcs {
		if rc.CompletedAt.Before(since) || !slices.ContainsFunc(rc.Stores, func(s event.StoreEvidence) bool { return s.Store == store }) {
			continue
		}
		req, err := audit.GetRequest(ctx, rc.RequestID)
		if err != nil {
			return fmt.Errorf("read request %s: %w", rc.RequestID, err)
		}
		line := reapplied{RequestID: rc.RequestID, CompletedAt: rc.CompletedAt, Outcome: "published"}
		if at, gone, err := shredded(ctx, audit, rc, req); err != nil {
			return err
		} else if gone {
			line.Outcome, line.ShreddedAt = "shredded", at
		} else {
			reqs = append(reqs, req)
		}
		todo = append(todo, line)
	}
	if len(todo) == 0 {
		fmt.Fprintf(c.stderr, "no erasure of tenant %s covering store %s completed since %s\n", tenant, store, formatTime(since))
		return c.printReapplied(todo)
	}
	reg, err := c.registry(ctx)
	if err != nil {
		return err
	}
	mac, err := c.macKey()
	if err != nil {
		return err
	}
	cfg, cl, err := c.brokerClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Reports are read from the end offsets before publishing, so none is missed.
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, event.TopicStoreDone)
	if err != nil {
		return brokerErr(ctx, cfg, timeout, err)
	}
	pass := "reapply-" + time.Now().UTC().Format("20060102T150405.000Z")
	for i, req := range reqs {
		ev := aggregator.RedriveEvent(req, event.PurposeReapply, pass, []string{store})
		b, err := reg.EncodeFor(event.TopicRequested, event.Request, &ev)
		if err != nil {
			return err
		}
		rec := &kgo.Record{Topic: event.TopicRequested, Key: []byte(req.RequestID), Value: b}
		if err := integrity.Sign(mac, event.Request, rec); err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			return brokerErr(ctx, cfg, timeout, fmt.Errorf("publish %s (%d of %d published before): %w", req.RequestID, i, len(reqs), err))
		}
		fmt.Fprintf(c.stderr, "re-applying %d/%d %s\n", i+1, len(reqs), req.RequestID)
	}
	for _, l := range todo {
		if l.Outcome == "shredded" {
			fmt.Fprintf(c.stderr, "shredded  %s: identifiers destroyed at %s; not re-run (its pseudonym stays suppressed)\n", l.RequestID, formatTime(l.ShreddedAt))
		}
	}
	if !wait || len(reqs) == 0 {
		return c.printReapplied(todo)
	}
	reports, err := c.followPass(ctx, cfg.Options(), reg, ends, pass, store, len(reqs))
	for i := range todo {
		if d, ok := reports[todo[i].RequestID]; ok {
			todo[i].Outcome, todo[i].Deleted = outcomeOf(d), d.Deleted()
		}
	}
	if perr := c.printReapplied(todo); perr != nil {
		return perr
	}
	if err != nil {
		if ctx.Err() != nil {
			return withCode(exitTimeout, fmt.Errorf("%d of %d reports arrived before the timeout: %w", len(reports), len(reqs), err))
		}
		return err
	}
	for _, d := range reports {
		if outcomeOf(d) == auditlog.AddendumUnverified {
			return withCode(exitProblem, errors.New("some requests could not be verified clean; see UNVERIFIED above"))
		}
	}
	return nil
}

// shredded reports whether the request's identifiers can no longer be opened, and when
// they were destroyed: at the receipt (a receipt without identifiers_shred_at), by the
// retention (a SHREDDED addendum), or never sealed.
func shredded(ctx context.Context, audit auditlog.Addenda, rc event.Receipt, req auditlog.Request) (time.Time, bool, error) {
	if rc.IdentifiersShredAt == nil || req.Sealed == nil {
		return rc.CompletedAt, true, nil
	}
	a, err := audit.GetAddendum(ctx, rc.RequestID+"/shredded")
	if err == nil {
		return a.At, true, nil
	}
	if !errors.Is(err, auditlog.ErrNotFound) {
		return time.Time{}, false, fmt.Errorf("read addenda of %s: %w", rc.RequestID, err)
	}
	return time.Time{}, false, nil
}

// outcomeOf is the addendum type the aggregator makes of a pass report.
func outcomeOf(d event.StoreDone) string {
	switch {
	case !d.Status.Succeeded() || !d.Verification.Clean():
		return auditlog.AddendumUnverified
	case d.Deleted() > 0:
		return auditlog.AddendumReappeared
	}
	return auditlog.AddendumReverified
}

// followPass reads erasure.store.done from ends until n requests reported store for pass,
// printing each as it arrives. Reports are read in either framing (reg.Decode).
func (c *cli) followPass(ctx context.Context, opts []kgo.Opt, reg *schemareg.Codec, ends kadm.ListedOffsets, pass, store string, n int) (map[string]event.StoreDone, error) {
	from := map[string]map[int32]kgo.Offset{event.TopicStoreDone: {}}
	ends.Each(func(o kadm.ListedOffset) { from[o.Topic][o.Partition] = kgo.NewOffset().At(o.Offset) })
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(from))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got := map[string]event.StoreDone{}
	for len(got) < n {
		f := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return got, err
		}
		f.EachRecord(func(r *kgo.Record) {
			var d event.StoreDone
			if reg.Decode(ctx, event.Done, r.Value, &d) != nil || d.Pass != pass || d.Store != store {
				return
			}
			if _, seen := got[d.RequestID]; !seen {
				got[d.RequestID] = d
				fmt.Fprintf(c.stderr, "reported  %d/%d %s: %s, %d deleted\n", len(got), n, d.RequestID, outcomeOf(d), d.Deleted())
			}
		})
	}
	return got, nil
}

func (c *cli) printReapplied(lines []reapplied) error {
	if c.json("table") {
		return printJSON(c.stdout, map[string]any{"requests": lines})
	}
	tw := table(c.stdout)
	fmt.Fprintln(tw, "REQUEST\tCOMPLETED\tOUTCOME\tDELETED")
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", l.RequestID, formatTime(l.CompletedAt), l.Outcome, l.Deleted)
	}
	return tw.Flush()
}
