package deletiontest

import (
	"context"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// CrossTenantTenants are the tenants CrossTenant seeds: the one it erases, another, and
// one whose id extends the first's (a careless prefix would reach it).
var CrossTenantTenants = []string{"acme", "globex", "acme-eu"}

// CrossTenant checks that no erasure of one tenant touches another tenant's data in a
// backend the tenants share (one Redis, one collection, one bucket, one table). Every
// tenant of CrossTenantTenants gets subjects with the same ids and sessions. It erases one
// subject of acme, then (for a deletion.BatchStore) a batch mixing acme and globex, then
// the whole tenant acme. After each step every subject not erased keeps all its items
// (the fixture's Count) and Verify still finds what it found before. The tenant erasure
// must verify clean while a tenant verification of globex still finds its data. A fixture
// with NoTenantScope expects the tenant erasure refused with a permanent error.
func CrossTenant(t *testing.T, f Fixture) {
	ctx := context.Background()
	type key struct{ tenant, id string }
	ids := []string{"same-1", "same-2", "same-3"}
	var all []key
	seeded := map[key]int{}
	for _, tenant := range CrossTenantTenants {
		for _, id := range ids {
			k := key{tenant, id}
			all = append(all, k)
			seeded[k] = f.Seed(t, NewSubject(tenant, id), 2)
		}
	}
	found := map[key]int64{}
	for _, k := range all {
		v, err := f.Impl.Verify(ctx, f.Store, NewSubject(k.tenant, k.id))
		if err != nil {
			t.Fatalf("Verify of %s/%s before any erasure: %v", k.tenant, k.id, err)
		}
		found[k] = v.Remaining
	}
	erased := map[key]bool{}
	check := func(step string) {
		t.Helper()
		for _, k := range all {
			s := NewSubject(k.tenant, k.id)
			got := f.Count(t, s)
			if erased[k] {
				if got != 0 {
					t.Errorf("after %s: %d items of %s/%s remain", step, got, k.tenant, k.id)
				}
				continue
			}
			if got != seeded[k] {
				t.Errorf("after %s: %s/%s keeps %d items of %d", step, k.tenant, k.id, got, seeded[k])
			}
			v, err := f.Impl.Verify(ctx, f.Store, s)
			if err != nil {
				t.Errorf("after %s: Verify of %s/%s: %v", step, k.tenant, k.id, err)
			} else if v.Remaining != found[k] {
				t.Errorf("after %s: Verify of %s/%s finds %d, found %d before", step, k.tenant, k.id, v.Remaining, found[k])
			}
		}
	}

	victim := key{"acme", "same-1"}
	res, err := f.Impl.Erase(ctx, f.Store, NewSubject(victim.tenant, victim.id))
	if err != nil {
		t.Fatalf("Erase of acme/same-1: %v", err)
	}
	if res.Deleted() != int64(seeded[victim]) {
		t.Errorf("Erase of acme/same-1 reported %d deleted, seeded %d", res.Deleted(), seeded[victim])
	}
	erased[victim] = true
	check("erasing acme/same-1")

	if b, ok := f.Impl.(deletion.BatchStore); ok {
		batch := []key{{"acme", "same-2"}, {"globex", "same-3"}}
		subjects := []deletion.Subject{NewSubject("acme", "same-2"), NewSubject("globex", "same-3")}
		results, errs := b.EraseBatch(ctx, f.Store, subjects)
		for i, k := range batch {
			if errs[i] != nil {
				t.Fatalf("EraseBatch: %s/%s: %v", k.tenant, k.id, errs[i])
			}
			if results[i].Deleted() != int64(seeded[k]) {
				t.Errorf("EraseBatch: %s/%s reported %d deleted, seeded %d", k.tenant, k.id, results[i].Deleted(), seeded[k])
			}
			erased[k] = true
		}
		check("a batch of acme/same-2 and globex/same-3")
	}

	tenant := deletion.Subject{Tenant: "acme", Scope: event.ScopeTenant}
	_, err = f.Impl.Erase(ctx, f.Store, tenant)
	if f.NoTenantScope != "" {
		if !retry.IsPermanent(err) {
			t.Errorf("tenant Erase of a store without tenant scope = %v, want a permanent error", err)
		}
		check("a refused tenant erasure of acme")
		return
	}
	if err != nil {
		t.Fatalf("tenant Erase of acme: %v", err)
	}
	for _, id := range ids {
		erased[key{"acme", id}] = true
	}
	check("erasing the tenant acme")
	if v, err := f.Impl.Verify(ctx, f.Store, tenant); err != nil || !v.Clean() {
		t.Errorf("Verify of the erased tenant acme = %+v, %v; want clean", v, err)
	}
	other := deletion.Subject{Tenant: "globex", Scope: event.ScopeTenant}
	if v, err := f.Impl.Verify(ctx, f.Store, other); err != nil {
		t.Errorf("Verify of the tenant globex: %v", err)
	} else if f.Taint == nil && v.Remaining == 0 {
		t.Error("Verify of the tenant globex finds none of its data: a tenant verification that sees nothing proves nothing")
	}
	if c, ok := f.Impl.(deletion.Counter); ok {
		if locs, err := c.Count(ctx, f.Store, tenant); err != nil || deletion.Total(locs) != 0 {
			t.Errorf("Count of the erased tenant acme = %v, %v; want nothing to delete", locs, err)
		}
	}
}
