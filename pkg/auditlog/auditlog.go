// Package auditlog is Lethe's audit table: hash-only audit events written by RAG apps, the
// aggregator's durable request state, and deletion receipts linked into a per-tenant hash
// chain.
//
// Nothing in the audit table is a raw identifier: events and receipts carry the subject's
// keyed pseudonym (subject.Key.Pseudonym) and key id only. Writer is the way apps write
// events; Verifier is the deletion.Store that proves, per request, that a subject's events
// hold no raw identifier or PII pattern.
//
// Store is the storage seam. Its implementations (DirStore here, a DynamoDB store in
// auditlog/dynamo) offer single-item conditional writes only, no transactions; Issue builds
// exactly-once, crash-safe receipt issuing on top of them. Every implementation passes the
// conformance suite in auditlogtest.
package auditlog

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// Errors of Store methods. Test them with errors.Is.
var (
	ErrNotFound = errors.New("auditlog: not found")
	ErrExists   = errors.New("auditlog: already exists")
	ErrConflict = errors.New("auditlog: conflict")
)

// Event is one hash-only audit event. It holds no raw identifier.
type Event struct {
	EventID          string    `json:"event_id"` // unique per (tenant, subject hash); appending the same id twice is a no-op
	TenantID         string    `json:"tenant_id"`
	SubjectHash      string    `json:"subject_hash"`
	KeyID            string    `json:"key_id"`
	Type             string    `json:"type"` // e.g. "query", "retrieval", "erasure"
	QueryFingerprint string    `json:"query_fingerprint,omitempty"`
	ChunkIDs         []string  `json:"chunk_ids,omitempty"`
	Model            string    `json:"model,omitempty"`
	Path             string    `json:"path,omitempty"`
	Actor            string    `json:"actor,omitempty"`  // the authenticated principal that caused the event, e.g. of a lifted suppression
	Reason           string    `json:"reason,omitempty"` // why, as given, with PII patterns masked
	At               time.Time `json:"at"`
}

// Event types written by Writer.
const (
	TypeQuery = "query"
)

// Request is the aggregator's record of a request: event.Requested without identifiers.
type Request struct {
	RequestID        string      `json:"request_id"`
	TenantID         string      `json:"tenant_id"`
	SubjectHash      string      `json:"subject_hash"`
	KeyID            string      `json:"key_id"`
	Scope            event.Scope `json:"scope"`
	Regulation       string      `json:"regulation"`
	RequestedAt      time.Time   `json:"requested_at"`
	DueAt            time.Time   `json:"due_at"`
	InventoryVersion string      `json:"inventory_version"`
	ExpectedStores   []string    `json:"expected_stores"`
	Attempt          int         `json:"attempt"`
	SessionHashes    []string    `json:"session_hashes,omitempty"` // pseudonyms of the session ids
	// Sealed are the request's identifiers as erasure.requested carries them, encrypted
	// under its data key: kept so that sweeps and re-applies after the receipt can find the
	// subject again, unreadable once the key is destroyed. Never the clear identifiers.
	Sealed *event.SealedIdentifiers `json:"sealed_identifiers,omitempty"`
	// Exempt are the stores the request left alone under a legal hold; passes after the
	// receipt exempt them again.
	Exempt []event.Exemption `json:"exempt,omitempty"`
}

// RequestOf returns the identifier-free record of r. Identifiers and OnlyStores are
// dropped; the sealed identifiers are kept (ciphertext under the request's data key).
func RequestOf(r *event.Requested) Request {
	return Request{
		RequestID:        r.RequestID,
		TenantID:         r.TenantID,
		SubjectHash:      r.SubjectHash,
		KeyID:            r.KeyID,
		Scope:            r.Scope,
		Regulation:       r.Regulation,
		RequestedAt:      r.RequestedAt,
		DueAt:            r.DueAt,
		InventoryVersion: r.InventoryVersion,
		ExpectedStores:   append([]string(nil), r.ExpectedStores...),
		Attempt:          r.Attempt,
		SessionHashes:    append([]string(nil), r.SessionHashes...),
		Sealed:           r.Sealed,
		Exempt:           append([]event.Exemption(nil), r.Exempt...),
	}
}

// Head is the tip of a tenant's receipt chain: the last record linked into it, a receipt
// (RequestID and Receipt set) or an addendum (Addendum set, RequestID empty). The zero
// Head (Seq 0) means the tenant has no receipt yet.
type Head struct {
	Seq       int64         `json:"seq"`
	Hash      string        `json:"hash"`
	RequestID string        `json:"request_id"`
	Receipt   event.Receipt `json:"receipt"`
	Addendum  *Addendum     `json:"addendum,omitempty"`
}

