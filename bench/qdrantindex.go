package bench

import (
	"context"
	"fmt"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// dropPayloadIndexes removes the keyword indexes of coll, leaving it as the seeds' pipeline
// had it: no payload index, so every filter scans.
func dropPayloadIndexes(ctx context.Context, q *qdrant.Client, inv *inventory.Inventory, coll string) error {
	l := qdrantLocators(inv)
	for _, f := range append(append(append([]string{}, l.SubjectFields...), l.HashFields...), l.SessionFields...) {
		if _, err := q.DeleteFieldIndex(ctx, &qdrant.DeleteFieldIndexCollection{CollectionName: coll, FieldName: f, Wait: qdrant.PtrOf(true)}); err != nil {
			return fmt.Errorf("drop payload index: %w", err)
		}
	}
	return nil
}
