package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// The demo's completeness story: a support-notes dataset under the tenant's prefix whose
// free text and nested fields mention the customer in other customers' rows (the demo
// inventory redacts such mentions), and a CRM key family in Redis that nobody wrote into the
// inventory, which discovery finds. The first attempt's probe finds her profile there and
// the request stays INCOMPLETE; the demo adds the suggested entry to the inventory,
// restarts the services with it and re-drives the new store, as a user would.

// notesKey is the support-notes dataset, under the tenant's dataset prefix.
const notesKey = "support_notes.jsonl"

// uncoveredShape is how discovery names the CRM key family.
const uncoveredShape = "crm:{tenant}:{id}"

// notes returns the support-notes dataset as seeded and as it must read after the
// customer's erasure under the demo inventory's redact policy.
func notes() (seeded, redacted []byte) {
	lines := func(mention, session string) string {
		return `{"customer_id":"` + bystanders[0].id + `","session_id":"` + bystanders[0].sessions[0] + `","note":"asked to merge with the account of ` + mention + `; declined.","ticket":{"ref":"T-118","cc":["support@shop.example","` + mention + `"]}}` + "\n" +
			`{"customer_id":"` + target.id + `","session_id":"` + target.sessions[0] + `","note":"her own ticket"}` + "\n" +
			`{"customer_id":"` + bystanders[2].id + `","session_id":"` + bystanders[2].sessions[0] + `","note":"follow-up of ` + session + ` (wrong account)"}` + "\n" +
			`{"customer_id":"` + bystanders[1].id + `","session_id":"` + bystanders[1].sessions[0] + `","note":"no mention here"}` + "\n"
	}
	seeded = []byte(lines(target.id, target.sessions[1]))
	// Her own row goes with the row erasure; the mentions in other rows are redacted in
	// place, every other byte kept.
	after := strings.Split(lines(datasetstore.RedactionToken, datasetstore.RedactionToken), "\n")
	redacted = []byte(after[0] + "\n" + after[2] + "\n" + after[3] + "\n")
	return seeded, redacted
}

// demoInventory is inv with the dataset stores redacting mentions, as the demo shows.
func demoInventory(inv *inventory.Inventory) *inventory.Inventory {
	for i, st := range inv.Stores {
		if st.Kind == datasetstore.Kind {
			inv.Stores[i].Locators = st.Locators.With("mentions", datasetstore.MentionsRedact)
		}
	}
	return inv
}

// printOutside prints what st's stores found outside the inventory and returns the
// suggested entries.
func printOutside(st intake.Status, stderr io.Writer) []string {
	var suggest []string
	fmt.Fprintln(stderr, "INCOMPLETE: no receipt yet, the customer's data sits outside the inventory:")
	for _, s := range st.Stores {
		if s.Verification == nil {
			continue
		}
		for _, o := range s.Verification.OutsideInventory {
			if o.Found == 0 && o.Unexamined == "" {
				continue
			}
			fmt.Fprintf(stderr, "  %-10s %s: %d items (%s)\n", s.Store, o.Location, o.Found, cmp.Or(o.Unexamined, "probed with her identifiers"))
			if o.Suggest != "" {
				suggest = append(suggest, o.Suggest)
				fmt.Fprintf(stderr, "    the inventory entry that covers it:\n      %s\n", strings.ReplaceAll(strings.TrimSpace(o.Suggest), "\n", "\n      "))
			}
		}
	}
	return suggest
}

// coverAndRedrive does what a user does with an INCOMPLETE request: adds the suggested
// entries to the inventory, restarts the services with it, and re-drives the request for
// the new stores. before gains the customers' footprints in them, read before the re-drive.
func (a *app) coverAndRedrive(ctx context.Context, id string, before map[string]footprint, stderr io.Writer) error {
	inv := *a.Inventory
	inv.Stores = slices.Clone(inv.Stores)
	inv.Version += "+crm"
	var added []string
	for _, y := range a.outside {
		var e inventory.Entry
		if err := yaml.Unmarshal([]byte(y), &e); err != nil {
			return fmt.Errorf("suggested entry: %w", err)
		}
		inv.Stores = append(inv.Stores, e)
		added = append(added, e.Name)
	}
	if err := inv.Validate(); err != nil || len(added) == 0 {
		return fmt.Errorf("the extended inventory (%v): %v", added, err)
	}
	sys, err := a.System.Restart(ctx, &inv)
	if err != nil {
		return fmt.Errorf("restart with the extended inventory: %w", err)
	}
	a.System = sys
	mid, err := a.footprints(ctx)
	if err != nil {
		return err
	}
	for c, fp := range mid {
		for _, name := range added {
			before[c][name] = fp[name]
		}
	}
	fmt.Fprintf(stderr, "extended the inventory with %v (version %s), restarted the services, re-driving the request for %v\n", added, inv.Version, added)
	body, _ := json.Marshal(intake.RetryRequest{SubjectID: target.id, SessionIDs: target.sessions, Stores: added})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.BaseURL+"/v1/erasures/"+id+"/retry", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	var out map[string]any
	if err := doJSON(req, http.StatusAccepted, &out); err != nil {
		return fmt.Errorf("re-drive: %w", err)
	}
	return nil
}