// Store is the audit table. Implementations are safe for concurrent use, honour ctx, and
// make each conditional write atomic on its own item (no multi-item transactions). Errors
// other than the sentinels above are transient unless marked retry.Permanent (a
// malformed stored item, a request the backend rejects).
type Store interface {
	// AppendEvent stores e. Appending an event id already stored for the same tenant and
	// subject hash is a no-op.
	AppendEvent(ctx context.Context, e Event) error
	// Events returns every event of the subject ordered by At then EventID, paginating
	// internally. None is an empty result, not an error.
	Events(ctx context.Context, tenant, subjectHash string) ([]Event, error)
	// PutRequest inserts r, or replaces the stored request when r.Attempt >= its attempt.
	// An older attempt is silently ignored.
	PutRequest(ctx context.Context, r Request) error
	// GetRequest returns the request or ErrNotFound.
	GetRequest(ctx context.Context, requestID string) (Request, error)
	// ListRequests returns every stored request of the tenant ("" for every tenant), each
	// once in its latest stored attempt, ordered by RequestedAt then RequestID, paginating
	// internally. None is an empty result, not an error.
	ListRequests(ctx context.Context, tenant string) ([]Request, error)
	// PutReport stores d keyed by (d.RequestID, d.Store); it replaces a stored report only
	// when d.Attempt >= the stored attempt (a conditional write). An older attempt is
	// silently ignored.
	PutReport(ctx context.Context, d event.StoreDone) error
	// CreateReport stores d only when no report is stored for (d.RequestID, d.Store), else
	// it fails with ErrExists and leaves the stored report unchanged: one conditional
	// write for a writer that merges with what is stored, which then reads only when
	// something is.
	CreateReport(ctx context.Context, d event.StoreDone) error
	// Reports returns the reports of a request ordered by store name.
	Reports(ctx context.Context, requestID string) ([]event.StoreDone, error)
	// RequestState returns the request with its reports and publication mark, read at
	// once (one query of the request's items in DynamoDB), or ErrNotFound when the
	// request is not stored (its reports may be).
	RequestState(ctx context.Context, requestID string) (RequestState, error)
	// GetReceipt returns the receipt of a request or ErrNotFound.
	GetReceipt(ctx context.Context, requestID string) (event.Receipt, error)
	// PutReceipt creates the receipt of r.RequestID; ErrExists when one exists (the stored
	// receipt is then left unchanged). Use Issue rather than calling it directly.
	PutReceipt(ctx context.Context, r event.Receipt) error
	// Receipts returns the tenant's receipts ordered by Seq.
	Receipts(ctx context.Context, tenant string) ([]event.Receipt, error)
	// Head returns the tip of the tenant's chain, the zero Head when it has none.
	Head(ctx context.Context, tenant string) (Head, error)
	// SwapHead replaces the tenant's head with h if the stored head's Seq is oldSeq (0: no
	// head yet), else it fails with ErrConflict.
	SwapHead(ctx context.Context, tenant string, oldSeq int64, h Head) error
}

// Table is the whole audit table as both implementations, DirStore and the DynamoDB store
// (auditlog/dynamo), provide it. Openers return it; each user declares the part it uses.
type Table interface {
	Store
	Addenda
	Scheduler
	PublishMarker
	SuppressionStore
	RawEventStore
	Rejections
}

// RequestState is what the audit table holds of one request: what the aggregator reads
// after each record it stores to decide whether the receipt can be issued.
type RequestState struct {
	Request Request
	Reports []event.StoreDone // ordered by store name
	// Published is whether the receipt is marked published (PublishMarker); false in a
	// store without marks.
	Published bool
}

// SortEvents orders events by At, then EventID.
func SortEvents(evs []Event) {
	sort.Slice(evs, func(i, j int) bool {
		if !evs[i].At.Equal(evs[j].At) {
			return evs[i].At.Before(evs[j].At)
		}
		return evs[i].EventID < evs[j].EventID
	})
}

// SortRequests orders requests by RequestedAt, then RequestID.
func SortRequests(rs []Request) {
	sort.Slice(rs, func(i, j int) bool {
		if !rs[i].RequestedAt.Equal(rs[j].RequestedAt) {
			return rs[i].RequestedAt.Before(rs[j].RequestedAt)
		}
		return rs[i].RequestID < rs[j].RequestID
	})
}

// SortReceipts orders receipts by Seq, then RequestID.
func SortReceipts(rs []event.Receipt) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Seq != rs[j].Seq {
			return rs[i].Seq < rs[j].Seq
		}
		return rs[i].RequestID < rs[j].RequestID
	})
}

// Awaiter is a Store that tells cheaply whether a request is still waiting for reports,
// without reading them (DirStore answers from memory; a remote store would pay the read it
// saves, so the DynamoDB store does not implement it). The aggregator asks it before it
// reads a request's state to see whether the request completes: of the records one
// erasure brings, all but the last find it waiting.
type Awaiter interface {
	// Awaiting reports whether requestID cannot complete yet: it is not stored, or a store
	// it expects has no report stored under that store's name.
	Awaiting(ctx context.Context, requestID string) (bool, error)
}
