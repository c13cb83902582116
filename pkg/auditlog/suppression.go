package auditlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// TypeSuppressionLifted is the audit event type that records a lifted suppression: the
// entry's pseudonym as its subject hash, the authenticated principal as Actor, the reason
// given (PII patterns masked) as Reason. It holds no raw identifier.
const TypeSuppressionLifted = "suppression_lifted"

// SuppressionStore is the tenant-scoped suppression list (part of Table): one entry per
// (tenant, pseudonym), each an event.Suppression whose Version counts its changes. Only
// pseudonyms are stored. Suppress and Lift build the list's rules on it. Reading an entry
// costs one item read, whatever the number of entries or erasures.
type SuppressionStore interface {
	// GetSuppression returns the entry of pseudonym in tenant, or ErrNotFound.
	GetSuppression(ctx context.Context, tenant, pseudonym string) (event.Suppression, error)
	// SwapSuppression stores s as the entry of (s.TenantID, s.Pseudonym) if the stored
	// entry's Version is oldVersion (0: no entry yet), else it fails with ErrConflict. A
	// conditional write on the one item; s.Version must be oldVersion+1.
	SwapSuppression(ctx context.Context, oldVersion int64, s event.Suppression) error
}

// maxSwapRounds bounds the retries of Suppress and Lift; each lost round means another
// writer changed the entry.
const maxSwapRounds = 64

// SuppressionsOf returns the entries a receipt adds to its tenant's list: the subject's
// pseudonym (for a TENANT scope request, the tenant's own) and the pseudonym of every
// session of the request, all SUPPRESSED at the receipt's completion time.
func SuppressionsOf(req Request, r event.Receipt) []event.Suppression {
	entry := func(pseudonym, kind string) event.Suppression {
		return event.Suppression{
			TenantID: r.TenantID, Pseudonym: pseudonym, KeyID: r.KeyID, Kind: kind, State: event.Suppressed,
			RequestID: r.RequestID, ReceiptID: r.ReceiptID, SuppressedAt: r.CompletedAt.UTC().Truncate(time.Millisecond),
		}
	}
	kind := event.SuppressSubject
	if r.Scope == event.ScopeTenant {
		kind = event.SuppressTenant
	}
	out := []event.Suppression{entry(r.SubjectHash, kind)}
	seen := map[string]bool{r.SubjectHash: true}
	for _, h := range req.SessionHashes {
		if h != "" && !seen[h] {
			seen[h] = true
			out = append(out, entry(h, event.SuppressSession))
		}
	}
	return out
}

// Suppress adds s (State SUPPRESSED) to its tenant's list and returns the entry as stored
// afterwards, with changed true when this call wrote it. It is idempotent: an entry that
// is already suppressed is kept as it is (the first erasure that suppressed it stays
// named). A lifted entry is suppressed again only by a request made after the lift
// (requestedAt after LiftedAt): the consent that lifted it is newer than every earlier
// request, the same request handled again included.
func Suppress(ctx context.Context, st SuppressionStore, s event.Suppression, requestedAt time.Time) (event.Suppression, bool, error) {
	if s.TenantID == "" || s.Pseudonym == "" || s.RequestID == "" {
		return event.Suppression{}, false, retry.Permanent(errors.New("auditlog: suppression needs a tenant id, a pseudonym and a request id"))
	}
	s.State, s.LiftedAt, s.LiftEventID, s.LiftedBy = event.Suppressed, nil, "", ""
	// Most pseudonyms have no entry yet: one conditional create, and a read only when
	// there is one.
	first := s
	first.Version = 1
	switch err := st.SwapSuppression(ctx, 0, first); {
	case err == nil:
		return first, true, nil
	case !errors.Is(err, ErrConflict):
		return event.Suppression{}, false, fmt.Errorf("auditlog: suppress: %w", err)
	}
	for range maxSwapRounds {
		cur, err := st.GetSuppression(ctx, s.TenantID, s.Pseudonym)
		switch {
		case errors.Is(err, ErrNotFound):
			cur = event.Suppression{}
		case err != nil:
			return event.Suppression{}, false, fmt.Errorf("auditlog: suppress: %w", err)
		case cur.Active():
			return cur, false, nil
		case cur.LiftedAt != nil && !requestedAt.After(*cur.LiftedAt):
			return cur, false, nil
		}
		next := s
		next.Version = cur.Version + 1
		err = st.SwapSuppression(ctx, cur.Version, next)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return event.Suppression{}, false, fmt.Errorf("auditlog: suppress: %w", err)
		}
		return next, true, nil
	}
	return event.Suppression{}, false, fmt.Errorf("auditlog: suppress: %w after %d rounds", ErrConflict, maxSwapRounds)
}

