package postgresstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/postgresstore"
)

// TestDiscover seeds covered tables beside uncovered ones: discovery lists every
// uncovered table with identity-like columns or personal values, no covered one, no
// harmless one, and no value.
func TestDiscover(t *testing.T) {
	sv := newServer(t)
	f := sv.fixture(t)
	f.seed(t, deletiontest.NewSubject("acme", "cust-1"), 1)
	s := f.schema
	sv.exec(t, "CREATE TABLE "+s+".profiles (id int, email text, plan text)")
	sv.exec(t, "INSERT INTO "+s+".profiles VALUES (1, 'jane.doe@example.com', 'pro')")
	sv.exec(t, "CREATE TABLE "+s+".tickets (id int, body text)")
	sv.exec(t, "INSERT INTO "+s+".tickets VALUES (1, 'call jane.doe@example.com back')")
	sv.exec(t, "CREATE TABLE "+s+".metrics (day date, hits int, label text)")
	sv.exec(t, "INSERT INTO "+s+".metrics VALUES ('2026-11-30', 17, 'home')")
	sv.exec(t, "CREATE SCHEMA "+s+"_globex")
	sv.exec(t, "CREATE TABLE "+s+"_globex.checkpoints (thread_id text)") // covered per tenant
	sv.exec(t, "CREATE TABLE "+s+"_globex.memories (user_id text, memory text)")
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{f.store()}}
	got, err := postgresstore.New(sv.pool).Discover(context.Background(), inv, deletion.DiscoverOptions{Tenants: []string{"acme", "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		s + ".profiles":          "identity-like columns email",
		s + ".tickets":           "values match personal-data patterns",
		s + "_{tenant}.memories": "identity-like columns user_id",
	}
	n := 0
	for _, u := range got {
		if !strings.HasPrefix(u.Location, s+".") && !strings.HasPrefix(u.Location, s+"_") {
			continue // other tests' schemas on the shared server
		}
		n++
		if w, ok := want[u.Location]; !ok || u.Reason != w || u.Count != 1 || u.Kind != postgresstore.Kind {
			t.Errorf("discovered %+v, want one of %v", u, want)
		}
		if strings.Contains(fmt.Sprint(u), "jane") || strings.Contains(fmt.Sprint(u), "cust-1") {
			t.Errorf("report %+v holds a value", u)
		}
	}
	if n != len(want) {
		t.Errorf("discovered %+v, want %d of this test's tables", got, len(want))
	}
}
