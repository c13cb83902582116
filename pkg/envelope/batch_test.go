package envelope_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// batchCountingStore is a countingStore that also reads in batches, and records the ids
// of each GetBatch.
type batchCountingStore struct {
	*countingStore
	mu      sync.Mutex
	batches [][]string
}

func (b *batchCountingStore) GetBatch(ctx context.Context, ids []string) ([][]byte, []error) {
	b.mu.Lock()
	b.batches = append(b.batches, slices.Clone(ids))
	b.mu.Unlock()
	return b.KeyStore.(envelope.BatchGetter).GetBatch(ctx, ids)
}

// OpenBatch reads the keys of several ids in one GetBatch and answers each id as Open
// does: a shredded key, a missing key, a tampered payload or an invalid id fails only its
// own index, and a repeated id opens at each of its indices.
func TestOpenBatch(t *testing.T) {
	ctx := t.Context()
	bs := &batchCountingStore{countingStore: &countingStore{KeyStore: dirStore(t)}}
	s := &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": randKey(t)}), Keys: bs}
	sealed := map[string]envelope.Sealed{}
	for _, id := range []string{"er_0", "er_1", "er_2", "er_3", "er_4"} {
		sealed[id] = seal(t, s, id, "pt-"+id)
	}
	if err := s.Shred(ctx, "er_2"); err != nil {
		t.Fatal(err)
	}
	tampered := sealed["er_3"]
	tampered.Ciphertext = slices.Clone(tampered.Ciphertext)
	tampered.Ciphertext[0] ^= 1
	sealed["er_3"] = tampered
	sealed["er_none"] = sealed["er_0"] // an id without a key or a tombstone
	sealed[""] = sealed["er_0"]
	ids := []string{"er_0", "er_1", "er_2", "er_3", "er_none", "", "er_4", "er_0"}
	payloads := make([]envelope.Sealed, len(ids))
	for i, id := range ids {
		payloads[i] = sealed[id]
	}
	check := func(name string, pts [][]byte, errs []error) {
		t.Helper()
		if len(pts) != len(ids) || len(errs) != len(ids) {
			t.Fatalf("%s: %d plaintexts, %d errors for %d ids", name, len(pts), len(errs), len(ids))
		}
		for i, id := range ids {
			err := errs[i]
			switch id {
			case "er_2":
				if _, ok := envelope.ShreddedAt(err); !ok || errors.Is(err, envelope.ErrMissing) || !retry.IsPermanent(err) {
					t.Errorf("%s: %q: %v; want permanent ErrShredded", name, id, err)
				}
			case "er_3":
				if !errors.Is(err, envelope.ErrCorrupt) || !retry.IsPermanent(err) {
					t.Errorf("%s: %q: %v; want permanent ErrCorrupt", name, id, err)
				}
			case "er_none":
				if !errors.Is(err, envelope.ErrMissing) || errors.Is(err, envelope.ErrShredded) || !retry.IsPermanent(err) {
					t.Errorf("%s: %q: %v; want permanent ErrMissing, not ErrShredded", name, id, err)
				}
			case "":
				if err == nil || !retry.IsPermanent(err) || errors.Is(err, envelope.ErrMissing) {
					t.Errorf("%s: empty id: %v; want a permanent error", name, err)
				}
			default:
				if err != nil || string(pts[i]) != "pt-"+id {
					t.Errorf("%s: %q = %q, %v; want %q", name, id, pts[i], err, "pt-"+id)
				}
			}
			if err != nil && pts[i] != nil {
				t.Errorf("%s: %q: a plaintext beside the error %v", name, id, err)
			}
		}
	}

	gets := bs.gets.Load()
	pts, errs := s.OpenBatch(ctx, ids, payloads)
	check("OpenBatch", pts, errs)
	want := [][]string{{"er_0", "er_1", "er_2", "er_3", "er_none", "er_4", "er_0"}} // the valid ids
	if !slices.EqualFunc(bs.batches, want, slices.Equal) || bs.gets.Load() != gets {
		t.Fatalf("OpenBatch read %v in batches and made %d Gets; want one batch of %v and no Get", bs.batches, bs.gets.Load()-gets, want[0])
	}

	// One id is read with one Get, as Open reads it.
	bs.batches = nil
	if pts, errs := s.OpenBatch(ctx, ids[:1], payloads[:1]); errs[0] != nil || string(pts[0]) != "pt-er_0" {
		t.Fatalf("OpenBatch of one id = %q, %v", pts[0], errs[0])
	}
	if len(bs.batches) != 0 || bs.gets.Load() != gets+1 {
		t.Fatalf("OpenBatch of one id: %d batches, %d Gets; want none and one", len(bs.batches), bs.gets.Load()-gets)
	}

	// A store that cannot read in batches is read one Get per valid id, with the same outcomes.
	one := &countingStore{KeyStore: bs.KeyStore}
	pts, errs = (&envelope.Sealer{KEK: s.KEK, Keys: one}).OpenBatch(ctx, ids, payloads)
	check("OpenBatch without BatchGetter", pts, errs)
	if n := one.gets.Load(); n != 7 {
		t.Fatalf("OpenBatch without BatchGetter made %d Gets, want 7", n)
	}

	// A store that answers for fewer ids than asked fails every id, none as missing.
	short := &envelope.Sealer{KEK: s.KEK, Keys: shortStore{bs.KeyStore}}
	_, errs = short.OpenBatch(ctx, ids[:2], payloads[:2])
	for i, err := range errs {
		if err == nil || errors.Is(err, envelope.ErrMissing) || errors.Is(err, envelope.ErrShredded) {
			t.Errorf("a store answering for too few ids: %q: %v; want an error", ids[i], err)
		}
	}
}

