package auditlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Errors of VerifyChain.
var (
	// ErrChainBroken marks a chain that fails verification: tampered, forged or lost
	// receipts.
	ErrChainBroken = errors.New("auditlog: receipt chain broken")
	// ErrChainPending marks a chain whose head is one receipt ahead of the stored receipts
	// and otherwise intact: an Issue is in flight or crashed between linking the head and
	// writing the receipt. The next Issue for the tenant writes the missing receipt.
	ErrChainPending = errors.New("auditlog: receipt chain has a pending receipt")
)

// maxIssueRounds bounds Issue's retries. Every lost round means another writer linked a
// receipt, so the bound is only reached under extreme contention on one tenant.
const maxIssueRounds = 256

// canonicalReceipt is the canonical form HashReceipt hashes. Field order is fixed by this
// declaration; changing it changes every hash.
type canonicalReceipt struct {
	V                int              `json:"v"`
	ReceiptID        string           `json:"receipt_id"`
	RequestID        string           `json:"request_id"`
	TenantID         string           `json:"tenant_id"`
	SubjectHash      string           `json:"subject_hash"`
	KeyID            string           `json:"key_id"`
	Scope            string           `json:"scope"`
	Regulation       string           `json:"regulation"`
	RequestedAt      string           `json:"requested_at"`
	CompletedAt      string           `json:"completed_at"`
	DueAt            string           `json:"due_at"`
	ElapsedMS        int64            `json:"elapsed_ms"`
	InventoryVersion string           `json:"inventory_version"`
	Stores           []canonicalStore `json:"stores"`
	AuditLogPII      bool             `json:"audit_log_pii"`
	Status           string           `json:"status"`
	Seq              int64            `json:"seq"`
	PrevHash         string           `json:"prev_hash"`
	// IdentifiersShredAt is from format 3 ("" when the receipt does not say).
	IdentifiersShredAt *string `json:"identifiers_shred_at,omitempty"`
	// Review is format 4 only.
	Review *[]canonicalReview `json:"review,omitempty"`
}

type canonicalReview struct {
	Store string `json:"store"`
	Kind  string `json:"kind"`
	Item  string `json:"item"`
}

type canonicalStore struct {
	Store        string             `json:"store"`
	Kind         string             `json:"kind"`
	Status       string             `json:"status"`
	Deleted      int64              `json:"deleted"`
	Locations    []canonicalLoc     `json:"locations"`
	Verification canonicalVerifying `json:"verification"`
	Physical     string             `json:"physical"`
	// PhysicalErasureDue is format 3 only ("" when the store does not say).
	PhysicalErasureDue *string `json:"physical_erasure_due,omitempty"`
}

type canonicalLoc struct {
	Location string `json:"location"`
	Deleted  int64  `json:"deleted"`
}

// canonicalVerifying is a store's verification. Format 1 has method and remaining only;
// format 2 adds unexamined, unexamined_items, excluded, attestation, mentions, similar,
// discovery_run_at and discovery_uncovered, always present ([], "" or 0 when empty; a
// discovery that never ran is "").
type canonicalVerifying struct {
	Method          string    `json:"method"`
	Remaining       int64     `json:"remaining"`
	Unexamined      *int64    `json:"unexamined,omitempty"`
	UnexaminedItems *[]string `json:"unexamined_items,omitempty"`
	Excluded        *[]string `json:"excluded,omitempty"`
	Attestation     *string   `json:"attestation,omitempty"`
	Mentions        *int64    `json:"mentions,omitempty"`
	Similar         *[]string `json:"similar,omitempty"`
	DiscoveryRunAt  *string   `json:"discovery_run_at,omitempty"`
	Uncovered       *int64    `json:"discovery_uncovered,omitempty"`
	// Outside is format 4 only.
	Outside *[]canonicalOutside `json:"outside_inventory,omitempty"`
}

type canonicalOutside struct {
	Location   string `json:"location"`
	Found      int64  `json:"found"`
	Unexamined string `json:"unexamined"`
	Suggest    string `json:"suggest"`
}

