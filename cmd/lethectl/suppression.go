package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"

	"github.com/lethe-erasure/lethe/pkg/intake"
)

var suppressionCheckCmd = &command{
	name:    "suppression check",
	args:    "--tenant T [--subject S]... [--session X]...",
	summary: "ask whether subjects or sessions are erased (suppressed for ingestion)",
	help: `Asks the intake which of the given subject and session ids of the tenant are on its
suppression list: erased, so ingestion must not write their data again. The ids travel in
the request body; lethectl prints each by its position and pseudonym, never the id itself.
Exits 4 when any id is suppressed, so scripts can skip the record.`,
	example: `lethectl suppression check --tenant vastralaya --subject anna.schmidt@example.de --session sess-2026-11-a1
lethectl suppression check --tenant acme --subject cust-42 -o json | jq '.subjects[0].suppressed'`,
	exits: "0 none suppressed; 1 error; 2 usage or invalid request (400); 4 at least one id is suppressed.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var in intake.CheckRequest
		var subjects, sessions stringList
		fs.StringVar(&in.TenantID, "tenant", "", "tenant id (required)")
		fs.Var(&subjects, "subject", "a subject id (repeatable)")
		fs.Var(&sessions, "session", "a session id (repeatable)")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			if in.TenantID == "" || len(subjects)+len(sessions) == 0 {
				return usageErrorf("--tenant and at least one --subject or --session are required")
			}
			in.SubjectIDs, in.SessionIDs = nonNil(subjects), nonNil(sessions)
			api, err := c.apiClient()
			if err != nil {
				return err
			}
			var out intake.CheckResponse
			if err := api.Do(ctx, http.MethodPost, "/v1/suppressions/check", nil, nil, in, &out); err != nil {
				return err
			}
			n := 0
			for _, r := range append(append([]intake.CheckResult{}, out.Subjects...), out.Sessions...) {
				if r.Suppressed {
					n++
				}
			}
			if c.json("table") {
				err = printJSON(c.stdout, out)
			} else {
				err = printCheck(c, out)
			}
			if err == nil && n > 0 {
				return withCode(exitProblem, fmt.Errorf("%d of %d ids are suppressed", n, len(out.Subjects)+len(out.Sessions)))
			}
			return err
		}
	},
}

func printCheck(c *cli, out intake.CheckResponse) error {
	tw := table(c.stdout)
	fmt.Fprintln(tw, "ID\tPSEUDONYM\tSTATE\tREQUEST\tRECEIPT")
	row := func(kind string, i int, r intake.CheckResult) {
		state := "not suppressed"
		switch {
		case r.Suppressed:
			state = "SUPPRESSED by " + r.By
		case r.Lifted:
			state = "lifted by consent"
		}
		fmt.Fprintf(tw, "%s %d\t%.16s\t%s\t%s\t%s\n", kind, i+1, r.Pseudonym, state, dash(r.RequestID), dash(r.ReceiptID))
	}
	for i, r := range out.Subjects {
		row("subject", i, r)
	}
	for i, r := range out.Sessions {
		row("session", i, r)
	}
	return tw.Flush()
}

var suppressionLiftCmd = &command{
	name:    "suppression lift",
	args:    "--tenant T [--subject S]... [--session X]... --reason R",
	summary: "lift suppressions on the data subject's new consent (recorded in the audit trail)",
	help: `Lifts the suppression of the given ids on the basis of the data subject's new consent. The
token must name the tenant itself (an operator's wildcard token is refused). For each
suppressed id the intake records an audit event (its pseudonym, the token's principal and
the reason, PII masked) before it lifts the entry, and publishes it on
erasure.suppressions. The reason must not hold the ids; refer to the consent record.`,
	example: `lethectl --token "$ACME_PRIVACY_TOKEN" suppression lift --tenant acme --subject cust-42 \
    --reason "consent record CR-2291 of 2026-12-01"`,
	exits: "0 lifted (or nothing to lift); 1 error (403: the token may not lift for this tenant); 2 usage or invalid request (400).",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		in := intake.LiftRequest{Basis: intake.BasisConsent}
		var subjects, sessions stringList
		fs.StringVar(&in.TenantID, "tenant", "", "tenant id (required)")
		fs.Var(&subjects, "subject", "a subject id (repeatable)")
		fs.Var(&sessions, "session", "a session id (repeatable)")
		fs.StringVar(&in.Reason, "reason", "", "why: the reference of the consent record (required; no ids)")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			if in.TenantID == "" || in.Reason == "" || len(subjects)+len(sessions) == 0 {
				return usageErrorf("--tenant, --reason and at least one --subject or --session are required")
			}
			in.SubjectIDs, in.SessionIDs = nonNil(subjects), nonNil(sessions)
			api, err := c.apiClient()
			if err != nil {
				return err
			}
			var out intake.LiftResponse
			if err := api.Do(ctx, http.MethodPost, "/v1/suppressions/lift", nil, nil, in, &out); err != nil {
				return err
			}
			if c.json("table") {
				return printJSON(c.stdout, out)
			}
			tw := table(c.stdout)
			fmt.Fprintln(tw, "ID\tPSEUDONYM\tOUTCOME\tAUDIT EVENT")
			for i, r := range out.Subjects {
				fmt.Fprintf(tw, "subject %d\t%.16s\t%s\t%s\n", i+1, r.Pseudonym, r.Outcome, dash(r.LiftEventID))
			}
			for i, r := range out.Sessions {
				fmt.Fprintf(tw, "session %d\t%.16s\t%s\t%s\n", i+1, r.Pseudonym, r.Outcome, dash(r.LiftEventID))
			}
			return tw.Flush()
		}
	},
}

func nonNil(l stringList) []string {
	if l == nil {
		return []string{}
	}
	return l
}
