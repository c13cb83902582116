package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/apiclient"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
)

var submitCmd = &command{
	name:    "submit",
	args:    "--tenant T --subject S [--session X]... [flags]",
	summary: "submit an erasure request; with --wait, follow it to its receipt",
	help: `Submits an erasure request to the intake API. The intake pseudonymises the subject and
answers with the request id and the due date; nothing it answers holds the raw subject or
session ids, and lethectl never prints them.

Without --wait it prints the accepted request. With --wait it follows the request: one
line per store state change on stderr, each with the SLA clock (time elapsed since
submission, time left until the due date), and ends by printing the receipt on stdout
(json: the receipt object; table: a readable summary). If a store reports FAILED it
prints the request's status on stdout instead and exits 4; re-drive with 'lethectl retry'.

The subject id is personal data: '--subject -' reads it from the first line of stdin
instead of the command line (which shells keep in their history).`,
	example: `lethectl submit --tenant vastralaya --subject anna.schmidt@example.de \
    --session sess-2026-11-a1 --session sess-2025-10-legacy --wait
printf '%s\n' "$SUBJECT" | lethectl submit --tenant vastralaya --subject - --wait -o json | jq .status
lethectl submit --tenant acme --scope TENANT --regulation LGPD --idempotency-key offboard-acme
lethectl submit --tenant vastralaya --subject - --dry-run --wait < subject.txt`,
	exits: "0 accepted (with --wait: receipt COMPLETE); 1 error; 2 usage or invalid request (400); 4 a store FAILED; 5 --timeout passed.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var r intake.SubmitRequest
		var sessions stringList
		var scope, key string
		var wait bool
		var timeout time.Duration
		fs.BoolVar(&r.DryRun, "dry-run", false, "count per store what the erasure would delete; delete nothing (the request ends PREVIEWED: 'lethectl confirm ID' runs it)")
		fs.StringVar(&r.TenantID, "tenant", "", "tenant id (required)")
		fs.StringVar(&r.SubjectID, "subject", "", "subject (customer) id; '-' reads it from stdin (required for SUBJECT scope)")
		fs.Var(&sessions, "session", "a known session id of the subject (repeatable)")
		fs.StringVar(&r.Regulation, "regulation", "GDPR", "regulation: GDPR, LGPD, PDPA, CCPA (sets the due date)")
		fs.StringVar(&scope, "scope", "SUBJECT", "SUBJECT (one data subject) or TENANT (offboard the whole tenant)")
		fs.StringVar(&key, "idempotency-key", "", "Idempotency-Key: resubmitting with the same key returns the same request")
		fs.BoolVar(&wait, "wait", false, "follow the request and print its receipt")
		fs.DurationVar(&timeout, "timeout", 60*time.Second, "with --wait: give up (exit 5) after this long")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			if r.TenantID == "" {
				return usageErrorf("--tenant is required")
			}
			r.Scope = event.Scope(strings.ToUpper(scope))
			if r.Scope != event.ScopeSubject && r.Scope != event.ScopeTenant {
				return usageErrorf("--scope must be SUBJECT or TENANT")
			}
			if r.Scope == event.ScopeSubject && r.SubjectID == "" {
				return usageErrorf("--subject is required for SUBJECT scope")
			}
			var err error
			if r.SubjectID, err = c.readSubject(r.SubjectID); err != nil {
				return err
			}
			r.SessionIDs = sessions
			return c.submit(ctx, r, key, wait, timeout)
		}
	},
}

// readSubject returns s, or the first line of stdin when s is "-".
func (c *cli) readSubject(s string) (string, error) {
	if s != "-" {
		return s, nil
	}
	line, err := bufio.NewReader(c.stdin).ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", usageErrorf("--subject -: stdin holds no subject id (%v)", err)
	}
	return line, nil
}

