package redisstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// seedCRM writes the demo's CRM layout beside the reference keys: hashes whose email field
// holds a customer id (here an email address), for two tenants, and one JSON record.
func seedCRM(t *testing.T) map[string]any {
	kv := map[string]any{
		"crm:acme:1001":   map[string]string{"email": anna, "tier": "gold"},
		"crm:acme:1002":   map[string]string{"email": "bob@x.de", "tier": "gold"},
		"crm:acme:1003":   map[string]string{"email": anna + ".evil", "tier": "silver"},
		"crm:acme:1004":   map[string]any{"email": anna, "tier": "gold"},
		"crm:globex:1001": map[string]string{"email": anna, "tier": "gold"},
		"crm:globex:1002": map[string]string{"email": "carl@y.de", "tier": "gold"},
		"counter:hits":    "17",
	}
	return kv
}

func findLoc(got []deletion.Uncovered, loc string) (deletion.Uncovered, bool) {
	i := slices.IndexFunc(got, func(u deletion.Uncovered) bool { return u.Location == loc })
	if i < 0 {
		return deletion.Uncovered{}, false
	}
	return got[i], true
}

var tenants = deletion.DiscoverOptions{Tenants: []string{"acme", "globex"}}

// TestDiscoverSuggestsRecords: discovery names the CRM family's identity field (never a
// value) and suggests a records entry; that entry decodes, validates, covers the family
// (a second discovery with it in the inventory no longer reports it) and erases the
// subject's record.
func TestDiscoverSuggestsRecords(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	put(t, c, seedCRM(t))
	put(t, c, map[string]any{
		"customer:acme:cust-77":   "plain",
		"thread_id:acme:t-1":      "plain",
		"chat:acme:u1":            map[string]any{"meta": map[string]any{"user_id": "u1"}, "to": "+44 20 7946 0958", "n": 3},
		"names:acme":              map[string]string{"u4242": anna}, // a field name that is an identifier
		"deep:99:customer:acme:5": "plain",                          // an {id} before the subject's part: no key template
		"customer:nowhere:5":      "plain",                          // no known tenant: no entry
		"crm:acme:1001:notes":     map[string]any{"email": anna},    // a family of its own: {id} is one part
	})
	store := redisstore.New(c)
	got, err := store.Discover(ctx, inventory.Reference(), tenants)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := findLoc(got, "crm:{tenant}:{id}")
	if !ok {
		t.Fatalf("discovered %+v, want the crm family", got)
	}
	if !slices.Equal(u.Fields, []string{"email"}) || u.Suggest == "" {
		t.Fatalf("crm family = %+v, want fields [email] and a suggestion", u)
	}
	t.Logf("suggested:\n%s", u.Suggest)
	var st inventory.Entry
	if err := yaml.Unmarshal([]byte(u.Suggest), &st); err != nil {
		t.Fatalf("suggestion does not decode as an entry: %v", err)
	}
	if err := redisstore.Validate(st); err != nil || st.Name != "crm" || st.Kind != redisstore.Kind {
		t.Fatalf("suggested entry %+v: %v", st, err)
	}
	var l redisstore.Locators
	if err := st.Locators.Decode(&l); err != nil || len(l.Records) != 1 || l.Records[0].Keys != "crm:{tenant}:{id}" || !slices.Equal(l.Records[0].Fields, []string{"email"}) {
		t.Errorf("suggested locators %+v, %v", l, err)
	}
	if chat, ok := findLoc(got, "chat:{tenant}:{id}"); !ok || !slices.Equal(chat.Fields, []string{"meta.user_id", "to"}) || !strings.Contains(chat.Suggest, "meta.user_id") {
		t.Errorf("chat family = %+v, want fields meta.user_id and to", chat)
	}
	if n, ok := findLoc(got, "names:{tenant}"); !ok || len(n.Fields) != 0 || n.Suggest != "" {
		t.Errorf("names family = %+v, want no field (its only field name is an identifier) and no suggestion", n)
	}
	wantKeys := map[string]string{"customer:{tenant}:{id}": "customer:{tenant}:{subject}", "thread_id:{tenant}:{id}": "thread_id:{tenant}:{session}"}
	for loc, tmpl := range wantKeys {
		k, ok := findLoc(got, loc)
		var e inventory.Entry
		var kl redisstore.Locators
		if !ok || yaml.Unmarshal([]byte(k.Suggest), &e) != nil || redisstore.Validate(e) != nil || e.Locators.Decode(&kl) != nil || !slices.Equal(kl.Keys, []string{tmpl}) {
			t.Errorf("%s = %+v, want a keys suggestion %q", loc, k, tmpl)
		}
	}
	if notes, ok := findLoc(got, "crm:{tenant}:{id}:{id}"); !ok || !strings.HasPrefix(notes.Suggest, "name: crm-2\n") {
		t.Errorf("crm notes family = %+v, want a suggestion named crm-2", notes)
	}
	for _, loc := range []string{"deep:{id}:customer:{tenant}:{id}", "customer:{id}:{id}"} {
		if d, ok := findLoc(got, loc); !ok || d.Suggest != "" {
			t.Errorf("%s = %+v, want it reported without a suggestion", loc, d)
		}
	}
	for _, u := range got {
		for _, raw := range []string{"anna", "bob@", "u4242", "cust-77", "7946"} {
			if strings.Contains(u.Suggest+strings.Join(u.Fields, ",")+u.Location+u.Reason, raw) {
				t.Errorf("report %+v holds %q", u, raw)
			}
		}
	}

	inv := inventory.Reference()
	inv.Stores = append(inv.Stores, st)
	if err := inv.Validate(); err != nil {
		t.Fatal(err)
	}
	again, err := store.Discover(ctx, inv, tenants)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := findLoc(again, "crm:{tenant}:{id}"); ok {
		t.Errorf("with the suggested entry, discovery still reports %+v", u)
	}
	if _, ok := findLoc(again, "crm:{tenant}:{id}:{id}"); !ok {
		t.Error("the suggested entry hides the longer crm family, which it does not cover")
	}
	if len(again) != len(got)-1 {
		t.Errorf("second discovery reports %d families, want %d", len(again), len(got)-1)
	}
	res, err := store.Erase(ctx, st, deletion.Subject{Tenant: "acme", ID: anna})
	if err != nil || res.Deleted() != 2 || !slices.Equal(res.Locations, []event.LocationCount{{Location: "crm:acme:{id}", Deleted: 2}}) {
		t.Errorf("Erase with the suggested entry = %+v, %v; want crm:acme:1001 and 1004", res, err)
	}
	if !exists(c, "crm:acme:1003") || !exists(c, "crm:globex:1001") {
		t.Error("the suggested entry erased a bystander")
	}
}

