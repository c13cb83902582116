package qdrantstore

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// subjectFilter is the one filter that finds s: should = subject fields match the id,
// hash fields match the pseudonym, session fields match any of the sessions; with a
// tenant field, must = the tenant field matches the tenant (tenantMust). Each
// identifier is matched in every form the payload may hold it in: as a keyword; as an
// integer too when it is a decimal integer in canonical form ("424242", "-7"; not "007"
// or "+7", which name another string than the number does); and in its lower- and
// upper-case hyphenated spellings too when it is a UUID (a uuid payload index matches
// every spelling anyway). Empty identifiers are left out; with none left there is no safe
// filter (an empty one matches every point), which is a permanent error.
func subjectFilter(l Locators, s deletion.Subject) (*qdrant.Filter, error) {
	return filterOf(l, s.Tenant, []deletion.Subject{s})
}

// filterOf is the filter that finds any of ss, subjects of tenant: subjectFilter's
// conditions with the identifiers of every subject matched at once (one match-any per
// field and form, however many subjects), so a batch's delete costs Qdrant a few
// conditions, not a few per subject. Subjects of another tenant are refused: one filter
// requires one tenant.
func filterOf(l Locators, tenant string, ss []deletion.Subject) (*qdrant.Filter, error) {
	must, err := tenantMust(l, tenant)
	if err != nil {
		return nil, err
	}
	var ids, hashes, sessions []string
	for _, s := range ss {
		if s.Tenant != tenant {
			return nil, retry.Permanent(errors.New("qdrant: subjects of several tenants in one filter"))
		}
		if s.ID != "" {
			ids = append(ids, s.ID)
		}
		if s.Hash != "" {
			hashes = append(hashes, s.Hash)
		}
		for _, ses := range s.Sessions {
			if ses != "" {
				sessions = append(sessions, ses)
			}
		}
	}
	var should []*qdrant.Condition
	for _, by := range []struct {
		fields, values []string
	}{{l.SubjectFields, ids}, {l.HashFields, hashes}, {l.SessionFields, sessions}} {
		if len(by.values) == 0 {
			continue
		}
		for _, f := range by.fields {
			should = append(should, matchAny(f, by.values)...)
		}
	}
	if len(should) == 0 {
		return nil, retry.Permanent(errors.New("qdrant: the subject has no identifier that the inventory's payload fields can match"))
	}
	f := &qdrant.Filter{Must: must, Should: should}
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	return f, nil
}

// tenantMust is the must clause of every filter of a store with a tenant field: the field
// equals the tenant, in every form an identifier matches in (matchAny). It is nil for a
// store without a tenant field, whose collections are per tenant. An empty tenant has no
// safe filter and is a permanent error.
func tenantMust(l Locators, tenant string) ([]*qdrant.Condition, error) {
	if l.TenantField == "" {
		return nil, nil
	}
	if tenant == "" {
		return nil, retry.Permanent(errors.New("qdrant: the request has no tenant for the tenant field to match"))
	}
	conds := matchAny(l.TenantField, []string{tenant})
	if len(conds) == 1 {
		return conds, nil
	}
	return []*qdrant.Condition{qdrant.NewFilterAsCondition(&qdrant.Filter{Should: conds})}, nil
}

// tenantFilter is the filter of a tenant-scope request: every point of tenant for a store
// with a tenant field, nil (every point of the tenant's own collections) without one.
func tenantFilter(l Locators, tenant string) (*qdrant.Filter, error) {
	must, err := tenantMust(l, tenant)
	if err != nil || must == nil {
		return nil, err
	}
	f := &qdrant.Filter{Must: must}
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	return f, nil
}

