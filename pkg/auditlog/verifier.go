package auditlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// MinSubstringLen is the shortest identifier (in runes) Verify looks for inside a field;
// shorter ones ("0", "42", "/") are found only as a whole field or a whole segment of one,
// since as substrings they occur by chance in chunk ids, paths and model names.
const MinSubstringLen = 6

// Verifier is the deletion.Store of inventory kind "audit_log". The audit table holds keyed
// pseudonyms only, by design, so there is nothing to erase; what Verify proves is that the
// design held for the subject.
//
// What Verify checks, and what it does not: it loads every event stored under the
// subject's pseudonym (Subject.Hash) in the tenant and counts the events in which any
// field holds one of the subject's raw identifiers (its id or one of its known session
// ids, matched exactly and case-sensitively) or personal data that pii.Contains finds
// (emails, phone numbers, IBANs, card and national id numbers with valid check digits).
// An identifier of at least MinSubstringLen runes counts where it is not part of a longer
// word: an edge of the identifier that is a letter or digit must not touch another letter
// or digit, so "cust-1" is not found in "cust-10" but is in "/customers/cust-1/orders".
// A shorter identifier counts only as a whole field or a whole segment of one (split at
// / ? & = , ; and spaces), so "0" is found in "/orders/0" but not in "chunk-0". The tenant id and subject hash fields are skipped
// when they hold the expected values. Verify does not find events an app wrote under some
// other pseudonym, identifiers it does not know, or identifiers transformed (encoded,
// lower-cased) before they were written. For tenant scope it scans nothing and says so in
// the method: per-subject identifiers are unknown there. An event of the subject that the
// store cannot read or that does not decode is never counted as clean: it is reported
// unexamined (see Verify).
//
// Verifier is safe for concurrent use. Store errors are returned as they are classified by
// the store.
type Verifier struct {
	s Store
}

var _ deletion.Store = (*Verifier)(nil)

// Kind is the inventory kind the Verifier serves.
const Kind = "audit_log"

var _ deletion.Validator = (*Verifier)(nil)

// Validate checks the locators of an audit_log inventory store: it has none, so any field
// is an error naming it. The audit table itself is the service's configuration.
func (v *Verifier) Validate(st inventory.Entry) error {
	var none struct{}
	if err := st.Locators.Decode(&none); err != nil {
		return retry.Permanent(fmt.Errorf("auditlog: store %q: %w", st.Name, err))
	}
	return nil
}

// NewVerifier returns the audit_log deletion.Store over s.
func NewVerifier(s Store) *Verifier { return &Verifier{s: s} }

// PseudonymsOnly marks the audit log as a store of pseudonyms (deletion.PseudonymsOnly).
func (v *Verifier) PseudonymsOnly() {}

// Erase deletes nothing and reports NoPIIByDesign with no locations.
func (v *Verifier) Erase(ctx context.Context, st inventory.Entry, s deletion.Subject) (deletion.Result, error) {
	if err := v.Validate(st); err != nil {
		return deletion.Result{}, err
	}
	return deletion.Result{NoPIIByDesign: true}, ctx.Err()
}

// Verify counts the subject's events that hold a raw identifier or a PII pattern (see
// Verifier). When the store is a RawEventStore, Verify reads the events as stored: every
// string of a field Event does not declare is checked too, and an event that cannot be read
// or decoded is unexamined (named by its position, never by its content), so the store
// cannot verify clean. A subject-scope subject without a hash is a Permanent error.
func (v *Verifier) Verify(ctx context.Context, st inventory.Entry, s deletion.Subject) (event.Verification, error) {
	if s.TenantScope() {
		return event.Verification{Method: "tenant scope: audit events hold keyed pseudonyms only (not scanned)"}, nil
	}
	if s.Hash == "" {
		return event.Verification{}, retry.Permanent(errors.New("auditlog: verify: subject has no pseudonym"))
	}
	ids := make([]string, 0, 1+len(s.Sessions))
	for _, id := range append([]string{s.ID}, s.Sessions...) {
		if id != "" {
			ids = append(ids, id)
		}
	}
	raw, ok := v.s.(RawEventStore)
	if !ok {
		evs, err := v.s.Events(ctx, s.Tenant, s.Hash)
		if err != nil {
			return event.Verification{}, fmt.Errorf("auditlog: verify: %w", err)
		}
		var n int64
		for _, e := range evs {
			if tainted(e, nil, s, ids) {
				n++
			}
		}
		return event.Verification{
			Method:    fmt.Sprintf("audit events scanned for raw identifiers and PII patterns: %d events", len(evs)),
			Remaining: n,
		}, nil
	}
	stored, err := raw.RawEvents(ctx, s.Tenant, s.Hash)
	if err != nil {
		return event.Verification{}, fmt.Errorf("auditlog: verify: %w", err)
	}
	var ver event.Verification
	for i, se := range stored {
		e, extra, err := decodeStored(se)
		if err != nil {
			ver.Unexamined++
			ver.UnexaminedItems = append(ver.UnexaminedItems,
				fmt.Sprintf("audit event %d of %d under the subject's pseudonym: %s", i+1, len(stored), unreadable(err)))
			continue
		}
		if tainted(e, extra, s, ids) {
			ver.Remaining++
		}
	}
	ver.Method = fmt.Sprintf("audit events scanned for raw identifiers and PII patterns: %d events", len(stored)-int(ver.Unexamined))
	if ver.Unexamined > 0 {
		ver.Method += fmt.Sprintf(", %d unreadable", ver.Unexamined)
	}
	return ver, nil
}

// tainted reports whether e, or one of the extra strings stored with it, holds one of ids
// (raw identifiers of s) or a PII pattern, by the rules documented on Verifier.
func tainted(e Event, extra []string, s deletion.Subject, ids []string) bool {
	fields := []string{e.EventID, e.KeyID, e.Type, e.QueryFingerprint, e.Model, e.Path, e.Actor, e.Reason}
	if e.TenantID != s.Tenant {
		fields = append(fields, e.TenantID)
	}
	if e.SubjectHash != s.Hash {
		fields = append(fields, e.SubjectHash)
	}
	fields = append(fields, e.ChunkIDs...)
	fields = append(fields, extra...)
	for _, f := range fields {
		if f == "" {
			continue
		}
		if pii.Contains(f) {
			return true
		}
		for _, id := range ids {
			if holds(f, id) {
				return true
			}
		}
	}
	return false
}

// holds reports whether field f holds id by the rules documented on Verifier.
func holds(f, id string) bool {
	if utf8.RuneCountInString(id) >= MinSubstringLen {
		return containsWord(f, id)
	}
	if f == id {
		return true
	}
	for _, seg := range strings.FieldsFunc(f, func(r rune) bool { return strings.ContainsRune("/?&=,; ", r) }) {
		if seg == id {
			return true
		}
	}
	return false
}

// containsWord reports whether id occurs in s such that an edge of id that is a letter or
// digit does not touch a letter or digit of s.
func containsWord(s, id string) bool {
	first, _ := utf8.DecodeRuneInString(id)
	last, _ := utf8.DecodeLastRuneInString(id)
	needStart, needEnd := isWord(first), isWord(last)
	for off := 0; off <= len(s)-len(id); {
		i := strings.Index(s[off:], id)
		if i < 0 {
			return false
		}
		i += off
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[i+len(id):])
		okStart := !needStart || i == 0 || !isWord(before)
		okEnd := !needEnd || i+len(id) == len(s) || !isWord(after)
		if okStart && okEnd {
			return true
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		off = i + size
	}
	return false
}

func isWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}