// shortStore answers GetBatch for one id less than asked.
type shortStore struct{ envelope.KeyStore }

func (s shortStore) GetBatch(ctx context.Context, ids []string) ([][]byte, []error) {
	keys, errs := s.KeyStore.(envelope.BatchGetter).GetBatch(ctx, ids)
	return keys[1:], errs[1:]
}

// IdentifiersBatch opens the sealed requests' identifiers in one GetBatch and passes the
// clear ones through; a nil Sealer refuses sealed requests only.
func TestIdentifiersBatch(t *testing.T) {
	ctx := t.Context()
	bs := &batchCountingStore{countingStore: &countingStore{KeyStore: dirStore(t)}}
	s := &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": randKey(t)}), Keys: bs}
	sealedReq := func(id, subject string) *event.Requested {
		ids := event.Identifiers{SubjectID: subject, SessionIDs: []string{"s-" + subject}}
		si, err := s.SealIdentifiers(ctx, id, ids)
		if err != nil {
			t.Fatal(err)
		}
		return &event.Requested{RequestID: id, Sealed: si}
	}
	reqs := []*event.Requested{
		sealedReq("er_a", "alice"),
		{RequestID: "er_clear", Identifiers: event.Identifiers{SubjectID: "carol"}},
		sealedReq("er_b", "bob"),
		sealedReq("er_gone", "dave"),
	}
	if err := s.Shred(ctx, "er_gone"); err != nil {
		t.Fatal(err)
	}
	gets := bs.gets.Load()
	out, errs := s.IdentifiersBatch(ctx, reqs)
	for i, want := range []string{"alice", "carol", "bob"} {
		if errs[i] != nil || out[i].SubjectID != want {
			t.Errorf("%s: %+v, %v; want subject %s", reqs[i].RequestID, out[i], errs[i], want)
		}
	}
	if out[0].SessionIDs[0] != "s-alice" || out[2].SessionIDs[0] != "s-bob" {
		t.Errorf("sessions %v, %v", out[0].SessionIDs, out[2].SessionIDs)
	}
	if !errors.Is(errs[3], envelope.ErrShredded) {
		t.Errorf("shredded request: %v, want ErrShredded", errs[3])
	}
	if want := [][]string{{"er_a", "er_b", "er_gone"}}; !slices.EqualFunc(bs.batches, want, slices.Equal) || bs.gets.Load() != gets {
		t.Errorf("IdentifiersBatch read %v in batches and made %d Gets; want %v and none", bs.batches, bs.gets.Load()-gets, want)
	}

	var none *envelope.Sealer
	out, errs = none.IdentifiersBatch(ctx, reqs[:2])
	if errs[0] == nil || errs[1] != nil || out[1].SubjectID != "carol" {
		t.Errorf("nil Sealer: %+v, %v; want the sealed request refused and the clear one passed", out, errs)
	}
}
