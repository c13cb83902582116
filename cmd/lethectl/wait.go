package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/apiclient"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
)

// Polling of a followed request: the first polls come quickly (an erasure on a healthy
// system takes milliseconds), then back off.
const (
	firstPoll = 10 * time.Millisecond
	maxPoll   = 500 * time.Millisecond
	// notRecordedGrace is how long a 404 right after acceptance counts as "not recorded yet".
	notRecordedGrace = 5 * time.Second
)

// follow polls request id until its receipt exists (printed on stdout), a store of the
// followed attempt reports FAILED (the status printed on stdout, exit 4), or timeout
// passes (exit 5). It prints one line per store state change on stderr with the SLA
// clock: time since start and time left until the due date. attempt > 0 follows a
// re-drive of the stores in only (every store when empty): their reports of earlier
// attempts are not final.
func (c *cli) follow(ctx context.Context, api *apiclient.Client, id string, start time.Time, attempt int, only []string, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	current := func(s intake.StoreState) bool {
		redriven := attempt > 0 && (len(only) == 0 || slices.Contains(only, s.Store))
		return s.Status != intake.Pending && (!redriven || s.Attempt >= attempt)
	}
	seen := map[string]string{}
	interval := firstPoll
	var last intake.Status
	announced := false
	for {
		st, err := api.Status(wctx, id)
		switch {
		case err == nil:
			last = st
		case wctx.Err() != nil:
		case apiclient.IsNotFound(err) && time.Since(start) < notRecordedGrace:
		default:
			return err
		}
		if err == nil {
			if !announced {
				fmt.Fprintf(c.stderr, "waiting for %d stores: %s\n", len(st.Stores), storeNames(st))
				announced = true
			}
			failed := false
			for _, s := range st.Stores {
				if !current(s) {
					continue
				}
				key := fmt.Sprintf("%s/%d", s.Status, s.Attempt)
				if seen[s.Store] != key {
					seen[s.Store] = key
					fmt.Fprintln(c.stderr, progressLine(s, start, st.DueAt, time.Now()))
				}
				failed = failed || s.Status == event.StatusFailed
			}
			switch {
			case st.State == intake.StateComplete:
				return c.finish(wctx, api, id, start)
			case st.State == intake.StateIncomplete:
				if perr := c.printStatusOut(st); perr != nil {
					return perr
				}
				return withCode(exitProblem, incomplete(st))
			case failed:
				if perr := c.printStatusOut(st); perr != nil {
					return perr
				}
				return withCode(exitProblem, fmt.Errorf("%w: request %s: %s; fix the cause, then: lethectl retry %s --subject <id> [--session <id>]...%s",
					errFailed, id, failedStores(st), id, storeFlags(st)))
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return withCode(exitTimeout, fmt.Errorf("timed out after %s waiting for request %s: %s", timeout, id, waitingFor(last, current)))
		case <-time.After(interval):
		}
		interval = min(interval*3/2, maxPoll)
	}
}

// incomplete is the error of an INCOMPLETE request: what to do.
func incomplete(st intake.Status) error {
	return fmt.Errorf("request %s is INCOMPLETE: data of its subject sits outside the inventory (OUTSIDE THE INVENTORY above); add the suggested entries to the inventory, restart the services with it, then: lethectl retry %s --subject <id> [--session <id>]... --store <new store>",
		st.RequestID, st.RequestID)
}

// finish prints the receipt of a complete request.
func (c *cli) finish(ctx context.Context, api *apiclient.Client, id string, start time.Time) error {
	rc, err := api.Receipt(ctx, id)
	if err != nil {
		return fmt.Errorf("request %s is complete, but its receipt could not be read: %w", id, err)
	}
	fmt.Fprintf(c.stderr, "COMPLETE: receipt %s %s after submission (%d ms from request to receipt)\n", rc.ReceiptID, fmtDur(time.Since(start)), rc.ElapsedMS)
	if c.json("table") {
		return printJSON(c.stdout, rc)
	}
	return printReceipt(c.stdout, rc, nil)
}

func (c *cli) printStatusOut(st intake.Status) error {
	if c.json("table") {
		return printJSON(c.stdout, st)
	}
	return printStatus(c.stdout, st, time.Now())
}

// progressLine is one store's state change with the SLA clock.
func progressLine(s intake.StoreState, start, due, now time.Time) string {
	line := fmt.Sprintf("  %7s  %-15s  %-10s %-16s deleted %-5d remaining %s", "+"+fmtDur(now.Sub(start)), fmtLeft(due, now), s.Store, s.Status, s.Deleted, remaining(s.Remaining))
	if s.Attempt > 1 {
		line += fmt.Sprintf("  attempt %d", s.Attempt)
	}
	if s.Error != "" {
		line += "  error: " + s.Error
	}
	return line
}

// storeFlags are the --store flags that re-drive the FAILED stores of st.
func storeFlags(st intake.Status) string {
	var b strings.Builder
	for _, s := range st.Stores {
		if s.Status == event.StatusFailed {
			b.WriteString(" --store " + s.Store)
		}
	}
	return b.String()
}

func storeNames(st intake.Status) string {
	names := make([]string, len(st.Stores))
	for i, s := range st.Stores {
		names[i] = s.Store
	}
	return strings.Join(names, ", ")
}

// waitingFor describes what a timed-out wait still waited for.
func waitingFor(st intake.Status, current func(intake.StoreState) bool) string {
	if st.RequestID == "" {
		return "the request was never found"
	}
	var pending []string
	for _, s := range st.Stores {
		if !current(s) {
			pending = append(pending, s.Store)
		}
	}
	if len(pending) == 0 {
		return fmt.Sprintf("state %s, every store reported, no receipt yet", st.State)
	}
	return fmt.Sprintf("state %s, no report yet from %s", st.State, strings.Join(pending, ", "))
}
