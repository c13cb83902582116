package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// crmInventory declares two records families in the inventory's own YAML: CRM records
// (hashes or JSON strings) whose email or session_id field names the subject, and profiles
// whose nested contact.email does.
const crmInventory = `
version: "records-test"
stores:
  - name: crm
    kind: redis
    locators:
      records:
        - keys: "crm:{tenant}:*"
          fields: [email, session_id]
        - keys: "profile:{tenant}:{id}"
          fields: [contact.email]
`

func crmStore(t testing.TB) inventory.Entry {
	t.Helper()
	inv, err := inventory.Parse([]byte(crmInventory))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := inv.Entry("crm")
	if err := redisstore.Validate(st); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return st
}

// put writes hashes (a map) and strings (anything else, JSON-encoded) under their keys.
func put(t testing.TB, c redis.UniversalClient, kv map[string]any) {
	t.Helper()
	ctx := context.Background()
	for k, v := range kv {
		var err error
		switch v := v.(type) {
		case map[string]string:
			args := []any{}
			for f, x := range v {
				args = append(args, f, x)
			}
			err = c.HSet(ctx, k, args...).Err()
		case []string:
			err = c.RPush(ctx, k, v).Err()
		case string:
			err = c.Set(ctx, k, v, 0).Err()
		default:
			b, _ := json.Marshal(v)
			err = c.Set(ctx, k, b, 0).Err()
		}
		if err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
}

func exists(c redis.UniversalClient, key string) bool {
	return c.Exists(context.Background(), key).Val() == 1
}

const anna = "anna@x.de"

// TestRecordsErase erases a subject from field-matched families: its hashes and JSON
// records go (matched by email, by a session id, by a dotted path), a bystander whose
// email extends or prefixes the subject's stays, the same email in another tenant (and in
// a tenant whose id extends this one) stays, counts are exact and Count predicts them.
func TestRecordsErase(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	st := crmStore(t)
	s := deletion.Subject{Tenant: "acme", ID: anna, Sessions: []string{"sess-9"}}
	gone := map[string]any{
		"crm:acme:1001":     map[string]string{"email": anna, "tier": "gold"},
		"crm:acme:1005":     map[string]string{"session_id": "sess-9"},
		"crm:acme:2001":     map[string]any{"email": anna, "tier": "gold"},
		"crm:acme:x:1":      map[string]string{"email": anna},
		"profile:acme:u1":   map[string]any{"contact": map[string]any{"email": anna}},
		"profile:acme:u3":   map[string]string{"contact.email": anna}, // a hash field named with a dot
		"profile:acme:u4":   map[string]any{"contact": []any{map[string]any{"email": "b@x.de"}, map[string]any{"email": anna}}},
		"crm:acme:1006":     map[string]any{"email": []any{"b@x.de", anna}},
		"crm:acme:1007":     map[string]any{"email": anna, "note": "json with spaces "},
		"crm:acme:%25weird": map[string]string{"email": anna},
	}
	kept := map[string]any{
		"crm:acme:1002":         map[string]string{"email": anna + ".evil"},
		"crm:acme:1003":         map[string]string{"email": "anna@x.d"},
		"crm:acme:1004":         map[string]string{"email": "ANNA@x.de", "tier": anna}, // tier is no named field
		"crm:acme:2002":         map[string]any{"email": anna + ".evil"},
		"crm:acme:2003":         map[string]any{"profile": map[string]any{"email": anna}}, // not a named path
		"crm:globex:1001":       map[string]string{"email": anna},
		"crm:acme%3Aeu:1":       map[string]string{"email": anna}, // tenant "acme:eu"
		"crmx:acme:1":           map[string]string{"email": anna},
		"profile:acme:u2:extra": map[string]any{"contact": map[string]any{"email": anna}}, // {id} is one part
		"profile:globex:u1":     map[string]any{"contact": map[string]any{"email": anna}},
		"session:acme:" + anna:  "not a records key",
	}
	put(t, c, gone)
	put(t, c, kept)
	store := redisstore.New(c)
	want := []event.LocationCount{{Location: "crm:acme:*", Deleted: 7}, {Location: "profile:acme:{id}", Deleted: 3}}

	counted, err := store.Count(ctx, st, s)
	if err != nil || !slices.Equal(counted, want) {
		t.Errorf("Count = %v, %v; want %v", counted, err, want)
	}
	v, err := store.Verify(ctx, st, s)
	if err != nil || v.Remaining != int64(len(gone)) || v.Unexamined != 0 || !strings.HasSuffix(v.Method, redisstore.VerifyRecordsSuffix) {
		t.Errorf("Verify before = %+v, %v; want %d remaining", v, err, len(gone))
	}
	res, err := store.Erase(ctx, st, s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Locations, want) {
		t.Errorf("Erase = %v, want %v", res.Locations, want)
	}
	for k := range gone {
		if exists(c, k) {
			t.Errorf("%s survives", k)
		}
	}
	for k := range kept {
		if !exists(c, k) {
			t.Errorf("%s was erased", k)
		}
	}
	if v, err := store.Verify(ctx, st, s); err != nil || !v.Clean() || v.Remaining != 0 {
		t.Errorf("Verify after = %+v, %v; want clean", v, err)
	}
	if res, err := store.Erase(ctx, st, s); err != nil || res.Deleted() != 0 {
		t.Errorf("second Erase = %+v, %v; want nothing", res, err)
	}
	for _, l := range res.Locations {
		if strings.Contains(l.Location, "anna") || strings.Contains(l.Location, "sess-9") {
			t.Errorf("location %q holds an identifier", l.Location)
		}
	}
}

// TestRecordsBesideKeys: one entry with key templates and records families erases both;
// a key both cover is unlinked (and counted) once, under its key template, by Count too.
func TestRecordsBesideKeys(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	st := inventory.Entry{Name: "mixed", Kind: redisstore.Kind, Locators: inventory.Locators{
		"keys":    []string{"session:{tenant}:{subject}:*", "crm:{tenant}:{subject}"},
		"records": []any{map[string]any{"keys": "crm:{tenant}:*", "fields": []any{"email"}}},
	}}
	s := deletiontest.NewSubject("acme", anna)
	put(t, c, map[string]any{
		"session:acme:" + anna + ":1": "history",
		"crm:acme:" + anna:            map[string]string{"email": anna}, // both cover it
		"crm:acme:7":                  map[string]string{"email": anna},
		"crm:acme:8":                  map[string]string{"email": "b@x.de"},
	})
	store := redisstore.New(c)
	want := []event.LocationCount{{Location: "session:acme:{subject}:*", Deleted: 1}, {Location: "crm:acme:{subject}", Deleted: 1}, {Location: "crm:acme:*", Deleted: 1}}
	if n, err := store.Count(ctx, st, s); err != nil || !slices.Equal(n, want) {
		t.Errorf("Count = %v, %v; want %v", n, err, want)
	}
	res, err := store.Erase(ctx, st, s)
	if err != nil || !slices.Equal(res.Locations, want) {
		t.Errorf("Erase = %v, %v; want %v", res.Locations, err, want)
	}
	if !exists(c, "crm:acme:8") || c.DBSize(ctx).Val() != 1 {
		t.Errorf("left %d keys, want only crm:acme:8", c.DBSize(ctx).Val())
	}
	if v, err := store.Verify(ctx, st, s); err != nil || !v.Clean() {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}

// TestRecordsTenantScope: a tenant erasure removes every key of the tenant's families,
// whatever they hold and whatever their type, and nothing of another tenant.
func TestRecordsTenantScope(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	st := crmStore(t)
	acme := map[string]any{
		"crm:acme:1":      map[string]string{"email": anna},
		"crm:acme:2":      map[string]string{"email": "b@x.de"},
		"crm:acme:3":      map[string]any{"tier": "gold"},
		"crm:acme:4":      []string{"a list"},
		"crm:acme:5:6":    "plain",
		"profile:acme:u1": map[string]any{"contact": map[string]any{"email": anna}},
	}
	other := map[string]any{
		"crm:globex:1":      map[string]string{"email": anna},
		"crm:acme%3Aeu:1":   map[string]string{"email": anna},
		"profile:globex:u1": map[string]any{},
		"profile:acme:u1:x": map[string]any{},
	}
	put(t, c, acme)
	put(t, c, other)
	store := redisstore.New(c)
	tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
	want := []event.LocationCount{{Location: "crm:acme:*", Deleted: 5}, {Location: "profile:acme:{id}", Deleted: 1}}
	if n, err := store.Count(ctx, st, tenant); err != nil || !slices.Equal(n, want) {
		t.Errorf("Count = %v, %v; want %v", n, err, want)
	}
	res, err := store.Erase(ctx, st, tenant)
	if err != nil || !slices.Equal(res.Locations, want) {
		t.Errorf("Erase = %v, %v; want %v", res.Locations, err, want)
	}
	for k := range other {
		if !exists(c, k) {
			t.Errorf("%s of another tenant was erased", k)
		}
	}
	if c.DBSize(ctx).Val() != int64(len(other)) {
		t.Errorf("%d keys left, want %d", c.DBSize(ctx).Val(), len(other))
	}
	if v, err := store.Verify(ctx, st, tenant); err != nil || !v.Clean() {
		t.Errorf("Verify = %+v, %v; want clean", v, err)
	}
}

// TestRecordsUnreadable: a key of the family that is neither a hash nor a string holding a
// JSON object is left alone by Erase and reported unexamined (by template) by Verify.
func TestRecordsUnreadable(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	st := crmStore(t)
	s := deletion.Subject{Tenant: "acme", ID: anna}
	put(t, c, map[string]any{
		"crm:acme:1": map[string]string{"email": anna},
		"crm:acme:2": []string{anna},
		"crm:acme:3": "not json " + anna,
		"crm:acme:4": `["a JSON array"]`,
	})
	store := redisstore.New(c)
	res, err := store.Erase(ctx, st, s)
	if err != nil || res.Deleted() != 1 {
		t.Fatalf("Erase = %+v, %v; want 1", res, err)
	}
	v, err := store.Verify(ctx, st, s)
	if err != nil {
		t.Fatal(err)
	}
	wantItems := []string{"crm:acme:*: 3 keys are neither hashes nor strings holding a JSON object, their fields are unknown"}
	if v.Remaining != 0 || v.Unexamined != 3 || !slices.Equal(v.UnexaminedItems, wantItems) {
		t.Errorf("Verify = %+v, want 3 unexamined %q", v, wantItems)
	}
	if deletion.StatusOf(res, v) != event.StatusFailed {
		t.Error("a family with unreadable keys verified clean")
	}
	for _, it := range v.UnexaminedItems {
		if strings.Contains(it, anna) {
			t.Errorf("item %q holds the identifier", it)
		}
	}
	if c.DBSize(ctx).Val() != 3 {
		t.Errorf("%d keys left, want the 3 unreadable ones", c.DBSize(ctx).Val())
	}
}

// TestRecordsBatch erases subjects of two tenants in one batch: each result counts its own
// keys, a key naming two subjects of the batch goes to the first, CountBatch predicts the
// rest, VerifyBatch is clean after, and bystanders stay.
func TestRecordsBatch(t *testing.T) {
	c := realRedis(t)
	ctx := context.Background()
	st := crmStore(t)
	a, b := deletiontest.NewSubject("acme", "a@x.de"), deletiontest.NewSubject("acme", "b@x.de")
	g := deletiontest.NewSubject("globex", "a@x.de")
	keep := deletiontest.NewSubject("acme", "a@x.de.evil")
	subjects := []deletion.Subject{a, b, g}
	var seq atomic.Int64
	seedRecords := func(s deletion.Subject, n int) {
		for range n {
			put(t, c, map[string]any{
				fmt.Sprintf("crm:%s:%d", redisstore.KeyPart(s.Tenant), seq.Add(1)): map[string]string{"email": s.ID},
				fmt.Sprintf("crm:%s:%d", redisstore.KeyPart(s.Tenant), seq.Add(1)): map[string]any{"session_id": s.Sessions[0]},
			})
		}
	}
	seedRecords(a, 1)
	seedRecords(b, 2)
	seedRecords(g, 3)
	seedRecords(keep, 2)
	store := redisstore.New(c)
	counts, errs := store.CountBatch(ctx, st, subjects)
	for i, want := range []int64{2, 4, 6} {
		if errs[i] != nil || deletion.Total(counts[i]) != want {
			t.Errorf("CountBatch[%d] = %v, %v; want %d", i, counts[i], errs[i], want)
		}
	}
	put(t, c, map[string]any{"crm:acme:shared": map[string]string{"email": b.ID, "session_id": a.Sessions[0]}})
	results, errs := store.EraseBatch(ctx, st, subjects)
	for i, want := range []int64{3, 4, 6} { // the shared key goes to a, the first
		if errs[i] != nil || results[i].Deleted() != want {
			t.Errorf("EraseBatch[%d] = %v, %v; want %d", i, results[i].Locations, errs[i], want)
		}
		if errs[i] == nil && results[i].Locations[0].Location != "crm:"+subjects[i].Tenant+":*" {
			t.Errorf("EraseBatch[%d] locations %v", i, results[i].Locations)
		}
	}
	vs, errs := store.VerifyBatch(ctx, st, subjects)
	for i := range subjects {
		if errs[i] != nil || !vs[i].Clean() {
			t.Errorf("VerifyBatch[%d] = %+v, %v", i, vs[i], errs[i])
		}
	}
	if v, err := store.Verify(ctx, st, keep); err != nil || v.Remaining != 4 {
		t.Errorf("bystander Verify = %+v, %v; want 4 remaining", v, err)
	}
}

// TestRecordsConformance runs the conformance suite over a store that only has records
// families: the fixture writes hashes and JSON strings naming the subject by email and by
// session id, and counts them by reading every field itself.
func TestRecordsConformance(t *testing.T) {
	c := realRedis(t)
	deletiontest.Run(t, recordsFixture(c, flushAll(c)))
}

// recordsFixture binds the conformance suite to the crm records store over c; reset
// empties the backend.
func recordsFixture(c redis.UniversalClient, reset func(t *testing.T)) func(t *testing.T) deletiontest.Fixture {
	var seq atomic.Int64
	return func(t *testing.T) deletiontest.Fixture {
		reset(t)
		return deletiontest.Fixture{
			Impl:  redisstore.New(c),
			Store: crmStore(t),
			Seed: func(t *testing.T, s deletion.Subject, n int) int {
				key := func() string { return fmt.Sprintf("crm:%s:%d", redisstore.KeyPart(s.Tenant), seq.Add(1)) }
				want := 0
				for range n {
					put(t, c, map[string]any{key(): map[string]string{"email": s.ID, "tier": "gold"}})
					put(t, c, map[string]any{key(): map[string]any{"email": s.ID}})
					want += 2
					for _, ses := range s.Sessions {
						put(t, c, map[string]any{key(): map[string]string{"session_id": ses}})
						want++
					}
				}
				return want
			},
			Count: func(t *testing.T, s deletion.Subject) int { return countRecords(t, c, s) },
			// Not Unreadable: a key of the family that cannot be read may be any subject's
			// of the tenant, so it leaves every subject's verification unexamined, a
			// bystander's too (TestRecordsUnreadable), where the suite wants a bystander clean.
			Malformed: func(t testing.TB, s deletion.Subject) {
				put(t, c, map[string]any{fmt.Sprintf("crm:%s:list-%d", redisstore.KeyPart(s.Tenant), seq.Add(1)): []string{s.ID}})
			},
			Down: func(t *testing.T) deletion.Store {
				down := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), MaxRetries: -1})
				t.Cleanup(func() { down.Close() })
				return redisstore.New(down)
			},
		}
	}
}

