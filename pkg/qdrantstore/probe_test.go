package qdrantstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
)

// probeValues are the identifiers the probe tests seed or probe with; no output may hold one.
var probeValues = []string{"cust-1", "cust-2", "cust-404", "thread-9"}

// chunk is a LangChain-shaped point: free text and metadata holding the customer id
// (none when customer is empty), and the tenant field when tenant is not empty.
func chunk(tenant, customer string) map[string]any {
	meta := map[string]any{"source": "crm"}
	if customer != "" {
		meta["customer_id"] = customer
	}
	p := map[string]any{"page_content": "a chunk of the knowledge base", "metadata": meta}
	if tenant != "" {
		p["tenant"] = tenant
	}
	return p
}

// decodeSuggest decodes a Suggest as the inventory file's YAML decodes (unknown fields are
// errors) into an entry, and checks that an inventory holding it passes inventory's checks.
func decodeSuggest(t *testing.T, y string) inventory.Entry {
	t.Helper()
	var e inventory.Entry
	dec := yaml.NewDecoder(strings.NewReader(y))
	dec.KnownFields(true)
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("Suggest does not decode: %v\n%s", err, y)
	}
	inv := inventory.Inventory{Version: "1", Stores: []inventory.Entry{e}}
	if err := inv.Validate(); err != nil {
		t.Fatalf("Suggest fails inventory.Validate: %v\n%s", err, y)
	}
	return e
}

// findingAt returns the report of got at loc.
func findingAt(t *testing.T, got []deletion.Uncovered, loc string) deletion.Uncovered {
	t.Helper()
	for _, u := range got {
		if u.Location == loc {
			return u
		}
	}
	t.Fatalf("Discover = %+v, want a report at %s", got, loc)
	return deletion.Uncovered{}
}

// probe runs st.Probe and checks it returns one Probed per location, in order, naming no
// identifier.
func probe(t *testing.T, st *qdrantstore.Store, inv *inventory.Inventory, locs []deletion.Uncovered, s deletion.Subject, lim deletion.ProbeLimits) []deletion.Probed {
	t.Helper()
	got, err := st.Probe(context.Background(), inv, locs, s, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(locs) {
		t.Fatalf("Probe = %+v for %d locations", got, len(locs))
	}
	for i := range locs {
		if got[i].Location != locs[i].Location {
			t.Errorf("Probe[%d].Location = %q, want %q", i, got[i].Location, locs[i].Location)
		}
	}
	assertNoIdentifier(t, got)
	return got
}

// assertNoIdentifier fails when the JSON of v holds one of probeValues.
func assertNoIdentifier(t *testing.T, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range probeValues {
		if strings.Contains(string(b), id) {
			t.Errorf("output holds the identifier %q: %s", id, b)
		}
	}
}

// wantFound checks that p was examined and found n points.
func wantFound(t *testing.T, what string, p deletion.Probed, n int64) {
	t.Helper()
	if p.Unexamined != "" || p.Found != n {
		t.Errorf("%s: Probe = %+v, want Found %d, examined", what, p, n)
	}
}

// TestProbeLangChainMetadataKey covers LangChain-shaped collections kb_{tenant} with
// subject_fields [customer_id] while the id sits in metadata.customer_id. Discover
// reports the key with its path as Fields and, as Suggest, the store with the key added;
// that entry validates, and with it nothing is left to report. Probe counts the subject's
// chunks in its tenant's collection only: the same id in another tenant's collection is
// not counted, and a subject without chunks finds 0.
func TestProbeLangChainMetadataKey(t *testing.T) {
	client, _ := qdranttest.Connect(t)
	seedPayloads(t, client, "kb_acme", chunk("", "cust-1"), chunk("", ""), chunk("", "cust-1"), chunk("", "cust-2"), chunk("", "cust-1"))
	seedPayloads(t, client, "kb_globex", chunk("", "cust-1"), chunk("", "cust-1"))
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{{Name: "kb", Kind: qdrantstore.Kind, Locators: inventory.Locators{
		"collections": []string{"kb_{tenant}"}, "subject_fields": []string{"customer_id"},
	}}}}
	st := qdrantstore.New(client)
	ctx := context.Background()
	for _, tenants := range [][]string{nil, {"acme", "globex"}} {
		got, err := st.Discover(ctx, inv, deletion.DiscoverOptions{Tenants: tenants})
		if err != nil {
			t.Fatal(err)
		}
		u := findingAt(t, got, "kb_{tenant}/metadata.customer_id")
		if !slices.Equal(u.Fields, []string{"metadata.customer_id"}) {
			t.Errorf("tenants %v: Fields = %q, want [metadata.customer_id]", tenants, u.Fields)
		}
		e := decodeSuggest(t, u.Suggest)
		if err := qdrantstore.Validate(e); err != nil {
			t.Errorf("tenants %v: Suggest does not validate: %v\n%s", tenants, err, u.Suggest)
		}
		l, _ := qdrantstore.LocatorsOf(e)
		if e.Name != "kb" || e.Kind != qdrantstore.Kind || !slices.Equal(l.Collections, []string{"kb_{tenant}"}) || !slices.Equal(l.SubjectFields, []string{"customer_id", "metadata.customer_id"}) {
			t.Errorf("tenants %v: Suggest = %+v, want store kb with subject_fields [customer_id metadata.customer_id]\n%s", tenants, l, u.Suggest)
		}
		fixed := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{e}}
		if again, err := st.Discover(ctx, fixed, deletion.DiscoverOptions{Tenants: tenants}); err != nil || len(again) != 0 {
			t.Errorf("tenants %v: Discover with the suggested entry = %+v, %v; want nothing", tenants, again, err)
		}
		assertNoIdentifier(t, got)

		locs := []deletion.Uncovered{u}
		wantFound(t, "acme cust-1", probe(t, st, inv, locs, deletion.Subject{Tenant: "acme", ID: "cust-1"}, deletion.DefaultProbeLimits)[0], 3)
		wantFound(t, "acme cust-404", probe(t, st, inv, locs, deletion.Subject{Tenant: "acme", ID: "cust-404"}, deletion.DefaultProbeLimits)[0], 0)
		wantFound(t, "globex cust-1", probe(t, st, inv, locs, deletion.Subject{Tenant: "globex", ID: "cust-1"}, deletion.DefaultProbeLimits)[0], 2)
		wantFound(t, "acme by session", probe(t, st, inv, locs, deletion.Subject{Tenant: "acme", ID: "cust-404", Sessions: []string{"cust-2", ""}}, deletion.ProbeLimits{})[0], 1)
	}
}

