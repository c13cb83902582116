package embedded_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// tickets is a store of a kind no Lethe package defines: tickets by requester.
type tickets struct {
	mu   sync.Mutex
	rows map[string]int // tenant/subject -> tickets
}

func (s *tickets) Validate(st inventory.Entry) error {
	var l struct {
		Queue string `yaml:"queue"`
	}
	return st.Locators.Decode(&l)
}

func (s *tickets) Erase(_ context.Context, _ inventory.Entry, sub deletion.Subject) (deletion.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.rows[sub.Tenant+"/"+sub.ID]
	delete(s.rows, sub.Tenant+"/"+sub.ID)
	return deletion.Result{Locations: []event.LocationCount{{Location: "tickets", Deleted: int64(n)}}}, nil
}

func (s *tickets) Verify(_ context.Context, _ inventory.Entry, sub deletion.Subject) (event.Verification, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return event.Verification{Method: "ticket count", Remaining: int64(s.rows[sub.Tenant+"/"+sub.ID])}, nil
}

func withTickets(t *testing.T, locators string) *inventory.Inventory {
	t.Helper()
	inv, err := inventory.Parse([]byte(`
version: "t1"
stores:
  - {name: audit_log, kind: audit_log}
  - {name: support, kind: helpdesk, locators: ` + locators + `}
`))
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// A kind the built-in deleters do not serve runs through Options.Deleters to a receipt;
// without one, or with locators its deleter refuses, Start says which store is at fault.
func TestDeletersOfOtherKinds(t *testing.T) {
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = embedded.Start(ctx, embedded.Options{Key: key, DataDir: t.TempDir(), Inventory: withTickets(t, "{queue: q}")})
	if err == nil || !strings.Contains(err.Error(), `inventory store "support" has kind "helpdesk", which no deleter here serves`) {
		t.Fatalf("Start without a helpdesk deleter: %v", err)
	}
	store := &tickets{rows: map[string]int{"acme/cust-1": 3, "acme/cust-2": 1}}
	helpdesk := embedded.Deleter{Name: "helpdesk-deleter", Kind: "helpdesk", Store: store}
	_, err = embedded.Start(ctx, embedded.Options{Key: key, DataDir: t.TempDir(), Inventory: withTickets(t, "{qeue: q}"), Deleters: []embedded.Deleter{helpdesk}})
	if err == nil || !strings.Contains(err.Error(), `inventory store "support" of kind "helpdesk"`) || !strings.Contains(err.Error(), `unknown field "qeue"`) {
		t.Fatalf("Start with a misspelt locator: %v", err)
	}

	sys, err := embedded.Start(ctx, embedded.Options{Key: key, DataDir: t.TempDir(), Inventory: withTickets(t, "{queue: q}"), Deleters: []embedded.Deleter{helpdesk}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	acc := submit(t, sys, `{"tenant_id":"acme","subject_id":"cust-1","regulation":"GDPR"}`, "")
	r := waitReceipt(t, sys, acc.RequestID)
	if r.Status != event.ReceiptComplete || len(r.Stores) != 2 || r.Stores[1].Store != "support" || r.Stores[1].Kind != "helpdesk" || r.Stores[1].Deleted != 3 {
		t.Errorf("receipt = %+v", r)
	}
	if store.rows["acme/cust-2"] != 1 {
		t.Error("the bystander's tickets are gone")
	}
}