// countRecords counts, independently of the package, the crm keys of s's tenant whose
// email or session_id (hash field or JSON key) is s's id or session.
func countRecords(t testing.TB, c redis.UniversalClient, s deletion.Subject) int {
	t.Helper()
	ctx := context.Background()
	ids := append([]string{s.ID}, s.Sessions...)
	n := 0
	seen := map[string]bool{}
	for _, k := range allKeys(t, c) {
		parts := strings.SplitN(k, ":", 3)
		if seen[k] || len(parts) != 3 || parts[0] != "crm" || decodePart(parts[1]) != s.Tenant {
			continue
		}
		seen[k] = true
		var vals []string
		switch c.Type(ctx, k).Val() {
		case "hash":
			vals = append(vals, c.HGet(ctx, k, "email").Val(), c.HGet(ctx, k, "session_id").Val())
		case "string":
			var doc map[string]any
			if json.Unmarshal([]byte(c.Get(ctx, k).Val()), &doc) == nil {
				for _, f := range []string{"email", "session_id"} {
					if v, ok := doc[f].(string); ok {
						vals = append(vals, v)
					}
				}
			}
		}
		for _, v := range vals {
			if v != "" && slices.Contains(ids, v) {
				n++
				break
			}
		}
	}
	return n
}

// TestValidateRecords: every mistake in a records family is refused, permanently, naming
// the store, the item and the field.
func TestValidateRecords(t *testing.T) {
	rec := func(keys string, fields ...any) map[string]any {
		return map[string]any{"keys": keys, "fields": fields}
	}
	for _, tc := range []struct {
		locators inventory.Locators
		want     string // "" when valid
	}{
		{inventory.Locators{"records": []any{rec("crm:{tenant}:*", "email")}}, ""},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:{id}", "email", "profile.email")}}, ""},
		{inventory.Locators{"records": []any{rec("{tenant}:crm:c*", "email")}}, ""},
		{inventory.Locators{"keys": []string{"s:{tenant}:{subject}:*"}, "index": "i:{tenant}:{subject}", "records": []any{rec("crm:{tenant}:*", "email")}}, ""},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:*")}}, "locators.records[0].fields is empty"},
		{inventory.Locators{"records": []any{map[string]any{"keys": "crm:{tenant}:*"}}}, "locators.records[0].fields is empty"},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:*", "")}}, `locators.records[0].fields: field ""`},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:*", "a..b")}}, `locators.records[0].fields: field "a..b" is empty or has an empty dotted part`},
		{inventory.Locators{"records": []any{rec("crm:*", "email")}}, `locators.records[0].keys: template "crm:*" names no {tenant}`},
		{inventory.Locators{"records": []any{rec("crm:{id}", "email")}}, `names no {tenant}`},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:*", "email"), rec("crm:{tenant}:{subject}", "email")}}, `locators.records[1].keys: template "crm:{tenant}:{subject}" uses {subject}`},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:{session}:*", "email")}}, `locators.records[0].keys: template "crm:{tenant}:{session}:*" uses {session}`},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:{subject_hash}", "email")}}, `uses {subject_hash}`},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:{user}", "email")}}, `locators.records[0].keys: template "crm:{tenant}:{user}" uses placeholder {user}`},
		{inventory.Locators{"records": []any{rec("crm:x{tenant}:*", "email")}}, "must fill a whole key part"},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:{id}x", "email")}}, "must fill a whole key part"},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:{id}*", "email")}}, "cannot be followed by '*'"},
		{inventory.Locators{"records": []any{rec("crm:{tenant}*", "email")}}, "cannot be followed by '*'"},
		{inventory.Locators{"records": []any{rec("crm:*:{tenant}", "email")}}, "only a trailing '*'"},
		{inventory.Locators{"records": []any{rec("crm:[ab]:{tenant}", "email")}}, "only a trailing '*'"},
		{inventory.Locators{"records": []any{rec("", "email")}}, "locators.records[0].keys: template is empty"},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:*", "email"), rec("crm:{tenant}:*", "phone")}}, "locators.records[1].keys: template \"crm:{tenant}:*\" repeats locators.records[0]"},
		{inventory.Locators{"records": []any{map[string]any{"keys": "crm:{tenant}:*", "field": []any{"email"}}}}, `unknown field "field"`},
		{inventory.Locators{"records": []any{map[string]any{"keys": "crm:{tenant}:*", "fields": "email"}}}, `field "records"`},
		{inventory.Locators{"records": []any{rec("crm:{tenant}:*", "email")}, "index": "i:{tenant}:{subject}"}, "locators.index needs locators.keys"},
		{inventory.Locators{"records": []any{}}, "locators.keys is empty and there are no locators.records"},
	} {
		err := redisstore.New(nil).Validate(inventory.Entry{Name: "crm", Kind: redisstore.Kind, Locators: tc.locators})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Validate(%v) = %v, want ok", tc.locators, err)
		case tc.want != "" && (err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `store "crm"`)):
			t.Errorf("Validate(%v) = %v, want a permanent error naming the store and %q", tc.locators, err, tc.want)
		}
	}
}
