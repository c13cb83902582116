package deletion_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// notes is a store of one kind, "notes": per tenant, notes keyed by the subject who
// wrote them. It stands for a real backend.
type notes struct {
	mu   sync.Mutex
	data map[string]map[string][]string // tenant -> subject -> notes
}

var (
	_ deletion.Store     = (*notes)(nil)
	_ deletion.Validator = (*notes)(nil)
)

// Validate accepts only entries that name a table: a deleter refuses to start otherwise.
func (n *notes) Validate(st inventory.Entry) error {
	if _, ok := st.Locators["table"].(string); !ok {
		return errors.New("locator table: want a string")
	}
	return nil
}

// Erase deletes the subject's notes, matching the id exactly, and says how many.
func (n *notes) Erase(ctx context.Context, st inventory.Entry, s deletion.Subject) (deletion.Result, error) {
	if s.TenantScope() {
		return deletion.Result{}, retry.Permanent(errors.New("notes: tenant scope is not supported"))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	deleted := int64(len(n.data[s.Tenant][s.ID]))
	delete(n.data[s.Tenant], s.ID)
	loc := st.Locators["table"].(string) + "/" + s.Tenant // a location names no subject
	return deletion.Result{Locations: []event.LocationCount{{Location: loc, Deleted: deleted}}}, nil
}

// Verify reads back what remains of the subject.
func (n *notes) Verify(ctx context.Context, st inventory.Entry, s deletion.Subject) (event.Verification, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return event.Verification{Method: "count by subject", Remaining: int64(len(n.data[s.Tenant][s.ID]))}, nil
}

// A store kind is the two methods of deletion.Store, optionally Validate. The runtime
// (package worker) calls Erase, then Verify, and reports StatusOf the two; a second
// erasure of the same subject finds nothing.
func Example() {
	store := &notes{data: map[string]map[string][]string{
		"acme": {"cust-1": {"likes tea", "ships to Lyon"}, "cust-10": {"keep me"}},
	}}
	inv := &inventory.Inventory{Stores: []inventory.Entry{{Name: "support-notes", Kind: "notes", Locators: inventory.Locators{"table": "notes"}}}}
	if err := deletion.ValidateStores(inv, "notes", store); err != nil {
		fmt.Println("refuse to start:", err)
		return
	}
	ctx := context.Background()
	st := inv.Stores[0]
	who := deletion.Subject{Tenant: "acme", ID: "cust-1", Hash: "pseudonym"}
	for range 2 {
		res, err := store.Erase(ctx, st, who)
		if err != nil {
			fmt.Println("erase:", err)
			return
		}
		v, err := store.Verify(ctx, st, who)
		if err != nil {
			fmt.Println("verify:", err)
			return
		}
		fmt.Printf("deleted %d, remaining %d: %s\n", res.Deleted(), v.Remaining, deletion.StatusOf(res, v))
	}
	fmt.Println("other subject keeps", len(store.data["acme"]["cust-10"]), "note")

	bad := &inventory.Inventory{Stores: []inventory.Entry{{Name: "old-notes", Kind: "notes"}}}
	fmt.Println(deletion.ValidateStores(bad, "notes", store))
	// Output:
	// deleted 2, remaining 0: DELETED
	// deleted 0, remaining 0: NOTHING_FOUND
	// other subject keeps 1 note
	// inventory store "old-notes" of kind "notes": locator table: want a string
}
