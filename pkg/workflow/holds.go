package workflow

import "time"

// Hold is a legal hold: while active, the named store of the tenant (every store when
// Store is empty) is not erased for the held subject (every subject of the tenant when
// SubjectHash is empty). It holds no raw identifier: the subject is its keyed pseudonym.
type Hold struct {
	ID          string    `json:"hold_id"`
	TenantID    string    `json:"tenant_id"`
	SubjectHash string    `json:"subject_hash,omitempty"`
	Store       string    `json:"store,omitempty"`
	Reason      string    `json:"reason"`      // PII patterns masked
	LegalBasis  string    `json:"legal_basis"` // e.g. "GDPR Art. 17(3)(e): litigation"
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
	ReleasedBy  string    `json:"released_by,omitempty"`
	ReleasedAt  time.Time `json:"released_at,omitzero"`
}

// Active reports whether h is not released.
func (h Hold) Active() bool { return h.ReleasedAt.IsZero() }

// Covers reports whether the active hold h exempts store for the subject subjectHash of
// tenant. A subject hold covers TENANT requests of its tenant too (subjectHash is then
// the tenant's own pseudonym): offboarding a tenant must not erase a held subject.
func (h Hold) Covers(tenant, subjectHash, store string, tenantScope bool) bool {
	if !h.Active() || h.TenantID != tenant {
		return false
	}
	if h.Store != "" && h.Store != store {
		return false
	}
	return h.SubjectHash == "" || tenantScope || h.SubjectHash == subjectHash
}
