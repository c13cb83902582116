package auditlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/auditlogtest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

const (
	chainSecret1 = "chain-secret-one-0123456789abcdefghij"
	chainSecret2 = "chain-secret-two-0123456789abcdefghij"
)

func chainRing(t *testing.T, current string, secrets map[string]string) *integrity.Ring {
	t.Helper()
	m := map[string][]byte{}
	for id, s := range secrets {
		m[id] = []byte(s)
	}
	r, err := integrity.NewRing(current, m)
	must(t, err)
	return r
}

// casOnly hides the directory store's Linker, so receipts are linked by Issue's loop of
// conditional writes.
type casOnly struct {
	auditlog.Store
	auditlog.Addenda
}

// chainStores are the two ways a receipt is linked: the directory store's own linker and
// Issue's conditional writes.
func chainStores(t *testing.T) map[string]func(*auditlog.DirStore) auditlog.Store {
	return map[string]func(*auditlog.DirStore) auditlog.Store{
		"linker":             func(s *auditlog.DirStore) auditlog.Store { return s },
		"conditional writes": func(s *auditlog.DirStore) auditlog.Store { return casOnly{s, s} },
	}
}

// keyedChain links three receipts and an addendum under k and returns them in chain order.
func keyedChain(t *testing.T, c auditlog.Chain) ([]event.Receipt, auditlog.Addendum) {
	t.Helper()
	ctx := context.Background()
	var rs []event.Receipt
	for i := 1; i <= 2; i++ {
		r, err := c.Issue(ctx, auditlogtest.Receipt("acme", fmt.Sprintf("req-%d", i)))
		must(t, err)
		rs = append(rs, r)
	}
	a, _, err := c.Append(ctx, auditlogtest.Addendum("req-1/sweep-1", auditlog.AddendumReverified, rs[0].ReceiptID, "req-1", "acme"))
	must(t, err)
	r, err := c.Issue(ctx, auditlogtest.Receipt("acme", "req-3"))
	must(t, err)
	return append(rs, r), a
}

// rebuild rewrites the tenant's chain as a writer of the audit table can: receipt req-2
// altered, every hash from there on recomputed and relinked, the head moved to the new
// last record. keepMACs keeps the records' chain MACs as they were; otherwise they are
// removed.
func rebuild(t *testing.T, s *auditlog.DirStore, rs []event.Receipt, a auditlog.Addendum, keepMACs bool) {
	t.Helper()
	ctx := context.Background()
	r1, r2, r3 := rs[0], rs[1], rs[2]
	strip := func(id, mac *string) {
		if !keepMACs {
			*id, *mac = "", ""
		}
	}
	strip(&r1.ChainKeyID, &r1.ChainMAC)
	must(t, s.OverwriteReceipt(ctx, r1))
	r2.Stores[0].Deleted, r2.Stores[0].Locations[0].Deleted = 0, 0 // the erasure "deleted nothing"
	r2.Hash = auditlog.HashReceipt(r2)
	strip(&r2.ChainKeyID, &r2.ChainMAC)
	must(t, s.OverwriteReceipt(ctx, r2))
	a.PrevHash = r2.Hash
	a.Hash = auditlog.HashAddendum(a)
	strip(&a.ChainKeyID, &a.ChainMAC)
	must(t, s.OverwriteAddendum(ctx, a))
	r3.PrevHash = a.Hash
	r3.Hash = auditlog.HashReceipt(r3)
	strip(&r3.ChainKeyID, &r3.ChainMAC)
	must(t, s.OverwriteReceipt(ctx, r3))
	must(t, s.SwapHead(ctx, "acme", r3.Seq, auditlog.Head{Seq: r3.Seq, Hash: r3.Hash, RequestID: r3.RequestID, Receipt: r3}))
}

// A chain rebuilt by recomputing the plain hashes passes the unkeyed verification, which
// cannot tell, and fails the keyed one, whether the rebuild kept the old MACs or removed
// them. An aggregator with the key refuses to link after a head whose MAC fails.
func TestKeyedChainDetectsRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := chainRing(t, "chain1", map[string]string{"chain1": chainSecret1})
	for name, wrap := range chainStores(t) {
		for _, keep := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/keep MACs %v", name, keep), func(t *testing.T) {
				t.Parallel()
				dir := openDir(t)
				c := auditlog.Chain{Store: wrap(dir), Key: k}
				rs, a := keyedChain(t, c)
				v, err := c.Verify(ctx, "acme")
				if err != nil || v.Records != 4 || v.Keyed != 4 || v.LastUnkeyed != 0 {
					t.Fatalf("keyed chain as linked: %+v, %v; want 4 records, all keyed", v, err)
				}
				for _, r := range rs {
					if r.ChainKeyID != "chain1" || auditlog.CheckChainMAC(k, r.ChainKeyID, r.ChainMAC, r.Hash) != nil {
						t.Fatalf("receipt %s: chain MAC %q under %q does not verify", r.RequestID, r.ChainMAC, r.ChainKeyID)
					}
				}
				rebuild(t, dir, rs, a, keep)
				if err := auditlog.VerifyChain(ctx, dir, "acme"); err != nil {
					t.Fatalf("unkeyed verification of the rebuilt chain: %v; want it to pass (it cannot tell)", err)
				}
				if _, err := (auditlog.Chain{Store: dir, Key: k}).Verify(ctx, "acme"); !errors.Is(err, auditlog.ErrChainBroken) {
					t.Fatalf("keyed verification of the rebuilt chain: %v, want ErrChainBroken", err)
				}
				unkeyed := 0
				c.Unkeyed = func(string, int64) { unkeyed++ }
				_, err = c.Issue(ctx, auditlogtest.Receipt("acme", "req-4"))
				switch {
				case keep && (!errors.Is(err, auditlog.ErrChainBroken) || !retry.IsPermanent(err)):
					t.Errorf("linking after a head whose MAC fails: %v, want a permanent ErrChainBroken", err)
				case !keep && (err != nil || unkeyed != 1):
					t.Errorf("linking after a head without a MAC: %v, %d calls of Unkeyed; want it linked and reported", err, unkeyed)
				}
			})
		}
	}
}

