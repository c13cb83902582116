package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
)

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table returns a tab-aligned writer; Flush it.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// formatTime is t in UTC to the second, or "-" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtDur is d for people: 21ms, 1.2s, 5m3s, 3h5m, 29d23h.
func fmtDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return d.Truncate(time.Second).String()
	case d < 24*time.Hour:
		return strings.TrimSuffix(d.Truncate(time.Minute).String(), "0s")
	}
	days := d / (24 * time.Hour)
	return fmt.Sprintf("%dd%dh", days, (d-days*24*time.Hour)/time.Hour)
}

// fmtLeft is the SLA clock: time left until due, or how far past it.
func fmtLeft(due, now time.Time) string {
	if due.IsZero() {
		return "no due date"
	}
	if left := due.Sub(now); left >= 0 {
		return "due in " + fmtDur(left)
	}
	return "OVERDUE by " + fmtDur(now.Sub(due))
}

// remaining is a remaining count; a negative one (a FAILED store that could not verify)
// is unknown.
func remaining(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return fmt.Sprint(n)
}

// printStatus writes a request's status for people.
func printStatus(w io.Writer, st intake.Status, now time.Time) error {
	clock := fmtLeft(st.DueAt, now)
	if st.State == intake.StateComplete {
		clock = "met"
	}
	tw := table(w)
	fmt.Fprintf(tw, "Request\t%s\n", st.RequestID)
	fmt.Fprintf(tw, "Tenant\t%s\n", st.TenantID)
	fmt.Fprintf(tw, "Subject\t%s (pseudonym, key %s)\n", st.SubjectHash, st.KeyID)
	fmt.Fprintf(tw, "State\t%s\n", st.State)
	fmt.Fprintf(tw, "Regulation\t%s, scope %s\n", st.Regulation, st.Scope)
	fmt.Fprintf(tw, "Requested\t%s\n", formatTime(st.RequestedAt))
	fmt.Fprintf(tw, "Due\t%s (%s)\n", formatTime(st.DueAt), clock)
	fmt.Fprintf(tw, "Inventory\t%s\n", st.InventoryVersion)
	if st.ReceiptID != "" {
		fmt.Fprintf(tw, "Receipt\t%s\n", st.ReceiptID)
	}
	if rj := st.Rejection; rj != nil {
		fmt.Fprintf(tw, "Rejected\t%s (producer %s): %s\n", formatTime(rj.At), dash(rj.Producer), rj.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = table(w)
	fmt.Fprintln(tw, "STORE\tSTATUS\tDELETED\tREMAINING\tUNEXAMINED\tMENTIONS\tSIMILAR\tDISCOVERY\tATTEMPT\tERROR")
	for _, s := range st.Stores {
		attempt := "-"
		if s.Attempt > 0 {
			attempt = fmt.Sprint(s.Attempt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", s.Store, s.Status, s.Deleted, remaining(s.Remaining), s.Unexamined,
			s.Mentions, s.Similar, discoveryState(s.DiscoveryRunAt, s.DiscoveryUncovered), attempt, s.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printOutside(w, st)
}

// printOutside lists the locations outside the inventory the stores of st probed, with the
// entries suggested for those that held the subject or could not be read.
func printOutside(w io.Writer, st intake.Status) error {
	var suggest []string
	tw := table(w)
	header := false
	for _, s := range st.Stores {
		if s.Verification == nil {
			continue
		}
		for _, o := range s.Verification.OutsideInventory {
			if !header {
				fmt.Fprintln(w, "\nOUTSIDE THE INVENTORY")
				fmt.Fprintln(tw, "STORE\tLOCATION\tFOUND\tUNEXAMINED")
				header = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.Store, o.Location, o.Found, o.Unexamined)
			if (o.Found > 0 || o.Unexamined != "") && o.Suggest != "" && !slices.Contains(suggest, o.Suggest) {
				suggest = append(suggest, o.Suggest)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, y := range suggest {
		if _, err := fmt.Fprintf(w, "\nsuggested inventory entry:\n%s\n", indentEntry(y)); err != nil {
			return err
		}
	}
	return nil
}

// printList writes requests for people, one per line.
func printList(w io.Writer, list []intake.Status, now time.Time) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no requests")
		return err
	}
	tw := table(w)
	fmt.Fprintln(tw, "REQUEST\tTENANT\tSTATE\tREGULATION\tREQUESTED\tDUE\tSLA\tSTORES DONE")
	for _, st := range list {
		done := 0
		for _, s := range st.Stores {
			if s.Status.Succeeded() && s.Status != intake.Pending {
				done++
			}
		}
		clock := fmtLeft(st.DueAt, now)
		if st.State == intake.StateComplete {
			clock = "met"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\n", st.RequestID, st.TenantID, st.State, st.Regulation,
			formatTime(st.RequestedAt), formatTime(st.DueAt), clock, done, len(st.Stores))
	}
	return tw.Flush()
}

// receiptWithAddenda is a receipt as lethectl prints it: the receipt's own members, then
// its addenda.
type receiptWithAddenda struct {
	event.Receipt
	Addenda []auditlog.Addendum `json:"addenda"`
}

// printReceipt writes a receipt's summary and its addenda for people.
func printReceipt(w io.Writer, rc event.Receipt, ads []auditlog.Addendum) error {
	sla := "met, " + fmtDur(rc.DueAt.Sub(rc.CompletedAt)) + " before the due date"
	if rc.CompletedAt.After(rc.DueAt) {
		sla = "MISSED by " + fmtDur(rc.CompletedAt.Sub(rc.DueAt))
	}
	prev := rc.PrevHash
	if prev == "" {
		prev = "none (first receipt of the tenant)"
	}
	tw := table(w)
	fmt.Fprintf(tw, "Receipt\t%s\n", rc.ReceiptID)
	fmt.Fprintf(tw, "Request\t%s\n", rc.RequestID)
	fmt.Fprintf(tw, "Status\t%s\n", rc.Status)
	fmt.Fprintf(tw, "Tenant\t%s\n", rc.TenantID)
	fmt.Fprintf(tw, "Subject\t%s (pseudonym, key %s)\n", rc.SubjectHash, rc.KeyID)
	fmt.Fprintf(tw, "Regulation\t%s, scope %s\n", rc.Regulation, rc.Scope)
	fmt.Fprintf(tw, "Requested\t%s\n", formatTime(rc.RequestedAt))
	fmt.Fprintf(tw, "Completed\t%s (%d ms)\n", formatTime(rc.CompletedAt), rc.ElapsedMS)
	fmt.Fprintf(tw, "Due\t%s (%s)\n", formatTime(rc.DueAt), sla)
	fmt.Fprintf(tw, "Inventory\t%s\n", rc.InventoryVersion)
	fmt.Fprintf(tw, "Audit log PII\t%t\n", rc.AuditLogPII)
	if rc.IdentifiersShredAt != nil {
		fmt.Fprintf(tw, "Identifiers\tsealed until %s, then shredded\n", formatTime(*rc.IdentifiersShredAt))
	}
	fmt.Fprintf(tw, "Chain\tseq %d, hash %s\n", rc.Seq, rc.Hash)
	fmt.Fprintf(tw, "Previous\t%s\n", prev)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = table(w)
	fmt.Fprintln(tw, "STORE\tKIND\tSTATUS\tDELETED\tREMAINING\tUNEXAMINED\tMENTIONS\tSIMILAR\tEXCLUDED\tDISCOVERY\tVERIFIED BY\tPHYSICALLY ERASED BY")
	for _, s := range rc.Stores {
		v := s.Verification
		physical := "-"
		if s.PhysicalErasureDue != nil {
			physical = formatTime(*s.PhysicalErasureDue)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", s.Store, s.Kind, s.Status, s.Deleted, v.Remaining, v.Unexamined,
			v.Mentions, len(v.Similar), len(v.Excluded), discoveryState(v.DiscoveryRunAt, v.DiscoveryUncovered), v.Method, physical)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rc.Review) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "FOR REVIEW\tKIND\tITEM\tDECISION")
		for _, it := range rc.Review {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.Store, it.Kind, it.Item, reviewState(it, ads))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(ads) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = table(w)
	fmt.Fprintln(tw, "ADDENDUM\tSEQ\tAT\tPASS\tSTORE\tDELETED\tREMAINING\tREVIEW")
	for _, a := range ads {
		stores := a.Stores
		if len(stores) == 0 {
			stores = []auditlog.AddendumStore{{Store: "-"}}
		}
		review := "-"
		if a.Review != nil {
			review = a.Review.Decision + " " + a.Review.Item
		}
		for _, s := range stores {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\n", a.Type, a.Seq, formatTime(a.At), dash(a.Pass), s.Store, s.Deleted, s.Remaining, review)
		}
	}
	return tw.Flush()
}

// discoveryState says when inventory discovery last ran over a store's backend and what
// it found outside the inventory: "-" when it never ran.
func discoveryState(at *time.Time, uncovered int64) string {
	if at == nil {
		return "-"
	}
	return fmt.Sprintf("%s, %d uncovered", formatTime(*at), uncovered)
}

// reviewState is the decision the addenda record on a review item: undecided (with the
// command that decides), dismissed with its reason, or the erasure's outcome.
func reviewState(it event.ReviewItem, ads []auditlog.Addendum) string {
	state := "undecided: lethectl review"
	for _, a := range ads {
		if a.Review == nil || a.Review.Store != it.Store || a.Review.Item != it.Item {
			continue
		}
		switch {
		case a.Type == auditlog.AddendumReviewed && a.Review.Decision == event.ReviewDismiss:
			return "dismissed: " + a.Review.Reason
		case a.Type == auditlog.AddendumReviewed:
			state = "erase decided, in progress"
		case a.Type == auditlog.AddendumItemErased:
			return fmt.Sprintf("erased (%d deleted, %d remaining)", a.Stores[0].Deleted, a.Stores[0].Remaining)
		case a.Type == auditlog.AddendumUnverified:
			state = "erase failed (not verified): decide again with lethectl review"
		}
	}
	return state
}