func (c *cli) submit(ctx context.Context, r intake.SubmitRequest, key string, wait bool, timeout time.Duration) error {
	api, err := c.apiClient()
	if err != nil {
		return err
	}
	start := time.Now()
	acc, err := api.Submit(ctx, r, key)
	if err != nil {
		return err
	}
	if !wait {
		if c.json("table") {
			return printJSON(c.stdout, acc)
		}
		fmt.Fprintf(c.stdout, "accepted %s (due %s)\nstatus:  lethectl status %s\nreceipt: lethectl receipt %s\n",
			acc.RequestID, formatTime(acc.DueAt), acc.RequestID, acc.RequestID)
		return nil
	}
	fmt.Fprintf(c.stderr, "accepted %s in %s (due %s)\n", acc.RequestID, fmtDur(time.Since(start)), formatTime(acc.DueAt))
	if r.DryRun || acc.State != "" {
		return c.waitGate(ctx, api, acc.RequestID, timeout)
	}
	return c.follow(ctx, api, acc.RequestID, start, 0, nil, timeout)
}

var statusCmd = &command{
	name:    "status",
	args:    "ID | --tenant T --key K [--wait]",
	summary: "show a request's state, SLA clock and per-store progress",
	help: `Shows the state of one request (PENDING, IN_PROGRESS, FAILED, INCOMPLETE, COMPLETE), its due
date and whether it is overdue, and each expected store's status, deleted and remaining
counts, attempt and error. --tenant and --key find the request by the idempotency key it
was submitted with, as a producer on erasure.intake does: a record the intake refused
answers REJECTED with the reason. With --wait it follows the request to its receipt and
prints it, as submit --wait does. Exits 4 when the request is FAILED, INCOMPLETE or
REJECTED, so scripts can alert on it.`,
	example: `lethectl status er_6ebc4c5fc7aee916243a000c4fb91673
lethectl status --tenant acme --key order-4711-erasure --wait
lethectl status er_6ebc4c5fc7aee916243a000c4fb91673 -o json | jq -r .state`,
	exits: "0 found (PENDING, IN_PROGRESS or COMPLETE; with --wait: receipt COMPLETE); 1 error; 2 usage; 3 no such request; 4 the request is FAILED, INCOMPLETE or REJECTED; 5 --timeout passed.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var tenant, key string
		var wait bool
		var timeout time.Duration
		fs.StringVar(&tenant, "tenant", "", "with --key: the tenant the request was submitted for")
		fs.StringVar(&key, "key", "", "find the request by its idempotency key (needs --tenant)")
		fs.BoolVar(&wait, "wait", false, "follow the request to its receipt, as submit --wait does")
		fs.DurationVar(&timeout, "timeout", 60*time.Second, "with --wait: give up (exit 5) after this long")
		return func(ctx context.Context, args []string) error {
			var id string
			var err error
			switch {
			case key == "" && tenant == "":
				id, err = oneID(args)
			case key == "" || tenant == "" || len(args) > 0:
				err = usageErrorf("give a request id, or --tenant and --key")
			}
			if err != nil {
				return err
			}
			api, err := c.apiClient()
			if err != nil {
				return err
			}
			var st intake.Status
			if key != "" {
				st, err = api.ByKey(ctx, tenant, key)
				id = "with idempotency key " + key
			} else {
				st, err = api.Status(ctx, id)
			}
			if apiclient.IsNotFound(err) {
				return withCode(exitNotFound, fmt.Errorf("no such request %s", id))
			}
			if err != nil {
				return err
			}
			if wait && st.Rejection == nil {
				return c.follow(ctx, api, st.RequestID, time.Now(), 0, nil, timeout)
			}
			if c.json("table") {
				err = printJSON(c.stdout, st)
			} else {
				err = printStatus(c.stdout, st, time.Now())
			}
			if err == nil && st.State == intake.StateFailed {
				return withCode(exitProblem, fmt.Errorf("request %s is FAILED: %s", id, failedStores(st)))
			}
			if err == nil && st.State == intake.StateIncomplete {
				return withCode(exitProblem, incomplete(st))
			}
			if err == nil && st.Rejection != nil {
				return withCode(exitProblem, fmt.Errorf("the intake refused the record %s: %s", id, st.Rejection.Reason))
			}
			return err
		}
	},
}

