package auditlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Addendum types: the facts recorded after a receipt, which the receipt itself never
// changes to say.
const (
	// AddendumReverified: a sweep or re-apply read every store back and found nothing.
	AddendumReverified = "REVERIFIED"
	// AddendumReappeared: a sweep or re-apply found the subject again in some store and
	// erased it again (Stores say where and how much).
	AddendumReappeared = "REAPPEARED"
	// AddendumUnverified: a sweep or re-apply could not prove some store clean (a store
	// FAILED, or its read-back left items remaining or unexamined).
	AddendumUnverified = "UNVERIFIED"
	// AddendumShredded: the request's data key was destroyed; no sealed copy of its
	// identifiers opens any more.
	AddendumShredded = "SHREDDED"
	// AddendumPhysical: a store's physical-erasure date passed with no reappearance and no
	// re-apply (restore) since the receipt; the bytes its logical delete left are gone.
	AddendumPhysical = "PHYSICAL"
	// AddendumReleased: a store the receipt lists EXEMPT under a legal hold was erased after
	// the hold's release (Stores say its status, what it deleted and what remains).
	AddendumReleased = "RELEASED"
	// AddendumReviewed: a person decided on an item of the receipt's review list (Review
	// says which item, the decision and why).
	AddendumReviewed = "REVIEWED"
	// AddendumItemErased: the item a review decided to erase was erased (Review names it;
	// Stores say what was deleted and what the read-back still found).
	AddendumItemErased = "ITEM_ERASED"
)

// Addendum is a fact about an erasure learnt after its receipt, linked into the tenant's
// receipt chain after it (Seq, PrevHash, Hash) like a receipt. It refers to the receipt by
// ReceiptID and RequestID and holds counts only, no identifier.
type Addendum struct {
	AddendumID string          `json:"addendum_id"` // unique; appending the same id twice links it once
	ReceiptID  string          `json:"receipt_id"`
	RequestID  string          `json:"request_id"`
	TenantID   string          `json:"tenant_id"`
	Type       string          `json:"type"`    // an Addendum* constant
	Purpose    string          `json:"purpose"` // SWEEP or REAPPLY for the pass addenda, else empty
	Pass       string          `json:"pass"`    // the sweep's or re-apply's id, else empty
	At         time.Time       `json:"at"`
	Stores     []AddendumStore `json:"stores"`
	// Review is the decision a REVIEWED or ITEM_ERASED addendum records, else nil.
	Review   *event.ReviewDecision `json:"review,omitempty"`
	Seq      int64                 `json:"seq"`
	PrevHash string                `json:"prev_hash"`
	Hash     string                `json:"hash"`
	// ChainKeyID and ChainMAC are the chain key's id and the keyed MAC of Hash, as a
	// receipt carries them (event.Receipt); empty when linked without a chain key.
	ChainKeyID string `json:"chain_key_id,omitempty"`
	ChainMAC   string `json:"chain_mac,omitempty"`
}

// AddendumStore is one store's part of an addendum.
type AddendumStore struct {
	Store      string `json:"store"`
	Status     string `json:"status"`     // the store's report status; for PHYSICAL and SHREDDED empty
	Deleted    int64  `json:"deleted"`    // items found again and erased
	Remaining  int64  `json:"remaining"`  // items the read-back still found
	Unexamined int64  `json:"unexamined"` // items the read-back could not read
}

// Addenda are the addenda of receipts (part of Table).
type Addenda interface {
	// PutAddendum creates a; ErrExists when an addendum with its id exists (left
	// unchanged). Use Append rather than calling it directly.
	PutAddendum(ctx context.Context, a Addendum) error
	// GetAddendum returns the addendum of id or ErrNotFound.
	GetAddendum(ctx context.Context, id string) (Addendum, error)
	// TenantAddenda returns the tenant's addenda ordered by Seq.
	TenantAddenda(ctx context.Context, tenant string) ([]Addendum, error)
	// AddendaOf returns the addenda of a request ordered by Seq.
	AddendaOf(ctx context.Context, requestID string) ([]Addendum, error)
}

// canonicalAddendum is the canonical form HashAddendum hashes; field order is fixed here.
type canonicalAddendum struct {
	V          int             `json:"v"`
	Record     string          `json:"record"`
	AddendumID string          `json:"addendum_id"`
	ReceiptID  string          `json:"receipt_id"`
	RequestID  string          `json:"request_id"`
	TenantID   string          `json:"tenant_id"`
	Type       string          `json:"type"`
	Purpose    string          `json:"purpose"`
	Pass       string          `json:"pass"`
	At         string          `json:"at"`
	Stores     []AddendumStore `json:"stores"`
	// Review is written (v 2) only for an addendum with a review decision, so the hashes
	// of every other addendum stay those of v 1.
	Review   *event.ReviewDecision `json:"review,omitempty"`
	Seq      int64                 `json:"seq"`
	PrevHash string                `json:"prev_hash"`
}

