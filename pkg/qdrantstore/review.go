package qdrantstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

var _ deletion.ItemEraser = (*Store)(nil)

// EraseItems deletes the points of items (point ids) that belong to tenant: in a store
// with a tenant field, points whose field holds the tenant; in collections named per
// tenant, points of the tenant's collections. Each id must name at most one point of the
// tenant across the store's collections, whose templates may name the tenant only.
func (st *Store) EraseItems(ctx context.Context, inv inventory.Entry, tenant string, items []string) (deleted, remaining int64, err error) {
	l, err := LocatorsOf(inv)
	if err != nil {
		return 0, 0, err
	}
	if len(items) == 0 {
		return 0, 0, retry.Permanent(errors.New("qdrant: no item to erase"))
	}
	ids := make([]*qdrant.PointId, len(items))
	for i, it := range items {
		if ids[i], err = pointID(it); err != nil {
			return 0, 0, err
		}
	}
	must, err := tenantMust(l, tenant)
	if err != nil {
		return 0, 0, err
	}
	var colls []string
	for _, tmpl := range l.Collections {
		if inventory.Uses(tmpl, inventory.Subject) || inventory.Uses(tmpl, inventory.SubjectHash) || inventory.Uses(tmpl, inventory.Session) {
			return 0, 0, retry.Permanent(fmt.Errorf("qdrant: collection %s is named per subject or session: name items in collections named by tenant only", tmpl))
		}
		colls = append(colls, location(tmpl, tenant))
	}
	// Count each id on its own first: an id in two collections is not one item.
	found := make([]map[string]bool, len(ids))
	for i, id := range ids {
		found[i] = map[string]bool{}
		for _, coll := range colls {
			n, err := st.count(ctx, coll, itemFilter(must, id))
			if err != nil {
				return 0, 0, fmt.Errorf("qdrant: count item in %s: %w", coll, err)
			}
			if n > 0 {
				found[i][coll] = true
			}
		}
		if len(found[i]) > 1 {
			return 0, 0, retry.Permanent(fmt.Errorf("qdrant: item %s is in %d collections of the store: ambiguous, nothing erased", items[i], len(found[i])))
		}
	}
	for i, id := range ids {
		for coll := range found[i] {
			f := itemFilter(must, id)
			if err := st.deletePoints(ctx, coll, f); err != nil {
				return deleted, 0, fmt.Errorf("qdrant: delete item from %s: %w", coll, classify(err))
			}
			deleted++
			n, err := st.count(ctx, coll, f)
			if err != nil {
				return deleted, 0, fmt.Errorf("qdrant: read back item in %s: %w", coll, err)
			}
			remaining += n
		}
	}
	return deleted, remaining, nil
}

// itemFilter matches the point id within the tenant conditions must.
func itemFilter(must []*qdrant.Condition, id *qdrant.PointId) *qdrant.Filter {
	return &qdrant.Filter{Must: append(append([]*qdrant.Condition{}, must...), qdrant.NewHasID(id))}
}

// pointID parses an item as Qdrant names points: an unsigned integer or a UUID.
func pointID(item string) (*qdrant.PointId, error) {
	if n, err := strconv.ParseUint(item, 10, 64); err == nil && strconv.FormatUint(n, 10) == item {
		return qdrant.NewIDNum(n), nil
	}
	if u, err := uuid.Parse(item); err == nil {
		return qdrant.NewIDUUID(u.String()), nil
	}
	return nil, retry.Permanent(fmt.Errorf("qdrant: item %q is not a point id (an unsigned integer or a UUID)", item))
}