var listCmd = &command{
	name:    "list",
	args:    "[--tenant T] [--state S] [--overdue] [--limit N]",
	summary: "list requests, newest first",
	help: `Lists requests, newest first, with their state, due date and how many stores reported.
Filters combine: --tenant, --state (PENDING, IN_PROGRESS, FAILED, COMPLETE), --overdue.
With a token limited to one tenant the server lists that tenant's requests.`,
	example: `lethectl list --tenant vastralaya
lethectl list --state FAILED
lethectl list --overdue -o json | jq -r '.requests[].request_id'`,
	exits: "0 listed (also when none matched); 1 error; 2 usage.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var f intake.ListFilter
		fs.StringVar(&f.Tenant, "tenant", "", "only this tenant's requests")
		fs.StringVar(&f.State, "state", "", "only requests in this state: PENDING, IN_PROGRESS, FAILED, INCOMPLETE, COMPLETE")
		fs.BoolVar(&f.Overdue, "overdue", false, "only requests past their due date without a receipt")
		fs.IntVar(&f.Limit, "limit", 100, "at most this many (1-1000)")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			f.State = strings.ToUpper(f.State)
			switch f.State {
			case "", intake.StatePending, intake.StateInProgress, intake.StateFailed, intake.StateIncomplete, intake.StateComplete:
			default:
				return usageErrorf("--state must be PENDING, IN_PROGRESS, FAILED, INCOMPLETE or COMPLETE")
			}
			if f.Limit < 1 || f.Limit > 1000 {
				return usageErrorf("--limit must be 1-1000")
			}
			api, err := c.apiClient()
			if err != nil {
				return err
			}
			list, err := api.List(ctx, f)
			if err != nil {
				return err
			}
			if c.json("table") {
				return printJSON(c.stdout, map[string]any{"requests": list})
			}
			return printList(c.stdout, list, time.Now())
		}
	},
}

var receiptCmd = &command{
	name:    "receipt",
	args:    "ID [--summary]",
	summary: "print a request's deletion receipt (JSON; --summary for people)",
	help: `Prints the deletion receipt of a completed request: JSON by default (the evidence to
archive), or a readable summary with --summary (or -o table). The receipt holds the
subject's keyed pseudonym, each store's status, counts and verification, when its
identifiers will be shredded and each store's bytes physically erased, and the hash that
chains it to the tenant's previous record. Its addenda follow — facts learnt after the
receipt, each chained after it: REVERIFIED and REAPPEARED (a sweep or a re-apply found
the store clean, or found the subject again and erased it), UNVERIFIED, SHREDDED (the
data key destroyed) and PHYSICAL (the store's bytes gone). In JSON they are the receipt's
"addenda" member, which its hash does not cover (each addendum has its own). A request
without a receipt yet exits 3.`,
	example: `lethectl receipt er_6ebc4c5fc7aee916243a000c4fb91673 > receipt.json
lethectl receipt er_6ebc4c5fc7aee916243a000c4fb91673 --summary`,
	exits: "0 printed; 1 error; 2 usage; 3 no such request, or no receipt yet.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var summary bool
		fs.BoolVar(&summary, "summary", false, "print a readable summary instead of JSON")
		return func(ctx context.Context, args []string) error {
			id, err := oneID(args)
			if err != nil {
				return err
			}
			api, err := c.apiClient()
			if err != nil {
				return err
			}
			rc, err := api.Receipt(ctx, id)
			if apiclient.IsNotFound(err) {
				if st, serr := api.Status(ctx, id); serr == nil {
					return withCode(exitNotFound, fmt.Errorf("request %s has no receipt yet: it is %s", id, st.State))
				}
				return withCode(exitNotFound, fmt.Errorf("no such request %s", id))
			}
			if err != nil {
				return err
			}
			ads, err := api.Addenda(ctx, id)
			if err != nil && !apiclient.IsNotFound(err) { // an intake of an earlier version serves no addenda
				return fmt.Errorf("addenda: %w", err)
			}
			if summary || c.g.output == "table" {
				return printReceipt(c.stdout, rc, ads)
			}
			return printJSON(c.stdout, receiptWithAddenda{Receipt: rc, Addenda: append([]auditlog.Addendum{}, ads...)})
		}
	},
}