// HashAddendum is the chain hash of a: lower-case hex SHA-256 over encoding/json of
// {v: 1, record: "addendum", addendum_id, receipt_id, request_id, tenant_id, type, purpose,
// pass, at, stores: [{store, status, deleted, remaining, unexamined}], seq, prev_hash} in
// that order, with the rules of HashReceipt (times UTC truncated to milliseconds in RFC
// 3339 with nanoseconds, nil and empty lists both []). The "record" member keeps an
// addendum's canonical form from ever equalling a receipt's. An addendum with a Review is
// hashed as v 2: the same members with review: {store, kind, item, decision, reason}
// between stores and seq.
func HashAddendum(a Addendum) string {
	v := 1
	if a.Review != nil {
		v = 2
	}
	c := canonicalAddendum{
		V: v, Record: "addendum", Review: a.Review, AddendumID: a.AddendumID, ReceiptID: a.ReceiptID, RequestID: a.RequestID,
		TenantID: a.TenantID, Type: a.Type, Purpose: a.Purpose, Pass: a.Pass, At: canonicalTime(a.At),
		Stores: append([]AddendumStore{}, a.Stores...), Seq: a.Seq, PrevHash: a.PrevHash,
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic("auditlog: canonical addendum encoding: " + err.Error()) // strings and ints only
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Append links a into the tenant's chain after its newest record and stores it: it sets
// Seq, PrevHash and Hash and returns the stored addendum, linked true. An addendum whose
// id is stored (or is the head) is returned unchanged with linked false, so calling Append
// again after a crash or on a redelivered event is harmless. It follows Issue's lock-free protocol (read the head,
// help a writer that crashed after moving it, swap the head conditionally, store the
// record) and needs a Store with the Addenda capability; a missing id, request, receipt or
// tenant is Permanent.
func Append(ctx context.Context, s Store, a Addendum) (_ Addendum, linked bool, err error) {
	return Chain{Store: s}.Append(ctx, a)
}

// Append is the package's Append on c.Store; with c.Key the addendum carries its chain
// MAC and the head it is linked after must pass its own (see Chain).
func (c Chain) Append(ctx context.Context, a Addendum) (_ Addendum, linked bool, err error) {
	s := c.Store
	as, ok := s.(Addenda)
	if !ok {
		return Addendum{}, false, retry.Permanent(errors.New("auditlog: append: the store keeps no addenda"))
	}
	if a.AddendumID == "" || a.RequestID == "" || a.ReceiptID == "" || a.TenantID == "" || a.Type == "" {
		return Addendum{}, false, retry.Permanent(errors.New("auditlog: append: addendum needs an id, a type, a receipt, a request and a tenant"))
	}
	a.At = a.At.UTC().Truncate(time.Millisecond)
	a.ChainKeyID, a.ChainMAC = "", ""
	for range maxIssueRounds {
		if err := ctx.Err(); err != nil {
			return Addendum{}, false, fmt.Errorf("auditlog: append: %w", err)
		}
		h, err := s.Head(ctx, a.TenantID)
		if err != nil {
			return Addendum{}, false, fmt.Errorf("auditlog: append: read head: %w", err)
		}
		if h.Addendum != nil && h.Addendum.AddendumID == a.AddendumID {
			return *h.Addendum, false, putHeadRecord(ctx, s, h)
		}
		got, err := as.GetAddendum(ctx, a.AddendumID)
		if err == nil {
			return got, false, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return Addendum{}, false, fmt.Errorf("auditlog: append: read addendum: %w", err)
		}
		if err := putHeadRecord(ctx, s, h); err != nil {
			return Addendum{}, false, err
		}
		next := a
		next.Seq, next.PrevHash = h.Seq+1, h.Hash
		next.Hash = HashAddendum(next)
		if next.ChainKeyID, next.ChainMAC, err = c.admit(a.TenantID, headMAC(h), next.Hash); err != nil {
			return Addendum{}, false, err
		}
		err = s.SwapHead(ctx, a.TenantID, h.Seq, Head{Seq: next.Seq, Hash: next.Hash, Addendum: &next})
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return Addendum{}, false, fmt.Errorf("auditlog: append: swap head: %w", err)
		}
		if err := putAddendum(ctx, as, next); err != nil {
			return Addendum{}, false, err
		}
		return next, true, nil
	}
	return Addendum{}, false, fmt.Errorf("auditlog: append: head of the tenant's chain still contended after %d rounds", maxIssueRounds)
}

// putHeadRecord stores the record the head h names (a receipt or an addendum) unless it
// is stored: the helping step for a writer that crashed after swapping the head.
func putHeadRecord(ctx context.Context, s Store, h Head) error {
	switch {
	case h.Seq == 0:
		return nil
	case h.Addendum != nil:
		as, ok := s.(Addenda)
		if !ok {
			return retry.Permanent(errors.New("auditlog: the chain's head is an addendum and the store keeps no addenda"))
		}
		return putAddendum(ctx, as, *h.Addendum)
	default:
		return putReceipt(ctx, s, h.Receipt)
	}
}

func putAddendum(ctx context.Context, s Addenda, a Addendum) error {
	if err := s.PutAddendum(ctx, a); err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("auditlog: append: write addendum: %w", err)
	}
	return nil
}

// SortAddenda orders addenda by Seq, then AddendumID.
func SortAddenda(as []Addendum) {
	sort.Slice(as, func(i, j int) bool {
		if as[i].Seq != as[j].Seq {
			return as[i].Seq < as[j].Seq
		}
		return as[i].AddendumID < as[j].AddendumID
	})
}
