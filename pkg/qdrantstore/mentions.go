package qdrantstore

import (
	"context"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
)

// Residual mentions. After the erasure, the points whose TextFields still hold one of the
// subject's raw identifiers (its id, its session ids) are found with a scroll filtered by
// `match text` on those fields, paged to exhaustion. Qdrant answers `match text` on a
// field without a full-text index as a substring match, and through a full-text index by
// tokens (every token of the identifier present); Lethe never creates or changes an
// index, and confirms every candidate itself: a mention is an occurrence of the
// identifier, case-sensitive, not touching a letter or digit on either side (so "cust-4"
// is not found inside "cust-42"). The policy decides what a mention does:
//
//   - fail (default): Verify counts the mentioning points in Verification.Mentions, so the
//     store is not clean;
//   - erase: Erase deletes those points (the location "<collection> (mentions)");
//   - redact: Erase rewrites that one payload field of each such point with every
//     occurrence replaced by the redaction token (set_payload on the field's key only;
//     the rest of the payload is kept).
//
// Verify then counts what is left, which is 0 after erase or redact unless points were
// written meanwhile. An identifier without a letter or digit has no token for match text
// to find, so Verify reports it unexamined and the store is not clean.

// identifiers are s's raw identifiers that a mention can hold, longest first, so that
// redacting a session id that contains the subject id replaces the whole session id.
func identifiers(s deletion.Subject) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range append([]string{s.ID}, s.Sessions...) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unsearchable lists, as Verification.UnexaminedItems, one entry per identifier of s that
// the mention search cannot find: one without a letter or digit has no token, and Qdrant's
// match text finds nothing for it through a text index, or from 1.20 without one. The
// entries name no identifier. It is empty for a store without text fields.
func unsearchable(l Locators, s deletion.Subject) []string {
	if len(l.TextFields) == 0 {
		return nil
	}
	var out []string
	for _, id := range identifiers(s) {
		if strings.IndexFunc(id, wordRune) < 0 {
			out = append(out, "mentions: an identifier without a letter or digit, which match text cannot find")
		}
	}
	return out
}

// mentioned is a point holding mentions, with the payload of its text fields.
type mentioned struct {
	id      *qdrant.PointId
	payload map[string]*qdrant.Value
}

// mentioning returns the points of tenant in coll whose text fields mention one of ids.
func (st *Store) mentioning(ctx context.Context, l Locators, coll, tenant string, ids []string) ([]mentioned, error) {
	if len(l.TextFields) == 0 || len(ids) == 0 {
		return nil, nil
	}
	must, err := tenantMust(l, tenant)
	if err != nil {
		return nil, err
	}
	var should []*qdrant.Condition
	for _, f := range l.TextFields {
		for _, id := range ids {
			should = append(should, qdrant.NewMatchText(f, id))
		}
	}
	top := map[string]bool{}
	var include []string
	for _, f := range l.TextFields {
		k, _, _ := strings.Cut(f, ".")
		if !top[k] {
			top[k] = true
			include = append(include, k)
		}
	}
	var out []mentioned
	err = st.scrollAll(ctx, &qdrant.ScrollPoints{
		CollectionName: coll, Filter: &qdrant.Filter{Must: must, Should: should}, WithPayload: qdrant.NewWithPayloadInclude(include...),
	}, func(p *qdrant.RetrievedPoint) {
		if mentionsIn(p.GetPayload(), l.TextFields, ids) {
			out = append(out, mentioned{id: p.GetId(), payload: p.GetPayload()})
		}
	})
	return out, err
}

// mentionsIn reports whether a text field of payload mentions one of ids.
func mentionsIn(payload map[string]*qdrant.Value, fields, ids []string) bool {
	for _, f := range fields {
		for _, s := range stringsAt(payload, f) {
			for _, id := range ids {
				if len(occurrences(s, id)) > 0 {
					return true
				}
			}
		}
	}
	return false
}

// valueAt is the value at the dotted key path of payload, or nil.
func valueAt(payload map[string]*qdrant.Value, path string) *qdrant.Value {
	keys := strings.Split(path, ".")
	m := payload
	for i, k := range keys {
		v := m[k]
		if v == nil {
			return nil
		}
		if i == len(keys)-1 {
			return v
		}
		m = v.GetStructValue().GetFields()
	}
	return nil
}

