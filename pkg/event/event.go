// Package event defines Lethe's events and their Avro wire format.
//
// The Avro schemas in the schemas module are the source of truth; the Go types here mirror
// them field for field (avro tags). Records are written in Avro single-object encoding:
// two magic bytes (C3 01), the CRC-64-AVRO (Rabin) fingerprint of the writer schema's
// Parsing Canonical Form as the Avro specification defines it (CanonicalForm,
// Fingerprint; little-endian), then the body. So any standard Avro library that encodes
// schemas/intake.avsc and frames the record the same way is understood. A reader decodes
// any released version of a schema (resolving it to the current one), also when the
// header carries the fingerprint earlier versions of Lethe wrote (see Type), and rejects
// records whose fingerprint it does not know with ErrUnknownSchema.
package event

import (
	"slices"
	"time"
)

// Default topic names.
const (
	TopicIntake     = "erasure.intake"
	TopicRequested  = "erasure.requested"
	TopicStoreDone  = "erasure.store.done"
	TopicCompleted  = "erasure.completed"
	TopicOverdue    = "erasure.overdue"
	TopicReappeared = "erasure.reappeared"
	// TopicSuppressions is compacted: the latest Suppression per tenant and pseudonym.
	TopicSuppressions = "erasure.suppressions"
	// TopicStoreFound carries what a deleter found before it deleted (StoreFound).
	TopicStoreFound = "erasure.store.found"
)

// Purposes of a request on erasure.requested, carried back on its reports. The empty
// purpose is PurposeErase (records written before purposes existed).
const (
	PurposeErase   = "ERASE"   // the erasure itself, up to its receipt
	PurposeSweep   = "SWEEP"   // a re-verification after the receipt
	PurposeReapply = "REAPPLY" // the erasure re-applied after a store was restored
	PurposeReview  = "REVIEW"  // a person's decision on an item the receipt left for review
)

// AfterReceipt reports whether purpose is a pass run after the receipt (a sweep, a
// re-apply or a review), whose reports are addenda rather than evidence for the receipt.
func AfterReceipt(purpose string) bool {
	return purpose == PurposeSweep || purpose == PurposeReapply || purpose == PurposeReview
}

// DLQ returns the dead-letter topic of topic.
func DLQ(topic string) string { return topic + ".dlq" }

// Scope says what a request erases.
type Scope string

// Scopes.
const (
	ScopeSubject Scope = "SUBJECT" // one data subject of a tenant
	ScopeTenant  Scope = "TENANT"  // the whole tenant (offboarding)
)

// Status is one store's outcome.
type Status string

// Store statuses.
const (
	StatusDeleted      Status = "DELETED"          // data was found, erased and verified gone
	StatusNothingFound Status = "NOTHING_FOUND"    // no data found; verified none remains
	StatusNoPII        Status = "NO_PII_BY_DESIGN" // the store holds only pseudonyms, verified
	StatusFailed       Status = "FAILED"           // erasure or verification failed
	StatusExempt       Status = "EXEMPT"           // under a legal hold: nothing erased on purpose
)

// Succeeded reports whether s counts towards a complete receipt. EXEMPT does not: a
// receipt with an exempt store is PARTIAL.
func (s Status) Succeeded() bool { return s != StatusFailed && s != StatusExempt && s != "" }

// IntakeRequest is what an upstream app publishes on erasure.intake. It holds raw identifiers.
type IntakeRequest struct {
	TenantID       string    `avro:"tenant_id" json:"tenant_id"`
	SubjectID      string    `avro:"subject_id" json:"subject_id"`
	SessionIDs     []string  `avro:"session_ids" json:"session_ids"`
	Regulation     string    `avro:"regulation" json:"regulation"`
	Scope          Scope     `avro:"scope" json:"scope"`
	IdempotencyKey string    `avro:"idempotency_key" json:"idempotency_key"`
	Source         string    `avro:"source" json:"source"`
	SubmittedAt    time.Time `avro:"submitted_at" json:"submitted_at"`
}

// Identifiers are the raw identifiers a deleter needs to find a subject's data.
type Identifiers struct {
	SubjectID  string   `avro:"subject_id" json:"-"`
	SessionIDs []string `avro:"session_ids" json:"-"`
}

