package dynamo

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// supPK is the partition of a suppression entry: SUP#<tenant>#<pseudonym>, one item per
// entry, so a check reads one item per identifier.
func supPK(tenant, pseudonym string) string { return "SUP#" + esc(tenant) + "#" + esc(pseudonym) }

// GetSuppression returns the entry of pseudonym in tenant (a consistent read), or
// auditlog.ErrNotFound.
func (s *Store) GetSuppression(ctx context.Context, tenant, pseudonym string) (event.Suppression, error) {
	var sup event.Suppression
	err := s.get(ctx, "get suppression", supPK(tenant, pseudonym), "SUPPRESSION", &sup)
	return sup, err
}

// SwapSuppression writes sup with the condition that the stored version is oldVersion
// (attribute_not_exists for 0), else auditlog.ErrConflict.
func (s *Store) SwapSuppression(ctx context.Context, oldVersion int64, sup event.Suppression) error {
	if sup.TenantID == "" || sup.Pseudonym == "" || sup.Version != oldVersion+1 {
		return retry.Permanent(errors.New("auditlog/dynamo: suppression needs a tenant id, a pseudonym and the next version"))
	}
	item, err := record(supPK(sup.TenantID, sup.Pseudonym), "SUPPRESSION", sup)
	if err != nil {
		return err
	}
	item["version"] = num(sup.Version)
	cond, vals := "attribute_not_exists(pk)", map[string]types.AttributeValue(nil)
	if oldVersion != 0 {
		cond, vals = "version = :v", map[string]types.AttributeValue{":v": num(oldVersion)}
	}
	err = s.put(ctx, "swap suppression", item, cond, vals)
	if isConditionFailed(err) {
		return auditlog.ErrConflict
	}
	return err
}