// stringsAt are the strings at path: the value itself or the string elements of a list.
func stringsAt(payload map[string]*qdrant.Value, path string) []string {
	v := valueAt(payload, path)
	if s, ok := v.GetKind().(*qdrant.Value_StringValue); ok {
		return []string{s.StringValue}
	}
	var out []string
	for _, e := range v.GetListValue().GetValues() {
		if s, ok := e.GetKind().(*qdrant.Value_StringValue); ok {
			out = append(out, s.StringValue)
		}
	}
	return out
}

// occurrences are the byte offsets of id in s where it touches no letter or digit.
func occurrences(s, id string) []int {
	var out []int
	for i := 0; i+len(id) <= len(s); {
		j := strings.Index(s[i:], id)
		if j < 0 {
			break
		}
		at := i + j
		before, _ := utf8.DecodeLastRuneInString(s[:at])
		after, _ := utf8.DecodeRuneInString(s[at+len(id):])
		if !wordRune(before) && !wordRune(after) {
			out = append(out, at)
		}
		i = at + 1
	}
	return out
}

func wordRune(r rune) bool {
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// redactString replaces every occurrence of ids in s by token.
func redactString(s string, ids []string, token string) string {
	for _, id := range ids {
		occ := occurrences(s, id)
		for k := len(occ) - 1; k >= 0; k-- {
			s = s[:occ[k]] + token + s[occ[k]+len(id):]
		}
	}
	return s
}

// redactValue returns v with every mention of ids replaced, and whether it changed.
func redactValue(v *qdrant.Value, ids []string, token string) (*qdrant.Value, bool) {
	switch k := v.GetKind().(type) {
	case *qdrant.Value_StringValue:
		r := redactString(k.StringValue, ids, token)
		return qdrant.NewValueString(r), r != k.StringValue
	case *qdrant.Value_ListValue:
		changed := false
		out := make([]*qdrant.Value, len(k.ListValue.GetValues()))
		for i, e := range k.ListValue.GetValues() {
			r, c := redactValue(e, ids, token)
			out[i], changed = r, changed || c
		}
		return qdrant.NewValueFromList(out...), changed
	}
	return v, false
}

// handleMentions applies l's erase or redact policy to the mentions of s left in coll,
// and returns how many points it deleted.
func (st *Store) handleMentions(ctx context.Context, l Locators, coll string, s deletion.Subject) (int64, error) {
	policy := l.mentions()
	if policy == MentionsFail {
		return 0, nil
	}
	ids := identifiers(s)
	pts, err := st.mentioning(ctx, l, coll, s.Tenant, ids)
	if err != nil || len(pts) == 0 {
		return 0, err
	}
	if policy == MentionsErase {
		del := map[string]*qdrant.PointId{}
		for _, p := range pts {
			del[idString(p.id)] = p.id
		}
		return int64(len(del)), st.deleteIDs(ctx, coll, del)
	}
	token := l.redaction()
	for _, p := range pts {
		for _, f := range l.TextFields {
			v := valueAt(p.payload, f)
			if v == nil {
				continue
			}
			r, changed := redactValue(v, ids, token)
			if !changed {
				continue
			}
			if err := st.setField(ctx, coll, p.id, f, r); err != nil {
				return 0, err
			}
		}
	}
	return 0, nil
}

// setField sets the payload field path (a dotted key) of point id to v, keeping every
// other key: set_payload with key = the parent object's path.
func (st *Store) setField(ctx context.Context, coll string, id *qdrant.PointId, path string, v *qdrant.Value) error {
	req := &qdrant.SetPayloadPoints{CollectionName: coll, Wait: qdrant.PtrOf(true), PointsSelector: qdrant.NewPointsSelector(id)}
	leaf := path
	if i := strings.LastIndex(path, "."); i >= 0 {
		req.Key = qdrant.PtrOf(path[:i])
		leaf = path[i+1:]
	}
	req.Payload = map[string]*qdrant.Value{leaf: v}
	err := st.retry(ctx, func() error {
		r, err := st.client.SetPayload(ctx, req)
		if err != nil {
			return err
		}
		return completed(r)
	})
	return classify(err)
}
