package intake_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

func TestList(t *testing.T) {
	e := setup(t)
	a := e.submit(t, body(t, nil))
	e.setNow(start.Add(time.Minute))
	b := e.submit(t, body(t, func(m map[string]any) { m["tenant_id"] = "globex" }))
	e.setNow(start.Add(2 * time.Minute))
	c := e.submit(t, body(t, func(m map[string]any) { m["regulation"] = "LGPD" }))
	if err := e.store.PutReport(context.Background(), event.StoreDone{RequestID: c.RequestID, TenantID: "acme", Store: "redis", Kind: "redis", Status: event.StatusFailed, Attempt: 1}); err != nil {
		t.Fatal(err)
	}

	list := func(q string) []string {
		t.Helper()
		code, resp := e.do(t, "GET", "/v1/erasures"+q, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", q, code, resp)
		}
		var ids []string
		for _, s := range decode[struct{ Requests []intake.Status }](t, resp).Requests {
			ids = append(ids, s.RequestID)
		}
		return ids
	}
	eq := func(got, want []string) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	}
	for q, want := range map[string][]string{
		"":                          {c.RequestID, b.RequestID, a.RequestID},
		"?tenant=acme":              {c.RequestID, a.RequestID},
		"?tenant=acme&state=FAILED": {c.RequestID},
		"?state=PENDING":            {b.RequestID, a.RequestID},
		"?limit=1":                  {c.RequestID},
		"?overdue=true":             nil,
	} {
		if got := list(q); !eq(got, want) {
			t.Errorf("GET /v1/erasures%s = %v, want %v", q, got, want)
		}
	}
	e.setNow(start.Add(16 * 24 * time.Hour)) // past LGPD's 15 days, within GDPR's 30
	if got := list("?overdue=true"); !eq(got, []string{c.RequestID}) {
		t.Errorf("overdue = %v", got)
	}
	for _, q := range []string{"?state=DONE", "?limit=0", "?limit=x"} {
		if code, _ := e.do(t, "GET", "/v1/erasures"+q, ""); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", q, code)
		}
	}
}

func TestRetry(t *testing.T) {
	e := setup(t)
	a := e.submit(t, body(t, nil))
	code, resp := e.do(t, "POST", "/v1/erasures/"+a.RequestID+"/retry", `{"subject_id":"`+subj+`","session_ids":["s1"],"stores":["redis"]}`)
	if code != http.StatusAccepted {
		t.Fatalf("retry: %d %s", code, resp)
	}
	got := decode[struct {
		Attempt int      `json:"attempt"`
		Stores  []string `json:"stores"`
	}](t, resp)
	if got.Attempt != 2 || len(got.Stores) != 1 || got.Stores[0] != "redis" {
		t.Errorf("retry answer %s", resp)
	}
	pub := e.published(t)
	if len(pub) != 2 || pub[1].RequestID != a.RequestID || pub[1].Attempt != 2 || pub[1].Identifiers.SubjectID != subj {
		t.Fatalf("published %d records; last %+v", len(pub), pub[len(pub)-1])
	}
	// After the inventory gained an entry, a re-drive expects it too, at the new version.
	grown := *e.svc.Inventory
	grown.Version = "v-grown"
	grown.Stores = append(slices.Clone(grown.Stores), inventory.Entry{Name: "crm", Kind: "redis"})
	e.svc.Inventory = &grown
	if code, resp := e.do(t, "POST", "/v1/erasures/"+a.RequestID+"/retry", `{"subject_id":"`+subj+`","stores":["crm"]}`); code != http.StatusAccepted {
		t.Fatalf("retry for a new store: %d %s", code, resp)
	}
	pub = e.published(t)
	if last := pub[len(pub)-1]; !slices.Contains(last.ExpectedStores, "crm") || !slices.Contains(last.ExpectedStores, "qdrant") || last.InventoryVersion != "v-grown" || last.Attempt != 3 {
		t.Errorf("re-drive after the inventory grew: %+v", last)
	}
	for name, tc := range map[string]struct {
		path, body string
		want       int
	}{
		"unknown request":  {"/v1/erasures/er_nope/retry", `{"subject_id":"x"}`, http.StatusNotFound},
		"other subject":    {"/v1/erasures/" + a.RequestID + "/retry", `{"subject_id":"mallory"}`, http.StatusBadRequest},
		"unexpected store": {"/v1/erasures/" + a.RequestID + "/retry", `{"subject_id":"` + subj + `","stores":["nosuch"]}`, http.StatusBadRequest},
		"unknown field":    {"/v1/erasures/" + a.RequestID + "/retry", `{"subject":"x"}`, http.StatusBadRequest},
	} {
		if code, resp := e.do(t, "POST", tc.path, tc.body); code != tc.want {
			t.Errorf("%s: %d %s, want %d", name, code, resp, tc.want)
		}
	}
}