// seedCompleteness writes the support notes and the CRM profiles no inventory store covers.
func (a *app) seedCompleteness(ctx context.Context) error {
	seeded, _ := notes()
	if _, err := a.Stack.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(embedded.DatasetBucket),
		Key: aws.String(demoTenant + "/" + notesKey), Body: bytes.NewReader(seeded)}); err != nil {
		return fmt.Errorf("s3 put: %w", err)
	}
	for i, c := range append([]customer{target}, bystanders...) {
		key := fmt.Sprintf("crm:%s:%d", redisstore.KeyPart(demoTenant), 1001+i)
		if err := a.Stack.Redis.HSet(ctx, key, "email", c.id, "tier", "gold").Err(); err != nil {
			return err
		}
	}
	return nil
}

// discover runs discovery over every store of the system, as lethectl inventory discover
// does (POST /discovery), prints what lies outside the inventory and checks that the CRM
// family is among it.
func (a *app) discover(ctx context.Context, stderr io.Writer) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.BaseURL+"/discovery", nil)
	var res discovery.Response
	if err := doJSON(req, http.StatusOK, &res); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	found := false
	var lines []string
	for _, r := range res.Reports {
		if r.Error != "" {
			return fmt.Errorf("discovery of kind %s: %s", r.Kind, r.Error)
		}
		for _, u := range r.Uncovered {
			lines = append(lines, fmt.Sprintf("  %-8s %-40s %d items: %s", u.Kind, u.Location, u.Count, u.Reason))
			found = found || u.Kind == redisstore.Kind && u.Location == uncoveredShape && u.Count == int64(len(bystanders)+1)
		}
	}
	fmt.Fprintf(stderr, "inventory discovery (POST /discovery; lethectl inventory discover --deleter %s): %d locations outside the inventory\n%s\n",
		a.BaseURL, len(lines), strings.Join(lines, "\n"))
	if !found {
		return fmt.Errorf("discovery did not report the CRM key family %s", uncoveredShape)
	}
	return nil
}

// completenessProblems checks the receipt's discovery state and re-reads the support notes
// with the S3 client: her mentions redacted, every other byte as seeded.
func (a *app) completenessProblems(ctx context.Context, r event.Receipt, stderr io.Writer) []string {
	var bad []string
	for _, s := range r.Stores {
		v := s.Verification
		switch s.Kind {
		case redisstore.Kind:
			if v.DiscoveryRunAt == nil || v.Outside() {
				bad = append(bad, fmt.Sprintf("receipt: %s carries no discovery state, or data outside the inventory (%v, %+v)", s.Store, v.DiscoveryRunAt, v.OutsideInventory))
			}
		case datasetstore.Kind:
			if v.Mentions != 0 {
				bad = append(bad, fmt.Sprintf("receipt: %s still holds %d mentions", s.Store, v.Mentions))
			}
		}
	}
	obj, err := a.Stack.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(embedded.DatasetBucket), Key: aws.String(demoTenant + "/" + notesKey)})
	if err != nil {
		return append(bad, fmt.Sprintf("read back %s: %v", notesKey, err))
	}
	got, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if _, want := notes(); err != nil || !bytes.Equal(got, want) {
		bad = append(bad, fmt.Sprintf("%s after the erasure is not the seeded notes with her mentions redacted (%v)", notesKey, err))
	} else {
		fmt.Fprintf(stderr, "re-read %s: her own row gone, her id and legacy session in other customers' notes and nested fields redacted to %s, every other byte unchanged\n",
			notesKey, datasetstore.RedactionToken)
	}
	return bad
}