// hashFormat is the canonical format of r: 1 when no store's verification carries the
// fields format 2 added (so every receipt issued before them hashes as it did), else 2.
// Tampering that adds or removes those fields changes the format and so the hash.
//
// Format 3 is used exactly when the receipt says when its identifiers will be shredded or
// some store says when its bytes are physically erased; it has every format 2 field and
// adds those dates. Format 4 is used exactly when some store's verification lists
// locations outside the inventory or the receipt lists items for review; it has every
// format 3 field and adds those lists.
// Receipts without them keep format 1, 2 or 3, byte for byte.
func hashFormat(r event.Receipt) int {
	if len(r.Review) > 0 {
		return 4
	}
	for _, s := range r.Stores {
		if len(s.Verification.OutsideInventory) > 0 {
			return 4
		}
	}
	if r.IdentifiersShredAt != nil {
		return 3
	}
	for _, s := range r.Stores {
		if s.PhysicalErasureDue != nil {
			return 3
		}
	}
	for _, s := range r.Stores {
		v := s.Verification
		if v.Unexamined != 0 || len(v.UnexaminedItems) > 0 || len(v.Excluded) > 0 || v.Attestation != "" ||
			v.Mentions != 0 || len(v.Similar) > 0 || v.DiscoveryRunAt != nil || v.DiscoveryUncovered != 0 {
			return 2
		}
	}
	return 1
}

func canonicalVerification(v event.Verification, format int) canonicalVerifying {
	c := canonicalVerifying{Method: v.Method, Remaining: v.Remaining}
	if format >= 2 {
		items := append([]string{}, v.UnexaminedItems...)
		excluded := append([]string{}, v.Excluded...)
		similar := append([]string{}, v.Similar...)
		runAt := ""
		if v.DiscoveryRunAt != nil {
			runAt = canonicalTime(*v.DiscoveryRunAt)
		}
		c.Unexamined, c.UnexaminedItems, c.Excluded, c.Attestation = &v.Unexamined, &items, &excluded, &v.Attestation
		c.Mentions, c.Similar, c.DiscoveryRunAt, c.Uncovered = &v.Mentions, &similar, &runAt, &v.DiscoveryUncovered
	}
	if format >= 4 {
		outside := make([]canonicalOutside, 0, len(v.OutsideInventory))
		for _, o := range v.OutsideInventory {
			outside = append(outside, canonicalOutside{Location: o.Location, Found: o.Found, Unexamined: o.Unexamined, Suggest: o.Suggest})
		}
		c.Outside = &outside
	}
	return c
}

// canonicalTime is t in UTC, truncated to milliseconds (the precision of the Avro
// timestamp-millis fields on erasure.completed), in RFC 3339 with nanoseconds.
func canonicalTime(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
}

// optionalTime is the canonical form of an optional time: "" when absent.
func optionalTime(t *time.Time) *string {
	s := ""
	if t != nil {
		s = canonicalTime(*t)
	}
	return &s
}

