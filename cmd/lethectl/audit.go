package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/replay"
	"github.com/lethe-erasure/lethe/pkg/wal"
)

// auditStore is the injected audit store, else the DynamoDB table of --audit-table, else
// the directory store of --audit-dir, opened read-only: nothing in the directory is
// repaired, truncated or compacted, and a record that does not verify anywhere in its log
// is exit 4 naming the record. A directory must hold a store already: opening an empty
// one would make every check pass vacuously.
func (c *cli) auditStore(ctx context.Context) (auditlog.Table, error) {
	if c.audit != nil {
		return c.audit, nil
	}
	if table := c.env(c.g.auditTable, "LETHE_AUDIT_TABLE", ""); table != "" {
		ac, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("aws configuration: %w", err)
		}
		endpoint := c.getenv("LETHE_DYNAMODB_ENDPOINT")
		return dynamo.New(dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) {
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
			}
		}), table), nil
	}
	dir := c.env(c.g.auditDir, "LETHE_AUDIT_DIR", "")
	if dir == "" {
		return nil, usageErrorf("no audit store: pass --audit-table or --audit-dir (or set LETHE_AUDIT_TABLE or LETHE_AUDIT_DIR)")
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "wal-*.log")); len(logs) == 0 {
		return nil, withCode(exitNotFound, fmt.Errorf("%s holds no audit store (no wal-*.log)", dir))
	}
	s, err := auditlog.OpenDirReadOnly(dir)
	var dmg *wal.DamageError
	switch {
	case errors.As(err, &dmg):
		return nil, withCode(exitProblem, fmt.Errorf("the audit store does not verify: %w (nothing in %s was changed)", dmg, dir))
	case errors.Is(err, wal.ErrInUse):
		return nil, fmt.Errorf("%w: a running process has %s open; verify a copy of the directory, or stop that process", err, dir)
	case err != nil:
		return nil, err
	}
	return s, nil
}

const auditStoreHelp = `The audit store is --audit-table (DynamoDB; LETHE_DYNAMODB_ENDPOINT for DynamoDB Local)
or --audit-dir (the directory store of a standalone deployment: <data dir>/audit).
Nothing is written to it: a directory is read without repairing, truncating or
compacting anything, and a record of its log that does not verify (torn or corrupt,
anywhere) exits 4 naming the file, the offset and the record's position. A directory
that a running process has open cannot be read: verify a copy of it (cp -a), or stop
that process. The process that owns the store repairs a torn last record when it
starts, and logs what it cut.`

var auditReplayCmd = &command{
	name:    "audit replay",
	args:    "[--timeout D]",
	summary: "rebuild the audit trail from the topics and compare the audit table with it",
	help: `Reads erasure.requested, erasure.store.done and erasure.completed from their first
retained record to the end offsets seen at the start (no consumer group, nothing
committed), rebuilds every request from its events, and checks the audit table against
that trail: each stored receipt must be the one its reports justify and the one that was
published, every request complete per its reports must have a receipt, and every tenant's
receipt chain must verify. Prints the counts and every finding; exits 4 on any finding.
Requests in flight can show as findings (a receipt not yet published): run it again.
Records framed for the Schema Registry are decoded through LETHE_SCHEMA_REGISTRY_URL;
without it they count as undecodable.

` + auditStoreHelp,
	example: `lethectl audit replay --brokers kafka-1:9092 --audit-table lethe-audit
lethectl audit replay --brokers 127.0.0.1:9092 --audit-dir data/audit -o json | jq '.findings'`,
	exits: "0 no findings; 1 error; 2 usage; 4 findings or a damaged audit directory; 5 --timeout passed before the topics were read.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var timeout time.Duration
		fs.DurationVar(&timeout, "timeout", 5*time.Minute, "give up (exit 5) after this long")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			cfg, err := c.brokerConfig()
			if err != nil {
				return err
			}
			store, err := c.auditStore(ctx)
			if err != nil {
				return err
			}
			reg, err := c.registry(ctx)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			trail, err := replay.Rebuild(ctx, cfg, replay.Topics{}, reg)
			if err != nil {
				return brokerErr(ctx, cfg, timeout, err)
			}
			rep := replay.Compare(ctx, trail, store)
			if err := c.printReplay(trail, rep); err != nil {
				return err
			}
			if !rep.OK() {
				return withCode(exitProblem, fmt.Errorf("%d findings: the audit table differs from the event topics", len(rep.Findings)))
			}
			return nil
		}
	},
}