// SealedIdentifiers are Identifiers encrypted under the request's data key.
type SealedIdentifiers struct {
	KEKID      string `avro:"kek_id"`
	Nonce      []byte `avro:"nonce"`
	Ciphertext []byte `avro:"ciphertext"`
}

// Requested is a validated, stamped request on erasure.requested. Its Identifiers (or,
// when Sealed is set, the identifiers it encrypts) are personal data; every other field is
// safe to log.
type Requested struct {
	RequestID        string             `avro:"request_id" json:"request_id"`
	TenantID         string             `avro:"tenant_id" json:"tenant_id"`
	SubjectHash      string             `avro:"subject_hash" json:"subject_hash"`
	KeyID            string             `avro:"key_id" json:"key_id"`
	Identifiers      Identifiers        `avro:"identifiers" json:"-"`
	Sealed           *SealedIdentifiers `avro:"sealed_identifiers" json:"-"`
	Scope            Scope              `avro:"scope" json:"scope"`
	Regulation       string             `avro:"regulation" json:"regulation"`
	RequestedAt      time.Time          `avro:"requested_at" json:"requested_at"`
	DueAt            time.Time          `avro:"due_at" json:"due_at"`
	InventoryVersion string             `avro:"inventory_version" json:"inventory_version"`
	ExpectedStores   []string           `avro:"expected_stores" json:"expected_stores"`
	OnlyStores       []string           `avro:"only_stores" json:"only_stores,omitempty"`
	Attempt          int                `avro:"attempt" json:"attempt"`
	// SessionHashes are the keyed pseudonyms of the session ids (subject.Key.SessionPseudonym).
	SessionHashes []string `avro:"session_hashes" json:"session_hashes,omitempty"`
	// Purpose is empty (or PurposeErase) for the erasure, PurposeSweep or PurposeReapply for
	// a pass after the receipt; Pass names that pass. Deleters act alike and copy both
	// into their reports.
	Purpose string `avro:"purpose" json:"purpose,omitempty"`
	Pass    string `avro:"pass" json:"pass,omitempty"`
	// DryRun asks every store to count what an erasure would delete and delete nothing.
	DryRun bool `avro:"dry_run" json:"dry_run,omitempty"`
	// Exempt lists the stores under a legal hold: they erase nothing and report EXEMPT.
	Exempt []Exemption `avro:"exempt" json:"exempt,omitempty"`
	// Review is, for PurposeReview, the decision on one item of the receipt's review
	// list: with ReviewErase its store deletes that item alone; with ReviewDismiss no
	// store acts and the decision is recorded.
	Review *ReviewDecision `avro:"review" json:"review,omitempty"`
}

// ReviewDecision is a person's decision on an item of a receipt's review list. Reason is
// free text masked of identity-like values (pii.Mask); it holds no identifier.
type ReviewDecision struct {
	Store    string `avro:"store" json:"store"`
	Kind     string `avro:"kind" json:"kind"`
	Item     string `avro:"item" json:"item"`
	Decision string `avro:"decision" json:"decision"` // ReviewErase or ReviewDismiss
	Reason   string `avro:"reason" json:"reason"`
}

// Review decisions.
const (
	ReviewErase   = "ERASE"   // the item is the subject's: erase it
	ReviewDismiss = "DISMISS" // the item is not the subject's: keep it
)

// Exemption is one store of a request under a legal hold.
type Exemption struct {
	Store      string `avro:"store" json:"store"`
	HoldID     string `avro:"hold_id" json:"hold_id"`
	LegalBasis string `avro:"legal_basis" json:"legal_basis"`
}

// ExemptionOf returns the exemption of store in r, if it is held.
func (r *Requested) ExemptionOf(store string) (Exemption, bool) {
	for _, e := range r.Exempt {
		if e.Store == store {
			return e, true
		}
	}
	return Exemption{}, false
}

