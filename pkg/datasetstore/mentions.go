package datasetstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/datasetstore/rows"
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
// (a bystander's id there may contain the subject's). Elsewhere (rows.Finder) an
// identifier of at least 4 bytes is mentioned where it occurs delimited: preceded by the
// start, white space or an opening or separating character ( " ' ( [ { < , ; = ), and
// followed by the end, white space, a closing or separating character ( " ' ) ] } > , ; )
// or a final punctuation mark ( . : ! ? ) that itself ends the string or precedes white
// space; so "cust-42" is mentioned in "ticket from cust-42." but neither in "cust-421" nor
// in "cust-42:7" nor in "x/cust-42". A shorter identifier only where a whole cell (a whole
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
const RedactionToken = rows.RedactionToken

// handleMentions applies policy to the mentions left in l after the row erasure: it
// rewrites every current object holding one and deletes every older version that still
// holds one. It returns the counts to report.
func handleMentions(ctx context.Context, l location, m *matcher, f *rows.Finder, policy string) ([]event.LocationCount, error) {
	ls, err := inventoryOf(ctx, l)
	if err != nil {
		return nil, err
	}
	sv := l.index(m, f, false)
	p := objectPass{m: m, mentions: true,
		apply: func(key string, r io.Reader, w io.Writer, m *matcher) (int, error) {
			ms, err := scanMentions(key, r, w, m, f, policy, l.lim)
			return ms.Handled, err
		},
		holds: func(v objectstore.Version) (bool, error) {
			ms, err := mentionsInVersion(ctx, ls.Versioned, v, m, f, sv, l.lim)
			return ms.Left > 0, err
		}}
	handled, old, err := p.run(ctx, l, ls, sv)
	if err != nil {
		return nil, err
	}
	what := " (mentions redacted)"
	if policy == MentionsErase {
		what = " (mentions erased)"
	}
	out := []event.LocationCount{{Location: l.name + what, Deleted: handled}}
	if ls.Versioned != nil {
		out = append(out, event.LocationCount{Location: l.name + oldVersions, Deleted: old})
	}
	return out, nil
}

func mentionsInVersion(ctx context.Context, vb objectstore.Versioned, v objectstore.Version, m *matcher, f *rows.Finder, sv summaryIndex, lim Limits) (rows.MentionScan, error) {
	var obj *objectstore.Object
	var err error
	if v.Latest {
		obj, err = vb.Get(ctx, v.Key)
	} else {
		obj, err = vb.GetVersion(ctx, v.Key, v.ID)
	}
	if err != nil {
		return rows.MentionScan{}, err
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
func countMentions(ctx context.Context, l location, m *matcher, f *rows.Finder) (int64, []string, error) {
	ls, err := inventoryOf(ctx, l)
	if err != nil {
		return 0, nil, err
	}
	var n int64
	var items []string
	sv := l.index(m, f, true)
	for _, key := range ls.Keys {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		for _, v := range ls.Live(key) {
			if v.DeleteMarker || sv.skip(ctx, key, v, true) {
				continue
			}
			var ms rows.MentionScan
			if ls.Versioned == nil {
				ms, err = mentionsInVersion(ctx, plainVersions{l.bucket}, v, m, f, sv, l.lim)
			} else {
				ms, err = mentionsInVersion(ctx, ls.Versioned, v, m, f, sv, l.lim)
			}
			switch {
			case errors.Is(err, rows.ErrMalformed) || errors.Is(err, objectstore.ErrNotFound):
				continue
			case err != nil:
				return 0, nil, err
			}
			if ms.Left == 0 {
				continue
			}
			what := ""
			if !v.Latest {
				what = " (an older version)"
			}
			n += int64(ms.Left)
			items = append(items, fmt.Sprintf("%s%s: %d rows mention the subject's identifiers (columns %s)",
				l.display(key), what, ms.Left, pii.Mask(strings.Join(ms.Fields, ", "))))
		}
		if err := sv.flush(ctx, key, ls.Live(key)); err != nil {
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
	f      *rows.Finder
}

// mentionsOf returns the mention handling st's locators choose for subj.
func mentionsOf(st inventory.Entry, subj deletion.Subject) (*mentionPolicy, error) {
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
	if p == nil || p.policy == MentionsFail || len(p.f.IDs) == 0 {
		return nil, nil
	}
	return handleMentions(ctx, l, m, p.f, p.policy)
}

// verify adds the mentions left in l to v.
func (p *mentionPolicy) verify(ctx context.Context, l location, m *matcher, v *event.Verification) error {
	if p == nil || len(p.f.IDs) == 0 {
		return nil
	}
	n, items, err := countMentions(ctx, l, m, p.f)
	v.Mentions += n
	v.UnexaminedItems = append(v.UnexaminedItems, items...)
	return err
}