func (c *cli) printReplay(trail *replay.Trail, rep replay.Report) error {
	if c.json("table") {
		return printJSON(c.stdout, struct {
			Records map[string]int `json:"records"`
			replay.Report
		}{trail.Records, rep})
	}
	var topics []string
	total := 0
	for t, n := range trail.Records {
		topics = append(topics, fmt.Sprintf("%s %d", t, n))
		total += n
	}
	sort.Strings(topics)
	fmt.Fprintf(c.stdout, "read %d records (%s), %d undecodable\n", total, strings.Join(topics, ", "), rep.Undecodable)
	fmt.Fprintf(c.stdout, "rebuilt %d requests, %d complete per their reports; %d receipts published, %d stored; %d tenant chains checked\n",
		rep.Requests, rep.Complete, rep.Published, rep.Stored, rep.Tenants)
	if rep.OK() {
		fmt.Fprintln(c.stdout, "no findings: the audit table agrees with the event topics")
		return nil
	}
	tw := table(c.stdout)
	fmt.Fprintln(tw, "KIND\tREQUEST\tTENANT\tDETAIL")
	for _, f := range rep.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Kind, dash(f.RequestID), dash(f.TenantID), f.Detail)
	}
	return tw.Flush()
}

var auditVerifyChainCmd = &command{
	name:    "audit verify-chain",
	args:    "[--tenant T] [--keyed]",
	summary: "verify the hash chain of receipts, for one tenant or every tenant",
	help: `Checks each tenant's receipt chain (auditlog.VerifyChain): its receipts and their addenda
(re-verifications, reappearances, shredding, physical erasure) numbered 1..n without gap,
each matching its hash, each linked to the previous record's hash, each addendum after the
receipt it names, the head on the last. Without --tenant it checks every tenant with a stored request. A chain whose newest
receipt is linked but not yet written is reported as pending (the next receipt of the
tenant completes it) and is not a break. Exits 4 when a chain is broken or, for
--audit-dir, when any record of the store's log does not verify.

These checks need no key, so they cannot tell a chain the aggregator linked from one
that a writer of the audit table rebuilt with recomputed hashes. --keyed also checks the
chain MACs with the receipt chain key, LETHE_CHAIN_KEY or LETHE_CHAIN_KEY_FILE (with
LETHE_CHAIN_KEY_ID, and the keys of earlier rotations in LETHE_CHAIN_KEY_OLD as
id:key,...): every MAC a record carries must verify, and the head must carry one (it
vouches for every record before it). Records linked before the aggregator had the key
carry none; the result says up to which seq.

` + auditStoreHelp,
	example: `lethectl audit verify-chain --audit-dir data/audit
lethectl audit verify-chain --audit-table lethe-audit --tenant vastralaya -o json
LETHE_CHAIN_KEY_FILE=/run/secrets/chain-key lethectl audit verify-chain --audit-table lethe-audit --keyed`,
	exits: "0 every chain intact (or pending); 1 error; 2 usage; 3 no store in --audit-dir; 4 a chain is broken (with --keyed: a chain MAC fails or the head has none) or a record of the audit directory does not verify.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var tenant string
		var keyed bool
		fs.StringVar(&tenant, "tenant", "", "only this tenant (default every tenant with a stored request)")
		fs.BoolVar(&keyed, "keyed", false, "also check the chain MACs with LETHE_CHAIN_KEY")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			var key *integrity.Ring
			if keyed {
				var err error
				if key, err = c.chainRing(); err != nil {
					return err
				}
			}
			store, err := c.auditStore(ctx)
			if err != nil {
				return err
			}
			tenants := []string{tenant}
			if tenant == "" {
				if tenants, err = storedTenants(ctx, store); err != nil {
					return err
				}
			}
			return c.verifyChains(ctx, store, key, tenants)
		}
	},
}

