package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/lethe-erasure/lethe/pkg/apiclient"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// waitGate follows a dry run until every store counted, or prints a request that waits at
// a gate (SCHEDULED, AWAITING_APPROVAL) as it stands.
func (c *cli) waitGate(ctx context.Context, api *apiclient.Client, id string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st, err := api.Status(ctx, id)
		if err != nil {
			return err
		}
		counted := true
		for _, s := range st.Stores {
			counted = counted && s.Status != intake.Pending
		}
		if st.State != intake.StatePreviewed || counted {
			return c.printState(st)
		}
		if time.Now().After(deadline) {
			return withCode(exitTimeout, fmt.Errorf("%s: the dry run did not finish within %s", id, timeout))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *cli) printState(st intake.Status) error {
	if c.json("table") {
		return printJSON(c.stdout, st)
	}
	return printStatus(c.stdout, st, time.Now())
}

// verbCmd is a workflow verb on one request: POST /v1/erasures/{id}/<verb>.
func verbCmd(verb, summary, help, exits string) *command {
	return &command{
		name:    verb,
		args:    "ID",
		summary: summary,
		help:    help,
		example: "lethectl " + verb + " er_6ebc4c5fc7aee916243a000c4fb91673",
		exits:   exits,
		setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				id, err := oneID(args)
				if err != nil {
					return err
				}
				api, err := c.apiClient()
				if err != nil {
					return err
				}
				st, err := api.Act(ctx, id, verb)
				if apiclient.IsNotFound(err) {
					return withCode(exitNotFound, fmt.Errorf("no such request %s", id))
				}
				if err != nil {
					return err
				}
				return c.printState(st)
			}
		},
	}
}

const verbExits = "0 done; 1 error or refused (403: not allowed; 409: not in a state that allows it); 2 usage; 3 no such request."

var (
	cancelCmd = verbCmd("cancel", "cancel a request within its cancellation window (SCHEDULED → CANCELLED)",
		`Cancels a request that waits out its cancellation window (SCHEDULED) or awaits approval.
The cancellation is recorded in the audit trail with the caller's name, and the request's
identifiers key is destroyed. After the window the request runs and cannot be cancelled (409).`, verbExits)
	approveCmd = verbCmd("approve", "approve a TENANT scope request as the second person (approver role)",
		`Approves a request awaiting approval (a TENANT scope offboarding). The caller's token must
carry the approver role and must not be the token that submitted the request. The request
then waits out its cancellation window, if one applies, or runs.`, verbExits)
	rejectCmd = verbCmd("reject", "reject a request awaiting approval (approver role)",
		`Rejects a request awaiting approval; it ends REJECTED and never runs.`, verbExits)
	confirmCmd = verbCmd("confirm", "turn a dry run (PREVIEWED) into a real erasure",
		`Confirms a dry run: the erasure it counted now runs (after approval and the cancellation
window, when they apply), its counts superseded by the real reports.`, verbExits)
)

var reviewCmd = &command{
	name:    "review",
	args:    "ID --store NAME --item ITEM (--erase | --dismiss --reason R)",
	summary: "decide on an item a receipt left for review: erase the copy, or dismiss it with a reason (approver role)",
	help: `Decides on an item of a receipt's review list (lethectl receipt ID lists them: probable
untagged copies of the subject's data). --erase has the item's store delete that item alone
and read it back; --dismiss keeps it, with the reason it is not the subject's. The decision,
and an erasure's outcome, are chained after the receipt as addenda (REVIEWED, ITEM_ERASED).
An item is decided once.`,
	example: `lethectl review er_6ebc4c5fc7aee916243a000c4fb91673 --store qdrant --item 900002 --erase
lethectl review er_6ebc4c5fc7aee916243a000c4fb91673 --store qdrant --item 900003 --dismiss --reason "shipping FAQ, not hers"`,
	exits: "0 decided; 1 error or refused (403: no approver role; 409: no receipt yet, or decided already); 2 usage or invalid (400); 3 no such request.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var in intake.ReviewRequest
		var erase, dismiss bool
		fs.StringVar(&in.Store, "store", "", "the item's store, as the review list names it")
		fs.StringVar(&in.Item, "item", "", "the item's id in the store")
		fs.BoolVar(&erase, "erase", false, "erase the item")
		fs.BoolVar(&dismiss, "dismiss", false, "keep the item: it is not the subject's (needs --reason)")
		fs.StringVar(&in.Reason, "reason", "", "why (free text; PII patterns are masked)")
		return func(ctx context.Context, args []string) error {
			id, err := oneID(args)
			if err != nil {
				return err
			}
			switch {
			case erase == dismiss:
				return usageErrorf("give one of --erase and --dismiss")
			case erase:
				in.Decision = event.ReviewErase
			default:
				in.Decision = event.ReviewDismiss
			}
			api, err := c.apiClient()
			if err != nil {
				return err
			}
			out, err := api.Review(ctx, id, in)
			if apiclient.IsNotFound(err) {
				return withCode(exitNotFound, fmt.Errorf("no such request %s", id))
			}
			if err != nil {
				return err
			}
			if c.json("text") {
				return printJSON(c.stdout, out)
			}
			_, err = fmt.Fprintf(c.stdout, "%s %s/%s: recorded as review %s; lethectl receipt %s shows its addenda\n",
				out.Decision.Decision, out.Decision.Store, out.Decision.Item, out.Review, id)
			return err
		}
	},
}

