package datasetstore

import (
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
)

// The memo returns exactly the prefixes the key computes, computes each value of a kind
// once, and keeps kinds and tenants apart.
func TestPrefixMemo(t *testing.T) {
	k := deletiontest.Key
	memo := newPrefixMemo()
	calls := 0
	counted := func(f func(tenant, v string) uint64) func(string, string) uint64 {
		return func(tenant, v string) uint64 { calls++; return f(tenant, v) }
	}
	check := func(kind byte, tenant string, vals []string, f func(tenant, v string) uint64, wantCalls int) {
		t.Helper()
		set := map[string]int32{}
		for i, v := range vals {
			set[v] = int32(i + 1)
		}
		calls = 0
		got, ns := memo.prefixes(kind, tenant, set, counted(f))
		for i, p := range got {
			if n := set[vals[int(ns[i])-1]]; f(tenant, vals[int(ns[i])-1]) != p || n != ns[i] {
				t.Errorf("kind %c tenant %s: prefix %016x is not paired with its value's count", kind, tenant, p)
			}
		}
		want := map[uint64]bool{}
		for _, v := range vals {
			want[f(tenant, v)] = true
		}
		for _, p := range got {
			if !want[p] {
				t.Errorf("kind %c tenant %s: prefix %016x is no value's", kind, tenant, p)
			}
			delete(want, p)
		}
		if len(want) != 0 || len(got) != len(vals) {
			t.Errorf("kind %c tenant %s: %d prefixes for %d values, %d missing", kind, tenant, len(got), len(vals), len(want))
		}
		if calls != wantCalls {
			t.Errorf("kind %c tenant %s: computed %d prefixes, want %d", kind, tenant, calls, wantCalls)
		}
	}
	check('p', "acme", []string{"cust-a", "cust-b"}, k.PseudonymPrefix, 2)
	check('p', "acme", []string{"cust-a", "cust-b", "cust-c"}, k.PseudonymPrefix, 1)
	check('s', "acme", []string{"cust-a"}, k.SessionPseudonymPrefix, 1)
	check('p', "other", []string{"cust-a"}, k.PseudonymPrefix, 1)
	check('p', "acm", []string{"ecust-a"}, k.PseudonymPrefix, 1) // tenant and value are not merely joined
}