// chainRing is the injected chain key, else LETHE_CHAIN_KEY's.
func (c *cli) chainRing() (*integrity.Ring, error) {
	return loadRing[integrity.ChainSettings](c, c.chainKey, "--keyed needs the receipt chain key: set LETHE_CHAIN_KEY or LETHE_CHAIN_KEY_FILE (with LETHE_CHAIN_KEY_ID and LETHE_CHAIN_KEY_OLD as the aggregator has them)")
}

// chainResult is one tenant's chain check.
type chainResult struct {
	Tenant   string `json:"tenant"`
	Receipts int    `json:"receipts"`
	Addenda  int    `json:"addenda"`
	Result   string `json:"result"` // ok, pending, broken
	Detail   string `json:"detail,omitempty"`
	// Keyed counts the records whose chain MAC verified, LastUnkeyed is the seq of the
	// last record without one (--keyed only).
	Keyed       *int  `json:"keyed,omitempty"`
	LastUnkeyed int64 `json:"last_unkeyed,omitempty"`
}

func (c *cli) verifyChains(ctx context.Context, store auditlog.Table, key *integrity.Ring, tenants []string) error {
	chain := auditlog.Chain{Store: store, Key: key}
	var out []chainResult
	broken := 0
	for _, t := range tenants {
		rs, err := store.Receipts(ctx, t)
		if err != nil {
			return fmt.Errorf("tenant %s: %w", t, err)
		}
		r := chainResult{Tenant: t, Receipts: len(rs), Result: "ok"}
		ads, err := store.TenantAddenda(ctx, t)
		if err != nil {
			return fmt.Errorf("tenant %s: %w", t, err)
		}
		r.Addenda = len(ads)
		v, err := chain.Verify(ctx, t)
		if chain.Key != nil && (err == nil || errors.Is(err, auditlog.ErrChainPending)) {
			r.Keyed, r.LastUnkeyed = &v.Keyed, v.LastUnkeyed
			r.Detail = fmt.Sprintf("%d of %d records carry a chain MAC that verifies", v.Keyed, v.Records)
			if v.LastUnkeyed > 0 {
				r.Detail += fmt.Sprintf("; none up to seq %d (linked before the chain key, vouched for by the head)", v.LastUnkeyed)
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, auditlog.ErrChainPending):
			r.Result, r.Detail = "pending", strings.TrimSuffix(err.Error()+"; "+r.Detail, "; ")
		case errors.Is(err, auditlog.ErrChainBroken):
			r.Result, r.Detail = "broken", err.Error()
			broken++
		default:
			return fmt.Errorf("tenant %s: %w", t, err)
		}
		out = append(out, r)
	}
	if c.json("table") {
		if err := printJSON(c.stdout, map[string]any{"tenants": append([]chainResult{}, out...)}); err != nil {
			return err
		}
	} else if len(out) == 0 {
		fmt.Fprintln(c.stdout, "no tenants with stored requests")
	} else {
		tw := table(c.stdout)
		fmt.Fprintln(tw, "TENANT\tRECEIPTS\tADDENDA\tCHAIN\tDETAIL")
		for _, r := range out {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", r.Tenant, r.Receipts, r.Addenda, r.Result, r.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if broken > 0 {
		return withCode(exitProblem, fmt.Errorf("%d of %d receipt chains broken", broken, len(out)))
	}
	return nil
}

// storedTenants are the tenants with a stored request, sorted.
func storedTenants(ctx context.Context, store auditlog.Store) ([]string, error) {
	reqs, err := store.ListRequests(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list requests: %w", err)
	}
	seen := map[string]bool{}
	for _, r := range reqs {
		seen[r.TenantID] = true
	}
	return keys(seen), nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
