package datasetstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
	"github.com/lethe-erasure/lethe/pkg/pii"
)

// Mention policies: what a subject-scope erasure does with a row that still mentions one of
// the subject's raw identifiers (the subject id or a session id) after the rows of its
// subject and session columns are gone. A mention is looked for in every string of every
// row, whatever its column or nesting depth: CSV and TSV cells, every JSON string (keys
// included) of JSONL lines and JSON array elements, and Parquet byte-array values.
//
// The named subject and session columns are left to the exact match of the row erasure
// (a bystander's id there may contain the subject's). Elsewhere an identifier of at least
// minSubstring bytes is mentioned where it occurs delimited: preceded by the start, white
// space or an opening or separating character ( " ' ( [ { < , ; = ), and followed by the
// end, white space, a closing or separating character ( " ' ) ] } > , ; ) or a final
// punctuation mark ( . : ! ? ) that itself ends the string or precedes white space; so
// "cust-42" is mentioned in "ticket from cust-42." but neither in "cust-421" nor in
// "cust-42:7" nor in "x/cust-42". A shorter identifier only where a whole cell (a whole
// JSON string, a whole Parquet value) equals it, so that "a" never matches "cat".
//
//   - MentionsFail (the default) changes nothing: Verify counts the rows in
//     Verification.Mentions and names each object and its columns, so the store reports
//     FAILED and a re-drive changes nothing silently.
//   - MentionsRedact replaces each mention in place by RedactionToken: the rest of the row
//     and every other row are kept byte for byte (a CSV row whose cell cannot be edited in
//     place is re-encoded, that row only; Parquet rows value for value).
//   - MentionsErase removes the row holding it, as for the subject's own rows.
//
// Under both, an older version of an object that still holds a mention is deleted. The
// rows handled are reported under "<prefix> (mentions redacted)" or "(mentions erased)",
// apart from the subject's rows.
const (
	MentionsFail   = "fail"
	MentionsRedact = "redact"
	MentionsErase  = "erase"
)

// RedactionToken replaces a mention under MentionsRedact.
const RedactionToken = "[erased]"

// minSubstring is the shortest identifier looked for inside a longer string.
const minSubstring = 4

// finder finds the raw identifiers of one subject in strings. A finder with collect set
// finds nothing and passes every string it is asked about to collect (summary.go).
type finder struct {
	ids     []string
	collect func(string)
}

func newFinder(subj deletion.Subject) *finder {
	f := &finder{}
	for _, id := range append([]string{subj.ID}, subj.Sessions...) {
		if id != "" && !slices.Contains(f.ids, id) {
			f.ids = append(f.ids, id)
		}
	}
	// Longest first, so that an identifier containing another is redacted whole.
	sort.SliceStable(f.ids, func(i, j int) bool { return len(f.ids[i]) > len(f.ids[j]) })
	return f
}

