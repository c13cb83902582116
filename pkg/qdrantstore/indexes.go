package qdrantstore

import (
	"context"
	"fmt"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// EnsureIndexes creates a keyword payload index on every subject, hash and session field
// of st in each of tenant's collections, so that erasure filters read indexes instead of
// scanning (and pass Qdrant's strict mode). Fields already indexed as keyword are left
// alone, so calling it again is cheap and harmless. A collection that does not exist yet
// is skipped; templates naming a subject or session are skipped too, since they cannot be
// enumerated per tenant. Errors are classified like Erase's.
func (st *Store) EnsureIndexes(ctx context.Context, inv inventory.Store, tenant string) error {
	fields := append(append(append([]string{}, inv.Locators.SubjectFields...), inv.Locators.HashFields...), inv.Locators.SessionFields...)
	for _, tmpl := range inv.Locators.Collections {
		if inventory.Uses(tmpl, inventory.Subject) || inventory.Uses(tmpl, inventory.SubjectHash) || inventory.Uses(tmpl, inventory.Session) {
			continue
		}
		coll := location(tmpl, tenant)
		info, err := st.client.GetCollectionInfo(ctx, coll)
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return fmt.Errorf("qdrant: collection info %s: %w", coll, classify(err))
		}
		for _, f := range fields {
			if info.GetPayloadSchema()[f].GetDataType() == qdrant.PayloadSchemaType_Keyword {
				continue
			}
			_, err := st.client.CreateFieldIndex(ctx, &qdrant.CreateFieldIndexCollection{
				CollectionName: coll,
				FieldName:      f,
				FieldType:      qdrant.FieldType_FieldTypeKeyword.Enum(),
				Wait:           qdrant.PtrOf(true),
			})
			if err != nil {
				return fmt.Errorf("qdrant: index %s.%s: %w", coll, f, classify(err))
			}
		}
	}
	return nil
}