var holdCmd = &command{
	name:    "hold",
	args:    "--tenant T [--subject S] [--store NAME] --basis B [--reason R] | --release HOLD_ID | --list",
	summary: "place, list or release legal holds (a held store is not erased; the request ends PARTIAL)",
	help: `Places a legal hold on a subject of a tenant (--subject; '-' reads it from stdin) or on every
subject (none), in one store (--store) or every store (none), with its legal basis. While
it holds, erasures exempt those stores: they report EXEMPT with the basis, and the
request's receipt is PARTIAL. The subject is kept only as its pseudonym.
--release HOLD_ID releases a hold and re-drives the stores it exempted; --list lists the
holds of the tenant (--tenant) or of every tenant the token may see.`,
	example: `lethectl hold --tenant vastralaya --subject - --store dataset --basis "GDPR Art. 17(3)(e): case 2026-17" < subject.txt
lethectl hold --list --tenant vastralaya
lethectl hold --release hold_5b1c0a9e`,
	exits: "0 done; 1 error; 2 usage or invalid (400); 3 no such hold.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var in intake.HoldRequest
		var release string
		var list bool
		fs.StringVar(&in.TenantID, "tenant", "", "tenant id")
		fs.StringVar(&in.SubjectID, "subject", "", "subject id to hold; '-' reads it from stdin; none: every subject")
		fs.StringVar(&in.Store, "store", "", "inventory store to hold; none: every store")
		fs.StringVar(&in.LegalBasis, "basis", "", "legal basis of the hold (required to place one)")
		fs.StringVar(&in.Reason, "reason", "", "reason (free text; PII patterns are masked)")
		fs.StringVar(&release, "release", "", "release the hold with this id")
		fs.BoolVar(&list, "list", false, "list holds")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			api, err := c.apiClient()
			if err != nil {
				return err
			}
			switch {
			case list:
				q := url.Values{}
				if in.TenantID != "" {
					q.Set("tenant", in.TenantID)
				}
				var out struct {
					Holds []workflow.Hold `json:"holds"`
				}
				if err := api.Do(ctx, http.MethodGet, "/v1/holds", q, nil, nil, &out); err != nil {
					return err
				}
				if c.json("table") {
					return printJSON(c.stdout, out)
				}
				for _, h := range out.Holds {
					state := "active"
					if !h.Active() {
						state = "released by " + h.ReleasedBy
					}
					fmt.Fprintf(c.stdout, "%s  %s  store=%s  subject=%s  basis=%q  %s\n", h.ID, h.TenantID, or(h.Store, "*"), or(short(h.SubjectHash), "*"), h.LegalBasis, state)
				}
				return nil
			case release != "":
				var out intake.ReleaseResponse
				err := api.Do(ctx, http.MethodPost, "/v1/holds/"+url.PathEscape(release)+"/release", nil, nil, nil, &out)
				if apiclient.IsNotFound(err) {
					return withCode(exitNotFound, fmt.Errorf("no such hold %s", release))
				}
				if err != nil {
					return err
				}
				if c.json("table") {
					return printJSON(c.stdout, out)
				}
				fmt.Fprintf(c.stdout, "released %s; re-driven %d requests %v\n", out.Hold.ID, len(out.Redriven), out.Redriven)
				return nil
			}
			if in.TenantID == "" || in.LegalBasis == "" {
				return usageErrorf("--tenant and --basis are required to place a hold")
			}
			if in.SubjectID, err = c.readSubject(in.SubjectID); err != nil && in.SubjectID != "" {
				return err
			}
			var h workflow.Hold
			if err := api.Do(ctx, http.MethodPost, "/v1/holds", nil, nil, in, &h); err != nil {
				return err
			}
			if c.json("table") {
				return printJSON(c.stdout, h)
			}
			fmt.Fprintf(c.stdout, "placed %s on %s store=%s subject=%s\n", h.ID, h.TenantID, or(h.Store, "*"), or(short(h.SubjectHash), "*"))
			return nil
		}
	},
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}