// bounded reports whether the n bytes at i in s are delimited (see the policies above).
func bounded(s string, i, n int) bool {
	if i > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) && !strings.ContainsRune(`"'([{<,;=`, r) {
			return false
		}
	}
	if e := i + n; e < len(s) {
		r, size := utf8.DecodeRuneInString(s[e:])
		switch {
		case unicode.IsSpace(r) || strings.ContainsRune(`"')]}>,;`, r):
		case strings.ContainsRune(".:!?", r):
			if e+size < len(s) {
				if next, _ := utf8.DecodeRuneInString(s[e+size:]); !unicode.IsSpace(next) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// in reports whether s mentions one of f's identifiers.
func (f *finder) in(s string) bool { return f.redact(s) != s }

// redact returns s with every mention replaced by RedactionToken.
func (f *finder) redact(s string) string {
	if f.collect != nil {
		f.collect(s)
		return s
	}
	for _, id := range f.ids {
		if len(id) < minSubstring {
			if s == id {
				return RedactionToken
			}
			continue
		}
		var b strings.Builder
		rest, off := s, 0
		for {
			i := strings.Index(rest[off:], id)
			if i < 0 {
				break
			}
			i += off
			if bounded(rest, i, len(id)) {
				b.WriteString(rest[:i])
				b.WriteString(RedactionToken)
				rest, off = rest[i+len(id):], 0
				continue
			}
			off = i + 1
		}
		if b.Len() > 0 {
			b.WriteString(rest)
			s = b.String()
		}
	}
	return s
}

// mentionScan is what scanning one object for mentions found or did.
type mentionScan struct {
	left    int      // rows still holding a mention (when only counting: every such row)
	handled int      // rows redacted or erased
	fields  []string // names of the columns or fields holding a mention, no values
}

func (ms *mentionScan) field(name string) {
	if !slices.Contains(ms.fields, name) && len(ms.fields) < 8 {
		ms.fields = append(ms.fields, name)
	}
}

// scanMentions reads the dataset key from body and, with a nil w, counts its rows that
// mention f's identifiers; with a w, it writes the object to w with policy applied (redact
// or erase). Rows m matches are the subject's own and are left to the row erasure. Content
// that cannot be decoded or passes lim wraps errMalformed, as in rewrite.
func scanMentions(key string, body io.Reader, w io.Writer, m *matcher, f *finder, policy string, lim Limits) (mentionScan, error) {
	var ms mentionScan
	s := &scanner{m: m, f: f, policy: policy, write: w != nil, ms: &ms}
	err := walk(key, body, w, m, s, lim)
	return ms, err
}

// scanner applies a mention policy row by row.
type scanner struct {
	m      *matcher
	f      *finder
	policy string
	write  bool // rewriting (else only counting)
	ms     *mentionScan
}

// decide counts a row that does (found) or does not mention the subject and says what the
// policy does with it: a counted row is left, a handled one dropped or redacted.
func (s *scanner) decide(found bool) action {
	switch {
	case !found:
		return keep
	case !s.write:
		s.ms.left++
		return keep
	}
	s.ms.handled++
	if s.policy == MentionsErase {
		return drop
	}
	return redact
}

// jsonStrings walks every string literal of the JSON value raw (valid JSON) outside the
// matcher's named columns, reporting the field path of each mention to note, and returns
// raw with each mention redacted when redact is set (every other byte kept) and whether a
// mention was found. Arrays are transparent: their elements have the path of the array.
func (s *scanner) jsonStrings(raw []byte, redact bool, note func(string)) ([]byte, bool) {
	type frame struct {
		obj bool
		key string
	}
	var stack []frame
	var out []byte
	if redact {
		out = make([]byte, 0, len(raw))
	}
	found, last := false, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{':
			stack = append(stack, frame{obj: true})
			continue
		case '[':
			stack = append(stack, frame{})
			continue
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		case '"':
		default:
			continue
		}
		j := i + 1
		for j < len(raw) && raw[j] != '"' {
			if raw[j] == '\\' {
				j++
			}
			j++
		}
		lit := raw[i:min(j+1, len(raw))]
		i = j
		var v string
		if json.Unmarshal(lit, &v) != nil {
			continue
		}
		isKey := len(stack) > 0 && stack[len(stack)-1].obj && bytes.HasPrefix(bytes.TrimLeft(raw[j+1:], " \t\r\n"), []byte(":"))
		var where string
		if isKey {
			stack[len(stack)-1].key = v
			where = "a field name"
		} else {
			var keys []string
			for _, f := range stack {
				if f.obj {
					keys = append(keys, f.key)
				}
			}
			where = strings.Join(keys, ".")
			if contains(s.m.subjectCols, where) || contains(s.m.sessionCols, where) {
				continue // matched exactly by the row erasure
			}
			if where == "" || s.f.in(where) {
				where = "a value"
			}
		}
		if !s.f.in(v) {
			continue
		}
		found = true
		note(where)
		if redact {
			enc, _ := marshalString(s.f.redact(v))
			out = append(append(out, raw[last:i-len(lit)+1]...), enc...)
			last = j + 1
		}
	}
	if !redact {
		return raw, found
	}
	return append(out, raw[min(last, len(raw)):]...), found
}

// marshalString encodes v as a JSON string without HTML escaping.
func marshalString(v string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// jsonRow applies the policy to one JSON row raw (valid JSON) outside the matcher's named
// columns; a row that belongs to the subject is left to the row erasure.
func (s *scanner) jsonRow(raw []byte, matched bool) (action, []byte) {
	if matched {
		return keep, nil
	}
	_, found := s.jsonStrings(raw, false, s.ms.field)
	act := s.decide(found)
	if act != redact {
		return act, nil
	}
	out, _ := s.jsonStrings(raw, true, func(string) {})
	if _, still := s.jsonStrings(out, false, func(string) {}); still {
		s.ms.left++
	}
	return redact, out
}

// handleMentions applies policy to the mentions left in l after the row erasure: it
// rewrites every current object holding one and deletes every older version that still
// holds one. It returns the counts to report.
func handleMentions(ctx context.Context, l location, m *matcher, f *finder, policy string) ([]event.LocationCount, error) {
	ls, err := inventoryOf(ctx, l)
	if err != nil {
		return nil, err
	}
	sv := l.index(m, f, false)
	p := objectPass{m: m, mentions: true,
		apply: func(key string, r io.Reader, w io.Writer, m *matcher) (int, error) {
			ms, err := scanMentions(key, r, w, m, f, policy, l.lim)
			return ms.handled, err
		},
		holds: func(v objectstore.Version) (bool, error) {
			ms, err := mentionsInVersion(ctx, ls.vb, v, m, f, sv, l.lim)
			return ms.left > 0, err
		}}
	rows, old, err := p.run(ctx, l, ls, sv)
	if err != nil {
		return nil, err
	}
	what := " (mentions redacted)"
	if policy == MentionsErase {
		what = " (mentions erased)"
	}
	out := []event.LocationCount{{Location: l.name + what, Deleted: rows}}
	if ls.vb != nil {
		out = append(out, event.LocationCount{Location: l.name + oldVersions, Deleted: old})
	}
	return out, nil
}

func mentionsInVersion(ctx context.Context, vb objectstore.Versioned, v objectstore.Version, m *matcher, f *finder, sv summaryIndex, lim Limits) (mentionScan, error) {
	var obj *objectstore.Object
	var err error
	if v.Latest {
		obj, err = vb.Get(ctx, v.Key)
	} else {
		obj, err = vb.GetVersion(ctx, v.Key, v.ID)
	}
	if err != nil {
		return mentionScan{}, err
	}
	defer obj.Body.Close()
	body, done := sv.reader(v.Key, obj)
	ms, err := scanMentions(v.Key, body, nil, m, f, "", lim)
	done(err)
	return ms, err
}

// countMentions counts the rows of every current object and remaining version of l that
// still mention f's identifiers, and names each object (location.display) with the
// columns that hold them. Objects it cannot read are Verify's
// unexamined ones and are skipped here.
func countMentions(ctx context.Context, l location, m *matcher, f *finder) (int64, []string, error) {
	ls, err := inventoryOf(ctx, l)
	if err != nil {
		return 0, nil, err
	}
	var n int64
	var items []string
	sv := l.index(m, f, true)
	for _, key := range ls.keys {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		for _, v := range ls.live(key) {
			if v.DeleteMarker || sv.skip(ctx, key, v, true) {
				continue
			}
			var ms mentionScan
			if ls.vb == nil {
				ms, err = mentionsInVersion(ctx, plainVersions{l.bucket}, v, m, f, sv, l.lim)
			} else {
				ms, err = mentionsInVersion(ctx, ls.vb, v, m, f, sv, l.lim)
			}
			switch {
			case errors.Is(err, errMalformed) || errors.Is(err, objectstore.ErrNotFound):
				continue
			case err != nil:
				return 0, nil, err
			}
			if ms.left == 0 {
				continue
			}
			what := ""
			if !v.Latest {
				what = " (an older version)"
			}
			n += int64(ms.left)
			items = append(items, fmt.Sprintf("%s%s: %d rows mention the subject's identifiers (columns %s)",
				l.display(key), what, ms.left, pii.Mask(strings.Join(ms.fields, ", "))))
		}
		if err := sv.flush(ctx, key, ls.live(key)); err != nil {
			return 0, nil, err
		}
	}
	return n, items, nil
}

// plainVersions reads the current objects of a bucket that keeps no versions.
type plainVersions struct{ objectstore.Bucket }

func (plainVersions) ListVersions(context.Context, string) ([]objectstore.Version, error) {
	return nil, objectstore.ErrNoVersions
}
func (plainVersions) GetVersion(context.Context, string, string) (*objectstore.Object, error) {
	return nil, objectstore.ErrNotFound
}
func (plainVersions) DeleteVersion(context.Context, string, string) error { return nil }

// mentionPolicy is the mention handling of one subject-scope request (nil: tenant scope,
// where every dataset goes).
type mentionPolicy struct {
	policy string
	f      *finder
}

// mentionsOf returns the mention handling st's locators choose for subj.
func mentionsOf(st inventory.Store, subj deletion.Subject) (*mentionPolicy, error) {
	if subj.TenantScope() {
		return nil, nil
	}
	l, err := LocatorsOf(st)
	if err != nil {
		return nil, err
	}
	p := l.Mentions
	if p == "" {
		p = MentionsFail
	}
	return &mentionPolicy{policy: p, f: newFinder(subj)}, nil
}

// erase applies the policy in l after the row erasure (nothing under MentionsFail).
func (p *mentionPolicy) erase(ctx context.Context, l location, m *matcher) ([]event.LocationCount, error) {
	if p == nil || p.policy == MentionsFail || len(p.f.ids) == 0 {
		return nil, nil
	}
	return handleMentions(ctx, l, m, p.f, p.policy)
}

// verify adds the mentions left in l to v.
func (p *mentionPolicy) verify(ctx context.Context, l location, m *matcher, v *event.Verification) error {
	if p == nil || len(p.f.ids) == 0 {
		return nil
	}
	n, items, err := countMentions(ctx, l, m, p.f)
	v.Mentions += n
	v.UnexaminedItems = append(v.UnexaminedItems, items...)
	return err
}
