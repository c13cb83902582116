package main

import (
	"context"
	"strings"
	"testing"
)

// inventory discover asks the deleters for their discovery reports, lists every uncovered
// location as a shape, exits 4 while one is left and never prints a raw value.
func TestInventoryDiscover(t *testing.T) {
	ctx := context.Background()
	tn := tenant(t, "disc")
	key := "crm:" + tn + ":cust-4711"
	if err := sys.Stack.Redis.HSet(ctx, key, "email", "ada@example.com", "plan", "pro").Err(); err != nil {
		t.Fatal(err)
	}
	const shape = "crm:{id}:{id}"
	r := lethectl(t, "inventory", "discover", "--deleter", sys.BaseURL)
	wantCode(t, r, exitProblem)
	if !strings.Contains(r.stdout, shape) || !strings.Contains(r.stdout, "values hold identity-like fields") || !strings.Contains(r.stdout, "redis") {
		t.Errorf("table does not list %s:\n%s", shape, r)
	}
	noRawIDs(t, r, "cust-4711", "ada@example.com", "ada")

	var out discoverResult
	r = invocation{env: map[string]string{"LETHE_DELETERS": sys.BaseURL}}.run(t, "-o", "json", "inventory", "discover", "--cached")
	wantCode(t, r, exitProblem)
	decode(t, r, &out)
	found := false
	for _, rep := range out.Reports {
		if rep.RunAt == nil {
			continue
		}
		for _, u := range rep.Uncovered {
			found = found || u.Location == shape && u.Kind == "redis" && u.Count == 1
		}
	}
	if !found || out.Uncovered == 0 {
		t.Errorf("JSON does not hold %s: %+v", shape, out)
	}

	if err := sys.Stack.Redis.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	r = lethectl(t, "inventory", "discover", "--deleter", sys.BaseURL)
	if strings.Contains(r.stdout, shape) {
		t.Errorf("a removed location is still listed:\n%s", r)
	}
	wantCode(t, lethectl(t, "inventory", "discover"), exitUsage)
	r = lethectl(t, "inventory", "discover", "--deleter", "http://127.0.0.1:1")
	wantCode(t, r, exitError)
}

// A subject found outside the inventory makes the request INCOMPLETE: submit --wait exits
// 4 naming the location and what to do, and inventory suggest lists the location.
func TestIncompleteOutsideTheInventory(t *testing.T) {
	ctx := context.Background()
	tn := tenant(t, "outside")
	subj := "grace-" + tn + "@example.com"
	key := "crm:" + tn + ":9001"
	if err := sys.Stack.Redis.HSet(ctx, key, "email", subj, "plan", "pro").Err(); err != nil {
		t.Fatal(err)
	}
	cleanup := func() {
		sys.Stack.Redis.Del(ctx, key)
		lethectl(t, "inventory", "discover", "--deleter", sys.BaseURL)
	}
	t.Cleanup(cleanup)
	wantCode(t, lethectl(t, "inventory", "discover", "--deleter", sys.BaseURL), exitProblem)

	r := lethectl(t, "submit", "--tenant", tn, "--subject", subj, "--wait")
	wantCode(t, r, exitProblem)
	if !strings.Contains(r.stderr, "INCOMPLETE") || !strings.Contains(r.stdout, "OUTSIDE THE INVENTORY") || !strings.Contains(r.stdout, "crm:{id}:{id}") {
		t.Errorf("submit --wait of a subject outside the inventory:\n%s", r)
	}
	noRawIDs(t, r, subj, key)

	r = lethectl(t, "inventory", "suggest", "--deleter", sys.BaseURL)
	if !strings.Contains(r.stdout, "# redis crm:{id}:{id}") {
		t.Errorf("inventory suggest does not list the location:\n%s", r)
	}
	noRawIDs(t, r, subj, key)
}