// HashReceipt is the chain hash of r: lower-case hex SHA-256 over the canonical encoding of
// every field of r except Hash (Seq and PrevHash included).
//
// The canonical encoding is encoding/json of a struct with this fixed field order:
// v (format version, 1 to 4, see below), receipt_id, request_id, tenant_id, subject_hash,
// key_id, scope, regulation, requested_at, completed_at, due_at, elapsed_ms,
// inventory_version, stores (in the receipt's order, each: store, kind, status, deleted,
// locations (each: location, deleted), verification (method, remaining; from format 2 also
// unexamined, unexamined_items, excluded, attestation, mentions, similar, discovery_run_at,
// discovery_uncovered, and in format 4 outside_inventory, each: location, found,
// unexamined, suggest), physical, and from format 3 physical_erasure_due), audit_log_pii,
// status, seq, prev_hash, from format 3 identifiers_shred_at, and in format 4 review (each:
// store, kind, item). Format 4 is used exactly when some store's verification lists
// outside_inventory or the receipt lists review. Otherwise format 3 is used
// exactly when the receipt has identifiers_shred_at or some store has physical_erasure_due
// (each "" when absent in a format 3 or 4 receipt). Otherwise format 2 is used exactly when some store's
// verification has one of format 2's fields set (non-zero, non-empty, non-nil); otherwise
// format 1, which every earlier receipt was hashed with. Times are UTC truncated to
// milliseconds, formatted RFC 3339 with nanoseconds ("2025-01-02T03:04:05.678Z"); nil and
// empty lists both encode as []; strings follow encoding/json (HTML-escaped <, > and &,
// invalid UTF-8 replaced by U+FFFD). So a receipt hashes the same before and after an Avro
// or JSON round trip, on every run and platform.
func HashReceipt(r event.Receipt) string {
	format := hashFormat(r)
	c := canonicalReceipt{
		V:                format,
		ReceiptID:        r.ReceiptID,
		RequestID:        r.RequestID,
		TenantID:         r.TenantID,
		SubjectHash:      r.SubjectHash,
		KeyID:            r.KeyID,
		Scope:            string(r.Scope),
		Regulation:       r.Regulation,
		RequestedAt:      canonicalTime(r.RequestedAt),
		CompletedAt:      canonicalTime(r.CompletedAt),
		DueAt:            canonicalTime(r.DueAt),
		ElapsedMS:        r.ElapsedMS,
		InventoryVersion: r.InventoryVersion,
		Stores:           make([]canonicalStore, 0, len(r.Stores)),
		AuditLogPII:      r.AuditLogPII,
		Status:           r.Status,
		Seq:              r.Seq,
		PrevHash:         r.PrevHash,
	}
	if format >= 3 {
		c.IdentifiersShredAt = optionalTime(r.IdentifiersShredAt)
	}
	if format >= 4 {
		review := make([]canonicalReview, 0, len(r.Review))
		for _, i := range r.Review {
			review = append(review, canonicalReview{Store: i.Store, Kind: i.Kind, Item: i.Item})
		}
		c.Review = &review
	}
	for _, s := range r.Stores {
		cs := canonicalStore{
			Store: s.Store, Kind: s.Kind, Status: string(s.Status), Deleted: s.Deleted,
			Locations:    make([]canonicalLoc, 0, len(s.Locations)),
			Verification: canonicalVerification(s.Verification, format),
			Physical:     s.Physical,
		}
		if format >= 3 {
			cs.PhysicalErasureDue = optionalTime(s.PhysicalErasureDue)
		}
		for _, l := range s.Locations {
			cs.Locations = append(cs.Locations, canonicalLoc{Location: l.Location, Deleted: l.Deleted})
		}
		c.Stores = append(c.Stores, cs)
	}
	b, err := json.Marshal(c)
	if err != nil {
		panic("auditlog: canonical receipt encoding: " + err.Error()) // strings, ints and bools only
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Issue issues exactly one receipt for r.RequestID and links it into the tenant's chain:
// it sets Seq, PrevHash and Hash (overriding r's), truncates r's times to milliseconds, and
// returns the issued receipt. When a receipt for the request exists, Issue returns it
// unchanged, so calling it again (after a crash, on a redelivered event, from several
// aggregator instances at once) is harmless.
//
// Issue is lock-free and uses single-item conditional writes only (a store with the Linker
// capability links in one step of its own instead):
//
//	loop {
//		h := Head(tenant)
//		if h.RequestID == r.RequestID { PutReceipt(h.Receipt), ignoring ErrExists; return h.Receipt }
//		if GetReceipt(r.RequestID) succeeds { return it }
//		if h.Seq > 0 { PutReceipt(h.Receipt), ignoring ErrExists }  // help a writer that crashed after SwapHead
//		next := r with Seq h.Seq+1, PrevHash h.Hash, Hash HashReceipt(next)
//		SwapHead(tenant, h.Seq, head of next); on ErrConflict continue
//		PutReceipt(next), ignoring ErrExists; return next
//	}
//
// GetReceipt is read after Head on purpose: the head never moves past a receipt before
// that receipt is stored (the helping step), so a request absent from the receipts after
// the head was read is not in the chain up to that head, and the conditional swap places
// it at most once. Reading GetReceipt first would let the head move past this request's
// receipt in between and link it twice. Issue gives up after a bounded number of lost
// races or when ctx ends (transient errors); a missing request or tenant id is Permanent.
func Issue(ctx context.Context, s Store, r event.Receipt) (event.Receipt, error) {
	return Chain{Store: s}.Issue(ctx, r)
}

// Issue is the package's Issue on c.Store; with c.Key the receipt carries its chain MAC
// and the head it is linked after must pass its own (see Chain).
func (c Chain) Issue(ctx context.Context, r event.Receipt) (event.Receipt, error) {
	s := c.Store
	if r.RequestID == "" || r.TenantID == "" {
		return event.Receipt{}, retry.Permanent(errors.New("auditlog: issue: receipt needs a request id and a tenant id"))
	}
	r.RequestedAt = r.RequestedAt.UTC().Truncate(time.Millisecond)
	r.CompletedAt = r.CompletedAt.UTC().Truncate(time.Millisecond)
	r.DueAt = r.DueAt.UTC().Truncate(time.Millisecond)
	r.IdentifiersShredAt = truncated(r.IdentifiersShredAt)
	r.Stores = append([]event.StoreEvidence(nil), r.Stores...)
	for i := range r.Stores {
		r.Stores[i].PhysicalErasureDue = truncated(r.Stores[i].PhysicalErasureDue)
	}
	r.ChainKeyID, r.ChainMAC = "", ""
	if l, ok := s.(Linker); ok {
		got, err := l.LinkReceipt(ctx, r, c.sealReceipt)
		if !errors.Is(err, errLinkByCAS) {
			return got, err
		}
	}
	for round := range maxIssueRounds {
		if err := ctx.Err(); err != nil {
			return event.Receipt{}, fmt.Errorf("auditlog: issue: %w", err)
		}
		h, cached := c.Heads.get(r.TenantID)
		if !cached || round > 0 {
			c.Heads.drop(r.TenantID)
			var err error
			if h, err = s.Head(ctx, r.TenantID); err != nil {
				return event.Receipt{}, fmt.Errorf("auditlog: issue: read head: %w", err)
			}
			cached = false
		}
		if h.Seq > 0 && h.Addendum == nil && h.RequestID == r.RequestID {
			if err := putReceipt(ctx, s, h.Receipt); err != nil {
				return event.Receipt{}, err
			}
			return h.Receipt, nil
		}
		got, err := s.GetReceipt(ctx, r.RequestID)
		if err == nil {
			return got, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return event.Receipt{}, fmt.Errorf("auditlog: issue: read receipt: %w", err)
		}
		if !cached { // a head this process linked has its record stored
			if err := putHeadRecord(ctx, s, h); err != nil {
				return event.Receipt{}, err
			}
		}
		next := r
		next.Seq, next.PrevHash = h.Seq+1, h.Hash
		next.Hash = HashReceipt(next)
		if err := c.sealReceipt(headMAC(h), &next); err != nil {
			return event.Receipt{}, err
		}
		err = s.SwapHead(ctx, r.TenantID, h.Seq, Head{Seq: next.Seq, Hash: next.Hash, RequestID: next.RequestID, Receipt: next})
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return event.Receipt{}, fmt.Errorf("auditlog: issue: swap head: %w", err)
		}
		if err := putLinkedReceipt(ctx, s, next); err != nil {
			return event.Receipt{}, err
		}
		c.Heads.put(r.TenantID, Head{Seq: next.Seq, Hash: next.Hash, RequestID: next.RequestID, Receipt: next})
		return next, nil
	}
	return event.Receipt{}, fmt.Errorf("auditlog: issue: head of the tenant's chain still contended after %d rounds", maxIssueRounds)
}

// HeadCache holds, by tenant, the head this process linked last and whose record it
// stored: Chain.Issue starts from it instead of reading the head and storing its record,
// and reads the head when the swap finds it moved. A nil HeadCache holds nothing. Safe for
// concurrent use.
type HeadCache struct {
	mu sync.Mutex
	m  map[string]Head
}

func (hc *HeadCache) get(tenant string) (Head, bool) {
	if hc == nil {
		return Head{}, false
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	h, ok := hc.m[tenant]
	return h, ok
}

func (hc *HeadCache) put(tenant string, h Head) {
	if hc == nil {
		return
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.m == nil {
		hc.m = map[string]Head{}
	}
	hc.m[tenant] = h
}

func (hc *HeadCache) drop(tenant string) {
	if hc == nil {
		return
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	delete(hc.m, tenant)
}

// LinkedReceiptWriter is an optional capability of a Store, found by type assertion: it
// stores a receipt the tenant's head names or named (linked by Issue), with writes that need
// no condition, since only that receipt can be linked for its request. Storing it again is
// harmless.
type LinkedReceiptWriter interface {
	PutLinkedReceipt(ctx context.Context, r event.Receipt) error
}

// putLinkedReceipt stores r, linked into its chain: with PutLinkedReceipt where the store
// has it, else PutReceipt.
func putLinkedReceipt(ctx context.Context, s Store, r event.Receipt) error {
	if w, ok := s.(LinkedReceiptWriter); ok {
		if err := w.PutLinkedReceipt(ctx, r); err != nil {
			return fmt.Errorf("auditlog: issue: write receipt: %w", err)
		}
		return nil
	}
	return putReceipt(ctx, s, r)
}

func truncated(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Millisecond)
	return &u
}

// putReceipt writes r unless a receipt for its request exists.
func putReceipt(ctx context.Context, s Store, r event.Receipt) error {
	if err := s.PutReceipt(ctx, r); err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("auditlog: issue: write receipt: %w", err)
	}
	return nil
}

// VerifyChain checks the tenant's chain of receipts and addenda: records ordered by Seq
// are numbered 1..n without gap or duplicate, belong to the tenant, each Hash equals
// HashReceipt (HashAddendum for an addendum), each PrevHash equals the previous record's
// Hash (empty for the first), each addendum follows the receipt it names, and the head is
// the last record. It returns nil for an intact chain (an empty chain with no head
// included), an error wrapping ErrChainBroken that names the first break (seq and request
// id; no personal data), ErrChainPending when only the newest record is still being
// written, or a store error. Addenda are read when the store has the Addenda capability.
// It reads no chain MAC: anyone can run it, and it cannot tell a chain the aggregator
// linked from one a writer of the audit table rebuilt; Chain.Verify with the chain key can.
func VerifyChain(ctx context.Context, s Store, tenant string) error {
	_, err := Chain{Store: s}.Verify(ctx, tenant)
	return err
}

// chainLinks reads the tenant's receipts and addenda, ordered by seq, and its head.
func chainLinks(ctx context.Context, s Store, tenant string) ([]link, Head, error) {
	rs, err := s.Receipts(ctx, tenant)
	if err != nil {
		return nil, Head{}, fmt.Errorf("auditlog: verify chain: %w", err)
	}
	var ads []Addendum
	if as, ok := s.(Addenda); ok {
		if ads, err = as.TenantAddenda(ctx, tenant); err != nil {
			return nil, Head{}, fmt.Errorf("auditlog: verify chain: %w", err)
		}
	}
	links := make([]link, 0, len(rs)+len(ads))
	for i := range rs {
		links = append(links, link{seq: rs[i].Seq, receipt: &rs[i]})
	}
	for i := range ads {
		links = append(links, link{seq: ads[i].Seq, addendum: &ads[i]})
	}
	sort.SliceStable(links, func(i, j int) bool { return links[i].seq < links[j].seq })
	h, err := s.Head(ctx, tenant)
	if err != nil {
		return nil, Head{}, fmt.Errorf("auditlog: verify chain: %w", err)
	}
	return links, h, nil
}

// verifyLinks checks links, ordered by seq, and the head h as VerifyChain says.
func verifyLinks(links []link, h Head, tenant string) error {
	prevHash := ""
	receipts := map[string]string{} // request id → receipt id, of the receipts linked so far
	for i, l := range links {
		want := int64(i + 1)
		switch {
		case i > 0 && l.seq == links[i-1].seq:
			return fmt.Errorf("%w: duplicate seq %d (requests %s and %s)", ErrChainBroken, l.seq, links[i-1].requestID(), l.requestID())
		case l.seq != want:
			return fmt.Errorf("%w: %s of request %s has seq %d, want %d (missing or forged records)", ErrChainBroken, l.what(), l.requestID(), l.seq, want)
		case l.tenant() != tenant:
			return fmt.Errorf("%w: seq %d: %s of request %s belongs to another tenant", ErrChainBroken, l.seq, l.what(), l.requestID())
		case l.hash() != l.computed():
			return fmt.Errorf("%w: seq %d: %s of request %s does not match its hash (tampered)", ErrChainBroken, l.seq, l.what(), l.requestID())
		case l.prevHash() != prevHash:
			return fmt.Errorf("%w: seq %d: %s of request %s does not link to the previous record's hash", ErrChainBroken, l.seq, l.what(), l.requestID())
		case l.addendum != nil && receipts[l.addendum.RequestID] != l.addendum.ReceiptID:
			return fmt.Errorf("%w: seq %d: addendum of request %s names no receipt earlier in the chain", ErrChainBroken, l.seq, l.requestID())
		}
		if l.receipt != nil {
			receipts[l.receipt.RequestID] = l.receipt.ReceiptID
		}
		prevHash = l.hash()
	}
	n := int64(len(links))
	hl := headLink(h)
	switch {
	case h.Seq == n && n == 0:
		return nil
	case h.Seq == n:
		last := links[n-1]
		if h.Hash != last.hash() || hl.requestID() != last.requestID() || (h.Addendum != nil) != (last.addendum != nil) {
			return fmt.Errorf("%w: head at seq %d does not match the %s of request %s", ErrChainBroken, h.Seq, last.what(), last.requestID())
		}
		return nil
	case h.Seq == n+1 && hl.seq == h.Seq && h.Hash == hl.hash() && h.Hash == hl.computed() && hl.prevHash() == prevHash &&
		(h.Addendum != nil || h.Receipt.RequestID == h.RequestID):
		return fmt.Errorf("%w: head at seq %d (request %s) has no stored %s yet", ErrChainPending, h.Seq, hl.requestID(), hl.what())
	default:
		return fmt.Errorf("%w: head at seq %d, but the last record has seq %d", ErrChainBroken, h.Seq, n)
	}
}

// link is one record of a chain: a receipt or an addendum.
type link struct {
	seq      int64
	receipt  *event.Receipt
	addendum *Addendum
}

func headLink(h Head) link {
	if h.Addendum != nil {
		return link{seq: h.Addendum.Seq, addendum: h.Addendum}
	}
	return link{seq: h.Receipt.Seq, receipt: &h.Receipt}
}

func (l link) what() string {
	if l.addendum != nil {
		return "addendum " + l.addendum.Type
	}
	return "receipt"
}

func (l link) requestID() string {
	if l.addendum != nil {
		return l.addendum.RequestID
	}
	return l.receipt.RequestID
}

func (l link) tenant() string {
	if l.addendum != nil {
		return l.addendum.TenantID
	}
	return l.receipt.TenantID
}

func (l link) hash() string {
	if l.addendum != nil {
		return l.addendum.Hash
	}
	return l.receipt.Hash
}

func (l link) prevHash() string {
	if l.addendum != nil {
		return l.addendum.PrevHash
	}
	return l.receipt.PrevHash
}

func (l link) chainMAC() (keyID, mac string) {
	if l.addendum != nil {
		return l.addendum.ChainKeyID, l.addendum.ChainMAC
	}
	return l.receipt.ChainKeyID, l.receipt.ChainMAC
}

func (l link) computed() string {
	if l.addendum != nil {
		return HashAddendum(*l.addendum)
	}
	return HashReceipt(*l.receipt)
}
