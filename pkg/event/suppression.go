package event

import "time"

// Kinds of suppressed pseudonyms.
const (
	SuppressSubject = "SUBJECT" // a subject id's pseudonym (subject.Key.Pseudonym)
	SuppressSession = "SESSION" // a session id's pseudonym (subject.Key.SessionPseudonym)
	SuppressTenant  = "TENANT"  // the tenant's own pseudonym: the whole tenant was erased
)

// Suppression states.
const (
	Suppressed = "SUPPRESSED" // ingestion must not write the pseudonym's data again
	Lifted     = "LIFTED"     // a consent event lifted the suppression
)

// Suppression is one entry of a tenant's suppression list, as stored in the audit table
// and published on erasure.suppressions (compacted, keyed by SuppressionKey). It holds
// pseudonyms only. A lifted suppression is published as an updated record (State
// Lifted), never as a tombstone, so the list keeps the fact that the pseudonym was erased
// and by whose consent it was lifted.
type Suppression struct {
	TenantID     string     `avro:"tenant_id" json:"tenant_id"`
	Pseudonym    string     `avro:"pseudonym" json:"pseudonym"`
	KeyID        string     `avro:"key_id" json:"key_id"`
	Kind         string     `avro:"kind" json:"kind"`
	State        string     `avro:"state" json:"state"`
	RequestID    string     `avro:"request_id" json:"request_id"`
	ReceiptID    string     `avro:"receipt_id" json:"receipt_id"`
	SuppressedAt time.Time  `avro:"suppressed_at" json:"suppressed_at"`
	LiftedAt     *time.Time `avro:"lifted_at" json:"lifted_at,omitempty"`
	LiftEventID  string     `avro:"lift_event_id" json:"lift_event_id,omitempty"`
	LiftedBy     string     `avro:"lifted_by" json:"lifted_by,omitempty"`
	Version      int64      `avro:"version" json:"version"`
}

// Active reports whether s suppresses its pseudonym.
func (s Suppression) Active() bool { return s.State == Suppressed }

// SuppressionKey is the record key of a suppression on erasure.suppressions:
// tenant + "/" + pseudonym. Tenant ids hold no "/", so keys of two tenants never collide.
func SuppressionKey(tenant, pseudonym string) []byte { return []byte(tenant + "/" + pseudonym) }
