package qdrantstore

import (
	"context"
	"fmt"

	"github.com/qdrant/go-client/qdrant"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore/qdrantkey"
)

// sampleSize is how many points EnsureIndexes reads to choose an index type.
const sampleSize = 256

// KeptIndex is a subject, hash or session field that EnsureIndexes found already indexed
// with a type other than keyword and left as it is.
type KeptIndex struct {
	Collection, Field string
	Type              qdrant.PayloadSchemaType
}

// EnsureIndexes creates a payload index on every subject, hash, session and tenant field
// of st in each of tenant's collections that has none, so that erasure filters read indexes
// instead of scanning (and pass Qdrant's strict mode). It never replaces an index that
// exists, whatever its type: Qdrant would drop and rebuild it, changing the customer's
// own searches. A field indexed with another type than keyword is kept, logged at warn
// level and returned; erasure still finds every match there (an integer index serves the
// integer match, and Qdrant checks the payload for a match an index cannot serve). A new
// index is an integer index when the field holds integers and no strings in a sample of
// the collection's points, else keyword. Calling it again is cheap and harmless. A
// collection that does not exist yet is skipped; templates naming a subject or session are
// skipped too, since they cannot be enumerated per tenant. Errors are classified like
// Erase's.
func (st *Store) EnsureIndexes(ctx context.Context, inv inventory.Entry, tenant string) error {
	_, err := st.EnsureIndexesReport(ctx, inv, tenant)
	return err
}

// EnsureIndexesReport is EnsureIndexes, returning the indexes it kept.
func (st *Store) EnsureIndexesReport(ctx context.Context, inv inventory.Entry, tenant string) ([]KeptIndex, error) {
	l, err := LocatorsOf(inv)
	if err != nil {
		return nil, err
	}
	fields := append(append(append([]string{}, l.SubjectFields...), l.HashFields...), l.SessionFields...)
	if l.TenantField != "" {
		fields = append(fields, l.TenantField)
	}
	var kept []KeptIndex
	for _, tmpl := range l.Collections {
		if inventory.Uses(tmpl, inventory.Subject) || inventory.Uses(tmpl, inventory.SubjectHash) || inventory.Uses(tmpl, inventory.Session) {
			continue
		}
		coll := location(tmpl, tenant)
		var info *qdrant.CollectionInfo
		err := st.retry(ctx, func() (err error) {
			info, err = st.client.GetCollectionInfo(ctx, coll)
			return err
		})
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return kept, fmt.Errorf("qdrant: collection info %s: %w", coll, classify(err))
		}
		var sample []*qdrant.RetrievedPoint
		for _, f := range fields {
			schema, ok := info.GetPayloadSchema()[f]
			if ok {
				if t := schema.GetDataType(); t != qdrant.PayloadSchemaType_Keyword {
					kept = append(kept, KeptIndex{Collection: coll, Field: f, Type: t})
					st.log().Warn("payload field already indexed with another type than keyword: kept",
						zap.String("collection", coll), zap.String("field", f), zap.String("type", t.String()))
				}
				continue
			}
			if sample == nil {
				if sample, err = st.sample(ctx, coll); err != nil {
					return kept, fmt.Errorf("qdrant: sample %s: %w", coll, classify(err))
				}
			}
			ft := qdrant.FieldType_FieldTypeKeyword
			if integerField(sample, f) {
				ft = qdrant.FieldType_FieldTypeInteger
			}
			err := st.retry(ctx, func() error {
				r, err := st.client.CreateFieldIndex(ctx, &qdrant.CreateFieldIndexCollection{
					CollectionName: coll,
					FieldName:      f,
					FieldType:      ft.Enum(),
					Wait:           qdrant.PtrOf(true),
				})
				if err != nil {
					return err
				}
				return completed(r)
			})
			if err != nil {
				return kept, fmt.Errorf("qdrant: index %s.%s: %w", coll, f, classify(err))
			}
		}
	}
	return kept, nil
}

// sample reads up to sampleSize points of coll with their payloads (never an empty
// slice, so that it is read once).
func (st *Store) sample(ctx context.Context, coll string) ([]*qdrant.RetrievedPoint, error) {
	var pts []*qdrant.RetrievedPoint
	err := st.retry(ctx, func() (err error) {
		pts, err = st.client.Scroll(ctx, &qdrant.ScrollPoints{
			CollectionName: coll,
			Limit:          qdrant.PtrOf(uint32(sampleSize)),
			WithPayload:    qdrant.NewWithPayload(true),
		})
		return err
	})
	if pts == nil {
		pts = []*qdrant.RetrievedPoint{}
	}
	return pts, err
}

// integerField reports whether field holds at least one integer and no string in pts.
func integerField(pts []*qdrant.RetrievedPoint, field string) bool {
	items, err := qdrantkey.Parse(field)
	if err != nil {
		return false
	}
	ints := 0
	for _, p := range pts {
		for _, v := range valuesAt(p.GetPayload(), items) {
			vals := []*qdrant.Value{v}
			if l := v.GetListValue(); l != nil {
				vals = l.GetValues()
			}
			for _, x := range vals {
				switch x.GetKind().(type) {
				case *qdrant.Value_StringValue:
					return false
				case *qdrant.Value_IntegerValue:
					ints++
				}
			}
		}
	}
	return ints > 0
}

// valuesAt returns the values at a parsed payload path: keys descend into objects, "[]"
// into every element of an array, "[n]" into one.
func valuesAt(payload map[string]*qdrant.Value, items []qdrantkey.Item) []*qdrant.Value {
	cur := []*qdrant.Value{qdrant.NewValueStruct(&qdrant.Struct{Fields: payload})}
	for _, it := range items {
		var next []*qdrant.Value
		for _, v := range cur {
			switch {
			case it.IsKey:
				if x, ok := v.GetStructValue().GetFields()[it.Key]; ok {
					next = append(next, x)
				}
			case it.Index < 0:
				next = append(next, v.GetListValue().GetValues()...)
			case it.Index < len(v.GetListValue().GetValues()):
				next = append(next, v.GetListValue().GetValues()[it.Index])
			}
		}
		cur = next
	}
	return cur
}

func (st *Store) log() *zap.Logger {
	if st.Log == nil {
		return zap.NewNop()
	}
	return st.Log
}