// TestProbeSharedCollectionTenantField covers a collection tenants share, with a tenant
// field: the probe of a key no locator names counts only the points of the subject's
// tenant, as the covering store's filters would.
func TestProbeSharedCollectionTenantField(t *testing.T) {
	client, _ := qdranttest.Connect(t)
	seedPayloads(t, client, "kb_shared", chunk("acme", "cust-1"), chunk("globex", "cust-1"), chunk("acme", "cust-1"), chunk("acme", "cust-2"), chunk("globex", "cust-1"), chunk("globex", "cust-1"))
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{{Name: "shared", Kind: qdrantstore.Kind, Locators: inventory.Locators{
		"collections": []string{"kb_shared"}, "subject_fields": []string{"customer_id"}, "tenant_field": "tenant",
	}}}}
	st := qdrantstore.New(client)
	got, err := st.Discover(context.Background(), inv, deletion.DiscoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := findingAt(t, got, "kb_shared/metadata.customer_id")
	e := decodeSuggest(t, u.Suggest)
	if l, err := qdrantstore.LocatorsOf(e); err != nil || l.TenantField != "tenant" || !slices.Contains(l.SubjectFields, "metadata.customer_id") {
		t.Errorf("Suggest = %+v, %v; want the store with its tenant field and metadata.customer_id\n%s", l, err, u.Suggest)
	}
	locs := []deletion.Uncovered{u}
	wantFound(t, "acme cust-1", probe(t, st, inv, locs, deletion.Subject{Tenant: "acme", ID: "cust-1"}, deletion.DefaultProbeLimits)[0], 2)
	wantFound(t, "globex cust-1", probe(t, st, inv, locs, deletion.Subject{Tenant: "globex", ID: "cust-1"}, deletion.DefaultProbeLimits)[0], 3)
	wantFound(t, "initech cust-1", probe(t, st, inv, locs, deletion.Subject{Tenant: "initech", ID: "cust-1"}, deletion.DefaultProbeLimits)[0], 0)
	if p := probe(t, st, inv, locs, deletion.Subject{ID: "cust-1"}, deletion.DefaultProbeLimits)[0]; p.Unexamined == "" {
		t.Errorf("a subject without a tenant: %+v, want unexamined", p)
	}
}