// matchAny returns the conditions matching field against any of ids (none empty) in
// every form: keywords, their UUID spellings, and integers.
func matchAny(field string, ids []string) []*qdrant.Condition {
	var words []string
	var ints []int64
	seen := map[string]bool{}
	add := func(w string) {
		if !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	for _, id := range ids {
		add(id)
		if u, ok := uuidForms(id); ok {
			add(u)
			add(strings.ToUpper(u))
		}
		if n, ok := decimal(id); ok {
			ints = append(ints, n)
		}
	}
	var out []*qdrant.Condition
	if len(words) == 1 {
		out = append(out, qdrant.NewMatchKeyword(field, words[0]))
	} else {
		out = append(out, qdrant.NewMatchKeywords(field, words...))
	}
	switch len(ints) {
	case 0:
	case 1:
		out = append(out, qdrant.NewMatchInt(field, ints[0]))
	default:
		out = append(out, qdrant.NewMatchInts(field, ints...))
	}
	return out
}

// decimal parses s as an int64 written in canonical decimal form, the form an integer
// payload value prints as.
func decimal(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

// uuidForms returns s as a lower-case hyphenated UUID when s is a UUID in the
// hyphenated, simple, braced or urn:uuid: spelling.
func uuidForms(s string) (string, bool) {
	t := strings.ToLower(s)
	t = strings.TrimPrefix(t, "urn:uuid:")
	if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
		t = t[1 : len(t)-1]
	}
	if len(t) == 36 && t[8] == '-' && t[13] == '-' && t[18] == '-' && t[23] == '-' {
		t = t[:8] + t[9:13] + t[14:18] + t[19:23] + t[24:]
	}
	if len(t) != 32 {
		return "", false
	}
	if _, err := hex.DecodeString(t); err != nil {
		return "", false
	}
	return t[:8] + "-" + t[8:12] + "-" + t[12:16] + "-" + t[16:20] + "-" + t[20:], true
}

// errMatchAll refuses a filter that could match points that are not the subject's.
var errMatchAll = errors.New("qdrant: refusing an erasure filter that could match every point")

// checkFilter refuses, as a permanent error, any filter Qdrant could read as matching
// every point: Qdrant silently drops a Condition with nothing set, so a should made only
// of those is no condition at all, and an empty nested Filter passes every point
// (lib/api/src/grpc/conversions.rs, conditions_helper_from_grpc). So f and every filter
// inside it must have a should or must clause, every condition must be set, and every
// field condition must be a match of a non-empty value on a non-empty key. It runs
// before any erasure request is sent.
func checkFilter(f *qdrant.Filter) error {
	if err := checkClauses(f); err != nil {
		return retry.Permanent(fmt.Errorf("%w: %w", errMatchAll, err))
	}
	return nil
}

func checkClauses(f *qdrant.Filter) error {
	if f == nil {
		return errors.New("no filter")
	}
	if len(f.GetShould()) == 0 && len(f.GetMust()) == 0 {
		return errors.New("a filter without should or must")
	}
	if f.GetMinShould() != nil {
		return errors.New("min_should is not used by erasure filters")
	}
	for _, cs := range [][]*qdrant.Condition{f.GetShould(), f.GetMust(), f.GetMustNot()} {
		for _, c := range cs {
			if err := checkCondition(c); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkCondition(c *qdrant.Condition) error {
	switch v := c.GetConditionOneOf().(type) {
	case nil:
		return errors.New("an empty condition")
	case *qdrant.Condition_Filter:
		return checkClauses(v.Filter)
	case *qdrant.Condition_Nested:
		if v.Nested.GetKey() == "" {
			return errors.New("a nested condition without a key")
		}
		return checkClauses(v.Nested.GetFilter())
	case *qdrant.Condition_Field:
		fc := v.Field
		if fc.GetKey() == "" {
			return errors.New("a field condition without a key")
		}
		switch m := fc.GetMatch().GetMatchValue().(type) {
		case *qdrant.Match_Keyword:
			if m.Keyword == "" {
				return errors.New("a match of the empty string")
			}
		case *qdrant.Match_Keywords:
			if len(m.Keywords.GetStrings()) == 0 || containsEmpty(m.Keywords.GetStrings()) {
				return errors.New("a match of no or empty strings")
			}
		case *qdrant.Match_Integer:
		case *qdrant.Match_Integers:
			if len(m.Integers.GetIntegers()) == 0 {
				return errors.New("a match of no integers")
			}
		default:
			return errors.New("a field condition that is not a keyword or integer match")
		}
		return nil
	}
	return errors.New("a condition erasure filters do not use")
}

func containsEmpty(ss []string) bool {
	for _, s := range ss {
		if s == "" {
			return true
		}
	}
	return false
}