// TestProbe probes discovered families for a subject: it finds the subject's records of
// its tenant only, nothing for an unknown subject, marks what it cannot read or parse and
// where a bound stopped it, and holds no identifier in its results.
func TestProbe(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	put(t, c, seedCRM(t))
	put(t, c, map[string]any{
		"queue:acme:1":            []string{anna},
		"queue:acme:2":            map[string]string{"owner": anna},
		"customer:acme:" + anna:   "plain",
		"customer:acme:bob":       "plain",
		"customer:globex:" + anna: "plain",
	})
	store := redisstore.New(c)
	inv := inventory.Reference()
	found, err := store.Discover(ctx, inv, tenants)
	if err != nil {
		t.Fatal(err)
	}
	crm, ok := findLoc(found, "crm:{tenant}:{id}")
	if !ok {
		t.Fatalf("discovered %+v, want the crm family", found)
	}
	queue := deletion.Uncovered{Kind: redisstore.Kind, Location: "queue:{tenant}:{id}"}
	customer := deletion.Uncovered{Kind: redisstore.Kind, Location: "customer:{tenant}:{id}"}
	allValues := crm
	allValues.Fields = nil
	locs := []deletion.Uncovered{
		crm,
		allValues,
		queue,
		customer,
		{Kind: redisstore.Kind, Location: "crm:{tenant}x:{id}"},
		{Kind: redisstore.Kind, Location: "crm:[ab]:{id}"},
		{Kind: "qdrant", Location: "kb_{tenant}"},
	}
	s := deletion.Subject{Tenant: "acme", ID: anna, Sessions: []string{"sess-1"}}
	got, err := store.Probe(ctx, inv, locs, s, deletion.ProbeLimits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		found      int64
		unexamined string
	}{
		{2, ""},
		{2, ""},
		{1, "1 key is neither a hash nor a string, its fields were not read"},
		{1, ""}, // the key part holds the id
		{0, "cannot parse the location"},
		{0, "cannot parse the location"},
		{0, "not a redis location"},
	}
	if len(got) != len(locs) {
		t.Fatalf("Probe = %+v, want %d results", got, len(locs))
	}
	for i, w := range want {
		if got[i].Location != locs[i].Location || got[i].Found != w.found || (w.unexamined == "") != (got[i].Unexamined == "") || !strings.Contains(got[i].Unexamined, w.unexamined) {
			t.Errorf("Probe[%d] = %+v, want found %d, unexamined %q", i, got[i], w.found, w.unexamined)
		}
	}
	b, _ := json.Marshal(got)
	for _, raw := range []string{"anna", "x.de", "sess-1", "bob", "gold"} {
		if strings.Contains(string(b), raw) {
			t.Errorf("results %s hold %q", b, raw)
		}
	}

	none, err := store.Probe(ctx, inv, []deletion.Uncovered{crm, customer}, deletion.Subject{Tenant: "acme", ID: "zed@x.de"}, deletion.ProbeLimits{})
	if err != nil || len(none) != 2 || none[0].Found != 0 || none[0].Unexamined != "" || none[1].Found != 0 || none[1].Unexamined != "" {
		t.Errorf("Probe of an absent subject = %+v, %v; want nothing found, all examined", none, err)
	}
	globex, err := store.Probe(ctx, inv, []deletion.Uncovered{crm}, deletion.Subject{Tenant: "globex", ID: anna}, deletion.ProbeLimits{})
	if err != nil || len(globex) != 1 || globex[0].Found != 1 {
		t.Errorf("Probe in globex = %+v, %v; want its one record", globex, err)
	}

	bounded, err := store.Probe(ctx, inv, []deletion.Uncovered{crm}, s, deletion.ProbeLimits{Items: 2})
	if err != nil || len(bounded) != 1 || !strings.Contains(bounded[0].Unexamined, "bound reached after 2 keys") {
		t.Errorf("Probe with Items 2 = %+v, %v; want the bound reported", bounded, err)
	}
	exact, err := store.Probe(ctx, inv, []deletion.Uncovered{crm}, s, deletion.ProbeLimits{Items: 4})
	if err != nil || len(exact) != 1 || exact[0].Found != 2 || exact[0].Unexamined != "" {
		t.Errorf("Probe with Items 4 (the family's size) = %+v, %v; want it examined whole", exact, err)
	}
	timed, err := store.Probe(ctx, inv, []deletion.Uncovered{crm}, s, deletion.ProbeLimits{Time: time.Nanosecond})
	if err != nil || len(timed) != 1 || !strings.Contains(timed[0].Unexamined, "time bound") {
		t.Errorf("Probe with 1ns = %+v, %v; want the time bound reported", timed, err)
	}

	// An inventory entry covering part of the family takes those keys out of the probe.
	covering := inventory.Reference()
	covering.Stores = append(covering.Stores, inventory.Entry{Name: "crm", Kind: redisstore.Kind, Locators: inventory.Locators{
		"keys": []string{"crm:{tenant}:{subject}"},
	}})
	if p, err := store.Probe(ctx, covering, []deletion.Uncovered{crm}, s, deletion.ProbeLimits{}); err != nil || p[0].Found != 0 {
		t.Errorf("Probe of a covered family = %+v, %v; want nothing", p, err)
	}

	if p, err := store.Probe(ctx, inv, locs, deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}, deletion.ProbeLimits{}); err != nil || p != nil {
		t.Errorf("Probe of a tenant = %+v, %v; want nil, nil", p, err)
	}
	if n := c.DBSize(ctx).Val(); n != 12 {
		t.Errorf("%d keys after probing, want the 12 seeded", n)
	}
}

// TestProbeRefused: a family Redis refuses to read (an ACL user without HMGET) is
// unexamined, never zero, and names no value.
func TestProbeRefused(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	put(t, c, seedCRM(t))
	if err := c.Do(ctx, "ACL", "SETUSER", "prober", "on", ">pw", "~*", "+scan", "+get", "+@connection").Err(); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Addr: c.Options().Addr, Username: "prober", Password: "pw"})
	t.Cleanup(func() { limited.Close() })
	loc := deletion.Uncovered{Kind: redisstore.Kind, Location: "crm:{tenant}:{id}", Fields: []string{"email"}}
	got, err := redisstore.New(limited).Probe(ctx, inventory.Reference(), []deletion.Uncovered{loc}, deletion.Subject{Tenant: "acme", ID: anna}, deletion.ProbeLimits{})
	if err != nil || len(got) != 1 || !strings.Contains(got[0].Unexamined, "Redis refused to read it (NOPERM)") || strings.Contains(got[0].Unexamined, anna) {
		t.Errorf("Probe without HMGET = %+v, %v; want it unexamined, refused", got, err)
	}
}