// Chain keys rotate: records linked under the old key verify with a ring that holds it
// beside the new current key, which links after a head the old key signed; a ring
// without the old key reports the old records as unverifiable.
func TestKeyedChainRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := chainRing(t, "chain1", map[string]string{"chain1": chainSecret1})
	rotated := chainRing(t, "chain2", map[string]string{"chain2": chainSecret2, "chain1": chainSecret1})
	for name, wrap := range chainStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := wrap(openDir(t))
			keyedChain(t, auditlog.Chain{Store: s, Key: old})
			r, err := auditlog.Chain{Store: s, Key: rotated}.Issue(ctx, auditlogtest.Receipt("acme", "req-4"))
			if err != nil || r.ChainKeyID != "chain2" {
				t.Fatalf("linking with the rotated key: %+v, %v; want a receipt under chain2", r, err)
			}
			if v, err := (auditlog.Chain{Store: s, Key: rotated}).Verify(ctx, "acme"); err != nil || v.Keyed != 5 {
				t.Errorf("rotated ring: %+v, %v; want all 5 records keyed", v, err)
			}
			dropped := chainRing(t, "chain2", map[string]string{"chain2": chainSecret2})
			if _, err := (auditlog.Chain{Store: s, Key: dropped}).Verify(ctx, "acme"); !errors.Is(err, auditlog.ErrChainBroken) || !strings.Contains(err.Error(), "chain1") {
				t.Errorf("ring without the old key: %v, want ErrChainBroken naming chain1", err)
			}
		})
	}
}

// A chain begun before chain keys verifies keyed once its head carries a MAC, and says
// where its unkeyed part ends; until then keyed verification fails.
func TestKeyedChainAfterUnkeyedRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := chainRing(t, "chain1", map[string]string{"chain1": chainSecret1})
	s := openDir(t)
	for i := 1; i <= 2; i++ {
		_, err := auditlog.Issue(ctx, s, auditlogtest.Receipt("acme", fmt.Sprintf("req-%d", i)))
		must(t, err)
	}
	keyed := auditlog.Chain{Store: s, Key: k}
	if _, err := keyed.Verify(ctx, "acme"); !errors.Is(err, auditlog.ErrChainBroken) || !strings.Contains(err.Error(), "carries no chain MAC") {
		t.Fatalf("keyed verification of an unkeyed chain: %v, want ErrChainBroken: no chain MAC at the head", err)
	}
	var heads []int64
	keyed.Unkeyed = func(tenant string, seq int64) { heads = append(heads, seq) }
	_, err := keyed.Issue(ctx, auditlogtest.Receipt("acme", "req-3"))
	must(t, err)
	if len(heads) != 1 || heads[0] != 2 {
		t.Errorf("Unkeyed saw heads %v, want [2]", heads)
	}
	v, err := keyed.Verify(ctx, "acme")
	if err != nil || v.Records != 3 || v.Keyed != 1 || v.LastUnkeyed != 2 {
		t.Errorf("keyed verification: %+v, %v; want 3 records, 1 keyed, unkeyed up to seq 2", v, err)
	}
}

// TestChainMACGolden pins the chain MAC of a golden receipt, which docs/receipt_hash.py
// recomputes with the key given to it, and refuses with another key. It runs python3, so
// it is not parallel (see TestHashReceiptGolden).
func TestChainMACGolden(t *testing.T) {
	k := chainRing(t, "chain1", map[string]string{"chain1": chainSecret1})
	r := goldenReceipts()["receipt_v3"]
	r.Hash = auditlog.HashReceipt(r)
	r.ChainKeyID, r.ChainMAC = auditlog.ChainMAC(k, r.Hash)
	path, keyFile := filepath.Join("testdata", "receipt_keyed.json"), filepath.Join("testdata", "chain1.key")
	if *update {
		b, err := json.MarshalIndent(r, "", "  ")
		must(t, err)
		must(t, os.WriteFile(path, append(b, '\n'), 0o644))
		must(t, os.WriteFile(keyFile, []byte(chainSecret1+"\n"), 0o644))
	}
	b, err := os.ReadFile(path)
	must(t, err)
	var golden event.Receipt
	must(t, json.Unmarshal(b, &golden))
	if golden.ChainMAC != r.ChainMAC || golden.Hash != r.Hash {
		t.Errorf("chain MAC %s, golden %s: the MAC's form changed (run with -update only if intended)", r.ChainMAC, golden.ChainMAC)
	}
	out, err := exec.Command("python3", "../../docs/receipt_hash.py", "--chain-key", "chain1="+keyFile, path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "chain_mac ok") {
		t.Errorf("docs/receipt_hash.py with the chain key: %v\n%s", err, out)
	}
	other := filepath.Join(t.TempDir(), "other.key")
	must(t, os.WriteFile(other, []byte(chainSecret2), 0o600))
	if out, err := exec.Command("python3", "../../docs/receipt_hash.py", "--chain-key", "chain1="+other, path).CombinedOutput(); err == nil {
		t.Errorf("docs/receipt_hash.py with another key: exit 0\n%s", out)
	}
	if out, err := exec.Command("python3", "../../docs/receipt_hash.py", path).CombinedOutput(); err != nil {
		t.Errorf("docs/receipt_hash.py without a key: %v\n%s", err, out)
	}
}