var retryCmd = &command{
	name:    "retry",
	args:    "ID --subject S [--session X]... [--store NAME]... [--wait]",
	summary: "re-drive a request's stores (after a FAILED store's cause is fixed)",
	help: `Re-drives a request that is not complete: publishes it again with the next attempt
number, for the stores named by --store (default: every expected store). Lethe keeps no
raw identifiers, so the subject id and session ids must be given again; the server checks
that they match the request's pseudonym. A TENANT scope request takes no --subject.
'--subject -' reads the subject id from the first line of stdin.

With --wait it follows the new attempt as 'submit --wait' does.`,
	example: `lethectl retry er_6ebc4c5fc7aee916243a000c4fb91673 --subject anna.schmidt@example.de \
    --session sess-2026-11-a1 --session sess-2025-10-legacy --store dataset --wait`,
	exits: "0 re-driven (with --wait: receipt COMPLETE); 1 error; 2 usage, or the server refused (400: e.g. the request is complete, the ids do not match); 3 no such request; 4 a store FAILED again; 5 --timeout passed.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var r intake.RetryRequest
		var sessions, stores stringList
		var wait bool
		var timeout time.Duration
		fs.StringVar(&r.SubjectID, "subject", "", "the request's subject id, again; '-' reads it from stdin")
		fs.Var(&sessions, "session", "a known session id of the subject (repeatable)")
		fs.Var(&stores, "store", "an inventory store to re-drive (repeatable; default every expected store)")
		fs.BoolVar(&wait, "wait", false, "follow the new attempt and print the receipt")
		fs.DurationVar(&timeout, "timeout", 60*time.Second, "with --wait: give up (exit 5) after this long")
		return func(ctx context.Context, args []string) error {
			id, err := oneID(args)
			if err != nil {
				return err
			}
			if r.SubjectID, err = c.readSubject(r.SubjectID); err != nil {
				return err
			}
			r.SessionIDs, r.Stores = sessions, stores
			api, err := c.apiClient()
			if err != nil {
				return err
			}
			start := time.Now()
			out, err := api.Retry(ctx, id, r)
			if apiclient.IsNotFound(err) {
				return withCode(exitNotFound, fmt.Errorf("no such request %s", id))
			}
			if err != nil {
				return err
			}
			which := "every store"
			if len(out.Stores) > 0 {
				which = strings.Join(out.Stores, ", ")
			}
			if !wait {
				if c.json("table") {
					return printJSON(c.stdout, out)
				}
				fmt.Fprintf(c.stdout, "re-driving %s, attempt %d: %s\n", out.RequestID, out.Attempt, which)
				return nil
			}
			fmt.Fprintf(c.stderr, "re-driving %s, attempt %d: %s\n", out.RequestID, out.Attempt, which)
			return c.follow(ctx, api, out.RequestID, start, out.Attempt, out.Stores, timeout)
		}
	},
}

// oneID returns the single request id of args.
func oneID(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "", usageErrorf("a request id is required")
	case len(args) > 1:
		return "", usageErrorf("one request id expected, got %d arguments", len(args))
	case strings.TrimSpace(args[0]) == "":
		return "", usageErrorf("the request id is empty")
	}
	return args[0], nil
}

// failedStores describes the FAILED stores of st.
func failedStores(st intake.Status) string {
	var parts []string
	for _, s := range st.Stores {
		if s.Status == event.StatusFailed {
			p := s.Store
			if s.Error != "" {
				p += " (" + s.Error + ")"
			}
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "no store failed"
	}
	return "store " + strings.Join(parts, ", ")
}

// errFailed ends a followed request one of whose stores reported FAILED.
var errFailed = errors.New("a store reported FAILED")