// Acts reports whether store must act on r: it is expected and, for a re-drive, selected.
func (r *Requested) Acts(store string) bool {
	if !contains(r.ExpectedStores, store) {
		return false
	}
	return len(r.OnlyStores) == 0 || contains(r.OnlyStores, store)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// LocationCount is how many items were deleted at one location (a locator with the tenant
// filled in, never the subject).
type LocationCount struct {
	Location string `avro:"location" json:"location"`
	Deleted  int64  `avro:"deleted" json:"deleted"`
}

// Verification is the read-back proof of an erasure. Remaining counts the subject's items
// the read-back found; Unexamined counts items under the store's locators that it could not
// read or decode, so whether they hold the subject is unknown. A store is clean only when
// both are zero: what was not examined never counts as zero. Excluded lists items the
// inventory excludes by pattern, examined by no one on purpose.
type Verification struct {
	Method          string   `avro:"method" json:"method"`
	Remaining       int64    `avro:"remaining" json:"remaining"`
	Unexamined      int64    `avro:"unexamined" json:"unexamined"`
	UnexaminedItems []string `avro:"unexamined_items" json:"unexamined_items,omitempty"` // "name: reason", no identifiers
	Excluded        []string `avro:"excluded" json:"excluded,omitempty"`
	// Attestation is, for a store that a processor erases on Lethe's request, the
	// processor's attestation id of its own erasure and read-back.
	Attestation string `avro:"attestation" json:"attestation,omitempty"`
	// Mentions counts raw identifiers of the subject that the read-back still found in
	// content outside the named fields (free text, nested fields) after the store's mention
	// policy was applied; a store holding one is not clean.
	Mentions int64 `avro:"mentions" json:"mentions"`
	// Similar lists ids of items that carry none of the subject's tags but are
	// near-duplicates of the subject's own (vector stores): probable untagged copies.
	Similar []string `avro:"similar" json:"similar,omitempty"`
	// DiscoveryRunAt is when inventory discovery last ran over this store's backend (nil:
	// never), and DiscoveryUncovered how many locations it found outside the inventory.
	DiscoveryRunAt     *time.Time `avro:"discovery_run_at" json:"discovery_run_at,omitempty"`
	DiscoveryUncovered int64      `avro:"discovery_uncovered" json:"discovery_uncovered,omitempty"`
	// OutsideInventory lists the locations outside the inventory, found by discovery over
	// this store's backend, that the erasure probed for the subject.
	OutsideInventory []OutsideLocation `avro:"outside_inventory" json:"outside_inventory,omitempty"`
}

// OutsideLocation is one location outside the inventory probed for the subject: its shape
// (placeholders, never a value), how many items hold the subject's identifiers, why it
// could not be read whole (empty when it was), and the inventory entry (YAML) that would
// cover it.
type OutsideLocation struct {
	Location   string `avro:"location" json:"location"`
	Found      int64  `avro:"found" json:"found"`
	Unexamined string `avro:"unexamined" json:"unexamined,omitempty"`
	Suggest    string `avro:"suggest" json:"suggest,omitempty"`
}

// Clean reports whether v proves the store free of the subject: nothing remains, nothing
// went unexamined and no mention of the subject's identifiers is left. Similar items do not
// make a store unclean: they are probable copies, reported for review.
func (v Verification) Clean() bool { return v.Remaining == 0 && v.Unexamined == 0 && v.Mentions == 0 }

// Outside reports whether a probe found the subject outside the inventory, or could not
// read a location there: the erasure is then not complete.
func (v Verification) Outside() bool {
	for _, o := range v.OutsideInventory {
		if o.Found > 0 || o.Unexamined != "" {
			return true
		}
	}
	return false
}

// StoreDone is one inventory store's outcome for one request. It holds no raw identifier.
type StoreDone struct {
	RequestID    string          `avro:"request_id" json:"request_id"`
	TenantID     string          `avro:"tenant_id" json:"tenant_id"`
	Store        string          `avro:"store" json:"store"`
	Kind         string          `avro:"kind" json:"kind"`
	Status       Status          `avro:"status" json:"status"`
	Locations    []LocationCount `avro:"locations" json:"locations"`
	Verification Verification    `avro:"verification" json:"verification"`
	Physical     string          `avro:"physical" json:"physical,omitempty"`
	Attempt      int             `avro:"attempt" json:"attempt"`
	StartedAt    time.Time       `avro:"started_at" json:"started_at"`
	FinishedAt   time.Time       `avro:"finished_at" json:"finished_at"`
	Error        string          `avro:"error" json:"error,omitempty"`
	Purpose      string          `avro:"purpose" json:"purpose,omitempty"` // the request's Purpose
	Pass         string          `avro:"pass" json:"pass,omitempty"`       // the request's Pass
	// DryRun marks a dry run's count: Locations say what an erasure would delete.
	DryRun bool `avro:"dry_run" json:"dry_run,omitempty"`
	// FoundRuns are the deleter runs (StoreFound.Run) whose finds this report counts on: a
	// report names the find its run recorded before erasing, and no receipt counts the
	// report before that find is merged. A find the aggregator stores lists the runs merged
	// into it.
	FoundRuns []string `avro:"found_runs" json:"found_runs,omitempty"`
}

// Clone returns a copy of d that shares no memory with it.
func (d StoreDone) Clone() StoreDone {
	d.Locations, d.FoundRuns = slices.Clone(d.Locations), slices.Clone(d.FoundRuns)
	v := &d.Verification
	v.UnexaminedItems, v.Excluded, v.Similar = slices.Clone(v.UnexaminedItems), slices.Clone(v.Excluded), slices.Clone(v.Similar)
	v.OutsideInventory = slices.Clone(v.OutsideInventory)
	if v.DiscoveryRunAt != nil {
		t := *v.DiscoveryRunAt
		v.DiscoveryRunAt = &t
	}
	return d
}

// MaxCounts returns a's locations, each with the larger count of a and b, followed by the
// locations only b has. It shares no memory with a or b.
func MaxCounts(a, b []LocationCount) []LocationCount {
	out := append([]LocationCount{}, a...)
	for _, l := range b {
		i := slices.IndexFunc(out, func(o LocationCount) bool { return o.Location == l.Location })
		if i < 0 {
			out = append(out, l)
			continue
		}
		out[i].Deleted = max(out[i].Deleted, l.Deleted)
	}
	return out
}

// Deleted is the sum of the per-location counts.
func (d *StoreDone) Deleted() int64 {
	var n int64
	for _, l := range d.Locations {
		n += l.Deleted
	}
	return n
}

// StoreFound is what a deleter found in one inventory store for one request, published on
// erasure.store.found and acknowledged before the deleter deletes anything. A deleter
// killed between its delete and its report is redelivered the request, finds nothing and
// reports NOTHING_FOUND; the aggregator merges that report with this record (see
// aggregator.Merge), so the receipt counts what the first run deleted. It holds no raw
// identifier.
type StoreFound struct {
	RequestID string          `avro:"request_id" json:"request_id"`
	TenantID  string          `avro:"tenant_id" json:"tenant_id"`
	Store     string          `avro:"store" json:"store"`
	Kind      string          `avro:"kind" json:"kind"`
	Attempt   int             `avro:"attempt" json:"attempt"`
	Locations []LocationCount `avro:"locations" json:"locations"`
	FoundAt   time.Time       `avro:"found_at" json:"found_at"`
	// Run is a random id of the deleter run that recorded the find; its report names it
	// (StoreDone.FoundRuns). A run records its find even when it found nothing, so that a
	// report can always name one.
	Run string `avro:"run" json:"run,omitempty"`
}

// Found sums the per-location counts.
func (f *StoreFound) Found() int64 {
	var n int64
	for _, l := range f.Locations {
		n += l.Deleted
	}
	return n
}

// StoreEvidence is one store's part of a receipt.
type StoreEvidence struct {
	Store        string          `avro:"store" json:"store"`
	Kind         string          `avro:"kind" json:"kind"`
	Status       Status          `avro:"status" json:"status"`
	Deleted      int64           `avro:"deleted" json:"deleted"`
	Locations    []LocationCount `avro:"locations" json:"locations"`
	Verification Verification    `avro:"verification" json:"verification"`
	Physical     string          `avro:"physical" json:"physical,omitempty"`
	// PhysicalErasureDue is when the bytes a logical delete leaves behind (segments, AOF,
	// object versions, backups) are expected gone; nil when the inventory does not say.
	PhysicalErasureDue *time.Time `avro:"physical_erasure_due" json:"physical_erasure_due,omitempty"`
}

// Receipt status values: ReceiptComplete when every store reported success.
const (
	ReceiptComplete = "COMPLETE"
	// ReceiptPartial: every store verified clean except stores under a legal hold, which
	// the receipt lists EXEMPT with the hold's basis.
	ReceiptPartial = "PARTIAL"
)

// Receipt is the deletion receipt: non-PII evidence that every expected store verified the
// subject gone. Seq, PrevHash and Hash chain it to the tenant's previous receipt.
type Receipt struct {
	ReceiptID        string          `avro:"receipt_id" json:"receipt_id"`
	RequestID        string          `avro:"request_id" json:"request_id"`
	TenantID         string          `avro:"tenant_id" json:"tenant_id"`
	SubjectHash      string          `avro:"subject_hash" json:"subject_hash"`
	KeyID            string          `avro:"key_id" json:"key_id"`
	Scope            Scope           `avro:"scope" json:"scope"`
	Regulation       string          `avro:"regulation" json:"regulation"`
	RequestedAt      time.Time       `avro:"requested_at" json:"requested_at"`
	CompletedAt      time.Time       `avro:"completed_at" json:"completed_at"`
	DueAt            time.Time       `avro:"due_at" json:"due_at"`
	ElapsedMS        int64           `avro:"elapsed_ms" json:"elapsed_ms"`
	InventoryVersion string          `avro:"inventory_version" json:"inventory_version"`
	Stores           []StoreEvidence `avro:"stores" json:"stores"`
	AuditLogPII      bool            `avro:"audit_log_pii" json:"audit_log_pii"`
	Status           string          `avro:"status" json:"status"`
	Seq              int64           `avro:"seq" json:"seq"`
	PrevHash         string          `avro:"prev_hash" json:"prev_hash"`
	Hash             string          `avro:"hash" json:"hash"`
	// IdentifiersShredAt is when the request's data key, and with it every sealed copy of
	// its identifiers, will be destroyed; nil when it was destroyed at the receipt.
	IdentifiersShredAt *time.Time `avro:"identifiers_shred_at" json:"identifiers_shred_at,omitempty"`
	// ChainKeyID and ChainMAC are the id of the chain key and the keyed MAC of Hash under
	// it (auditlog.ChainMAC), so that a holder of the key can tell a chain the aggregator
	// linked from one rebuilt by a writer of the audit table. Empty when the receipt was
	// linked without a chain key. Neither enters Hash.
	ChainKeyID string `avro:"chain_key_id" json:"chain_key_id,omitempty"`
	ChainMAC   string `avro:"chain_mac" json:"chain_mac,omitempty"`
	// Review lists the items the erasure left for a person to decide on: probable untagged
	// copies of the subject's data (a store's verification.similar), one entry each.
	Review []ReviewItem `avro:"review" json:"review,omitempty"`
}

// ReviewItem is an item of a store left for review: Kind "similar", a probable untagged
// copy of the subject's data, named by its id in the store (never a value).
type ReviewItem struct {
	Store string `avro:"store" json:"store"`
	Kind  string `avro:"kind" json:"kind"`
	Item  string `avro:"item" json:"item"`
}

// ReviewSimilar is the Kind of a ReviewItem that is a probable untagged copy.
const ReviewSimilar = "similar"

// Reappeared says a sweep or a re-apply found an erased subject's data again in one store
// and erased it again. It holds counts only, no identifier.
type Reappeared struct {
	RequestID string          `avro:"request_id" json:"request_id"`
	TenantID  string          `avro:"tenant_id" json:"tenant_id"`
	Store     string          `avro:"store" json:"store"`
	Kind      string          `avro:"kind" json:"kind"`
	Purpose   string          `avro:"purpose" json:"purpose"`
	Pass      string          `avro:"pass" json:"pass"`
	Deleted   int64           `avro:"deleted" json:"deleted"`
	Locations []LocationCount `avro:"locations" json:"locations"`
	Remaining int64           `avro:"remaining" json:"remaining"`
	At        time.Time       `avro:"at" json:"at"`
}

// SLA windows of Overdue.
const (
	WindowLegal  = "legal"  // requested_at to due_at: the regulation's limit
	WindowTarget = "target" // requested_at to requested_at + the internal target
)

// Overdue says an open request crossed Threshold percent of its window.
type Overdue struct {
	RequestID     string    `avro:"request_id" json:"request_id"`
	TenantID      string    `avro:"tenant_id" json:"tenant_id"`
	SubjectHash   string    `avro:"subject_hash" json:"subject_hash"`
	Regulation    string    `avro:"regulation" json:"regulation"`
	RequestedAt   time.Time `avro:"requested_at" json:"requested_at"`
	DueAt         time.Time `avro:"due_at" json:"due_at"`
	Threshold     int       `avro:"threshold" json:"threshold"`
	Window        string    `avro:"window" json:"window"` // WindowLegal or WindowTarget
	PendingStores []string  `avro:"pending_stores" json:"pending_stores"`
	At            time.Time `avro:"at" json:"at"`
}