// Lift marks the entry of pseudonym in tenant LIFTED at time at, by the principal by,
// recorded by the audit event eventID (which the caller appends first, so that no lift
// exists without its event). It returns the entry as stored afterwards, with changed true
// when this call lifted it; an entry that is not suppressed is returned unchanged, and a
// pseudonym without an entry is ErrNotFound.
func Lift(ctx context.Context, st SuppressionStore, tenant, pseudonym, by, eventID string, at time.Time) (event.Suppression, bool, error) {
	at = at.UTC().Truncate(time.Millisecond)
	for range maxSwapRounds {
		cur, err := st.GetSuppression(ctx, tenant, pseudonym)
		if err != nil {
			return event.Suppression{}, false, fmt.Errorf("auditlog: lift suppression: %w", err)
		}
		if !cur.Active() {
			return cur, false, nil
		}
		next := cur
		next.State, next.LiftedAt, next.LiftedBy, next.LiftEventID, next.Version = event.Lifted, &at, by, eventID, cur.Version+1
		err = st.SwapSuppression(ctx, cur.Version, next)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return event.Suppression{}, false, fmt.Errorf("auditlog: lift suppression: %w", err)
		}
		return next, true, nil
	}
	return event.Suppression{}, false, fmt.Errorf("auditlog: lift suppression: %w after %d rounds", ErrConflict, maxSwapRounds)
}

// storedSuppression is a DirStore entry.
type storedSuppression struct {
	version int64
	json    []byte
}

var _ SuppressionStore = (*DirStore)(nil)

// GetSuppression returns the entry of pseudonym in tenant, or ErrNotFound, from memory.
func (s *DirStore) GetSuppression(ctx context.Context, tenant, pseudonym string) (event.Suppression, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ss, ok := s.suppressions[[2]string{tenant, pseudonym}]
	if !ok {
		return event.Suppression{}, fmt.Errorf("auditlog: get suppression: %w", ErrNotFound)
	}
	var sup event.Suppression
	return sup, wrap("get suppression", decode(ss.json, &sup))
}

// SwapSuppression stores sup if the stored entry's version is oldVersion, else ErrConflict.
func (s *DirStore) SwapSuppression(ctx context.Context, oldVersion int64, sup event.Suppression) error {
	if sup.TenantID == "" || sup.Pseudonym == "" || sup.Version != oldVersion+1 {
		return retry.Permanent(errors.New("auditlog: suppression needs a tenant id, a pseudonym and the next version"))
	}
	err := s.write(ctx, item{op: opSuppression, a: sup.TenantID, b: sup.Pseudonym}, func() ([]byte, error) {
		if s.suppressions[[2]string{sup.TenantID, sup.Pseudonym}].version != oldVersion {
			return nil, ErrConflict
		}
		return record(opSuppression, "", sup)
	})
	return wrap("swap suppression", err)
}

// applySuppression applies a suppression record; s.mu is held or the store is not shared.
func (s *DirStore) applySuppression(js []byte) error {
	var sup event.Suppression
	if err := decode(js, &sup); err != nil {
		return err
	}
	s.suppressions[[2]string{sup.TenantID, sup.Pseudonym}] = storedSuppression{version: sup.Version, json: js}
	return nil
}