// TestProbeUncoveredCollection covers two collections no store covers: notes_acme, named
// after a known tenant, carrying user_id and thread_id, and legacy, holding no tenant in
// its name. Discover reports their key paths as Fields and suggests new stores (thread_id
// as a session field); legacy's suggestion says it needs a tenant_field, and does validate
// once one is named. Probe finds the subject through Fields, by id or by session, and a
// collection since dropped holds 0.
func TestProbeUncoveredCollection(t *testing.T) {
	client, _ := qdranttest.Connect(t)
	seedPayloads(t, client, "notes_acme",
		map[string]any{"user_id": "cust-1", "thread_id": "thread-9", "text": "hello"},
		map[string]any{"user_id": "cust-1", "text": "again"},
		map[string]any{"user_id": "cust-2", "thread_id": "thread-9"},
		map[string]any{"text": "no one"},
	)
	seedPayloads(t, client, "legacy", map[string]any{"metadata": map[string]any{"customer_id": "cust-1"}}, map[string]any{"metadata": map[string]any{"customer_id": "cust-2"}})
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{
		{Name: "kb", Kind: qdrantstore.Kind, Locators: inventory.Locators{"collections": []string{"kb_{tenant}"}, "subject_fields": []string{"customer_id"}}},
		{Name: "notes", Kind: "redis", Locators: inventory.Locators{"keys": []string{"notes:{tenant}:{subject}"}}},
	}}
	st := qdrantstore.New(client)
	got, err := st.Discover(context.Background(), inv, deletion.DiscoverOptions{Tenants: []string{"acme", "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	notes, legacy := findingAt(t, got, "notes_acme"), findingAt(t, got, "legacy")
	if !slices.Equal(notes.Fields, []string{"thread_id", "user_id"}) || !slices.Equal(legacy.Fields, []string{"metadata.customer_id"}) {
		t.Errorf("Fields = %q and %q, want [thread_id user_id] and [metadata.customer_id]", notes.Fields, legacy.Fields)
	}
	e := decodeSuggest(t, notes.Suggest)
	l, err := qdrantstore.LocatorsOf(e)
	if err != nil {
		t.Errorf("notes_acme: Suggest does not validate: %v\n%s", err, notes.Suggest)
	}
	// "notes" is taken by the redis store.
	if e.Name != "notes_2" || e.Kind != qdrantstore.Kind || !slices.Equal(l.Collections, []string{"notes_{tenant}"}) ||
		!slices.Equal(l.SubjectFields, []string{"user_id"}) || !slices.Equal(l.SessionFields, []string{"thread_id"}) {
		t.Errorf("notes_acme: Suggest = %s %+v\n%s", e.Name, l, notes.Suggest)
	}
	if strings.HasPrefix(notes.Suggest, "#") {
		t.Errorf("notes_acme: Suggest has a comment: %s", notes.Suggest)
	}
	e = decodeSuggest(t, legacy.Suggest)
	if !strings.HasPrefix(legacy.Suggest, "# ") || !strings.Contains(strings.SplitN(legacy.Suggest, "\n", 2)[0], "tenant_field") {
		t.Errorf("legacy: Suggest does not say it needs a tenant_field:\n%s", legacy.Suggest)
	}
	if err := qdrantstore.Validate(e); err == nil || !strings.Contains(err.Error(), "tenant_field") {
		t.Errorf("legacy: Validate of the suggestion = %v, want a missing tenant_field", err)
	}
	e.Locators = e.Locators.With("tenant_field", "tenant")
	if l, err := qdrantstore.LocatorsOf(e); err != nil || e.Name != "legacy" || !slices.Equal(l.SubjectFields, []string{"metadata.customer_id"}) {
		t.Errorf("legacy with a tenant_field: %+v, %v\n%s", l, err, legacy.Suggest)
	}
	assertNoIdentifier(t, got)

	gone := deletion.Uncovered{Kind: qdrantstore.Kind, Location: "gone_probe", Fields: []string{"user_id"}}
	_ = client.DeleteCollection(context.Background(), gone.Location)
	locs := []deletion.Uncovered{notes, legacy, gone}
	out := probe(t, st, inv, locs, deletion.Subject{Tenant: "acme", ID: "cust-1"}, deletion.DefaultProbeLimits)
	wantFound(t, "notes_acme cust-1", out[0], 2)
	wantFound(t, "legacy cust-1", out[1], 1)
	wantFound(t, "gone cust-1", out[2], 0)
	out = probe(t, st, inv, locs, deletion.Subject{Tenant: "acme", ID: "cust-404", Sessions: []string{"thread-9"}}, deletion.DefaultProbeLimits)
	wantFound(t, "notes_acme by session", out[0], 2)
	wantFound(t, "legacy by session", out[1], 0)
	// No tenant filter in a collection of no store: another tenant's subject of the same
	// id is counted too.
	wantFound(t, "legacy, globex cust-1", probe(t, st, inv, locs, deletion.Subject{Tenant: "globex", ID: "cust-1"}, deletion.DefaultProbeLimits)[1], 1)
}

// TestProbeUnexamined checks the locations Probe cannot examine: another kind, a key
// path with a value-like part, unparsable keys and templates, a template no store has,
// an uncovered collection without a key path, a subject without identifiers, a time
// bound that runs out, and a count Qdrant refuses. None is reported clean, and no output
// holds an identifier. A tenant-scope subject is not probed.
func TestProbeUnexamined(t *testing.T) {
	client, srv := qdranttest.Emulator(t)
	seedPayloads(t, client, "kb_acme", chunk("", "cust-1"))
	seedPayloads(t, client, "profiles", map[string]any{"by_customer": map[string]any{"cust-1": map[string]any{"contact": "x"}}})
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{
		{Name: "kb", Kind: qdrantstore.Kind, Locators: inventory.Locators{"collections": []string{"kb_{tenant}"}, "subject_fields": []string{"customer_id"}}},
		{Name: "profiles", Kind: qdrantstore.Kind, Locators: inventory.Locators{"collections": []string{"profiles"}, "subject_fields": []string{"customer_id"}, "tenant_field": "tenant"}},
	}}
	st := qdrantstore.New(client)
	locs := []deletion.Uncovered{
		{Kind: "redis", Location: "session:{tenant}:{id}"},
		{Kind: qdrantstore.Kind, Location: "profiles/by_customer.{id}.contact", Fields: []string{"by_customer.{id}.contact"}},
		{Kind: qdrantstore.Kind, Location: "kb_{tenant}/metadata..customer_id"},
		{Kind: qdrantstore.Kind, Location: "kb_{tenant}/metadata customer_id"},
		{Kind: qdrantstore.Kind, Location: "kb_{nope}/customer_id"},
		{Kind: qdrantstore.Kind, Location: "other_{tenant}/customer_id"},
		{Kind: qdrantstore.Kind, Location: "/customer_id"},
		{Kind: qdrantstore.Kind, Location: "kb_{tenant}/"},
		{Kind: qdrantstore.Kind, Location: ""},
		{Kind: qdrantstore.Kind, Location: "profiles"},
		{Kind: qdrantstore.Kind, Location: "profiles", Fields: []string{"by_customer.{id}.contact"}},
		{Kind: qdrantstore.Kind, Location: "profiles", Fields: []string{"customer_id", "a..b"}},
	}
	for _, s := range []deletion.Subject{{Tenant: "acme", ID: "cust-1", Sessions: []string{"thread-9"}}, {Tenant: "acme"}} {
		for i, p := range probe(t, st, inv, locs, s, deletion.DefaultProbeLimits) {
			if p.Unexamined == "" || p.Found != 0 {
				t.Errorf("%q: Probe = %+v, want unexamined", locs[i].Location, p)
			}
		}
	}

	good := []deletion.Uncovered{{Kind: qdrantstore.Kind, Location: "kb_{tenant}/metadata.customer_id"}, {Kind: qdrantstore.Kind, Location: "kb_acme", Fields: []string{"metadata.customer_id"}}}
	s := deletion.Subject{Tenant: "acme", ID: "cust-1"}
	for i, p := range probe(t, st, inv, good, s, deletion.ProbeLimits{Time: time.Nanosecond}) {
		if !strings.Contains(p.Unexamined, "time bound") {
			t.Errorf("%q with a time bound of 1ns: %+v, want unexamined", good[i].Location, p)
		}
	}
	srv.InjectFault(qdrantfake.Fault{Method: "Count", Code: codes.InvalidArgument, Message: "Bad request: cust-1"})
	for i, p := range probe(t, st, inv, good, s, deletion.DefaultProbeLimits) {
		if p.Unexamined == "" {
			t.Errorf("%q with the count refused: %+v, want unexamined", good[i].Location, p)
		}
	}
	srv.ClearFaults()
	for i, p := range probe(t, st, inv, good, s, deletion.DefaultProbeLimits) {
		wantFound(t, good[i].Location, p, 1)
	}
	srv.InjectFault(qdrantfake.Fault{Method: "Count", Code: codes.Unavailable, Message: "down"})
	if _, err := st.Probe(context.Background(), inv, good, s, deletion.DefaultProbeLimits); err == nil {
		t.Error("a transient count failure: no error")
	}
	srv.ClearFaults()

	if got, err := st.Probe(context.Background(), inv, good, deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}, deletion.DefaultProbeLimits); got != nil || err != nil {
		t.Errorf("tenant scope: Probe = %+v, %v; want nil, nil", got, err)
	}
}
