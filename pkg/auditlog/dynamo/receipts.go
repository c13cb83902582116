package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// PutReceipt creates the receipt of r.RequestID, or fails with auditlog.ErrExists. Without
// transactions it takes up to three single-item calls: a consistent read (ErrExists at
// once when the receipt exists), the tenant's index entry, then the receipt with
// attribute_not_exists. A crash between the last two leaves an index entry that Receipts
// skips until the receipt is written; an entry that disagrees with the stored receipt
// (a lost race to create it) is skipped as well.
func (s *Store) PutReceipt(ctx context.Context, r event.Receipt) error {
	if r.RequestID == "" || r.TenantID == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: receipt needs a request id and a tenant id"))
	}
	var existing event.Receipt
	switch err := s.get(ctx, "put receipt", reqPK(r.RequestID), "RECEIPT", &existing); {
	case err == nil:
		return auditlog.ErrExists
	case !errors.Is(err, auditlog.ErrNotFound):
		return err
	}
	idx := key(tenPK(r.TenantID), indexSK(r.Seq, r.RequestID))
	idx["request_id"], idx["seq"] = str(r.RequestID), num(r.Seq)
	if err := s.put(ctx, "put receipt index", idx, "", nil); err != nil {
		return err
	}
	item, err := record(reqPK(r.RequestID), "RECEIPT", r)
	if err != nil {
		return err
	}
	item["seq"] = num(r.Seq)
	err = s.put(ctx, "put receipt", item, "attribute_not_exists(pk)", nil)
	if isConditionFailed(err) {
		return auditlog.ErrExists
	}
	return err
}

// indexEntry reads the id (attribute idAttr) and seq of a chain index entry.
func indexEntry(it map[string]types.AttributeValue, idAttr, what string) (string, int64, error) {
	id, ok := it[idAttr].(*types.AttributeValueMemberS)
	n, ok2 := it["seq"].(*types.AttributeValueMemberN)
	if !ok || !ok2 {
		return "", 0, retry.Permanent(fmt.Errorf("auditlog/dynamo: malformed %s index entry", what))
	}
	seq, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return "", 0, retry.Permanent(fmt.Errorf("auditlog/dynamo: malformed %s index entry: %w", what, err))
	}
	return id.Value, seq, nil
}

func indexSK(seq int64, requestID string) string {
	return fmt.Sprintf("RCPT#%020d#%s", seq, esc(requestID))
}

// Receipts returns the tenant's receipts ordered by Seq: it queries the tenant's index
// entries, then reads the receipts they name in batches (strongly consistent) and keeps
// those whose tenant and seq agree with the entry.
func (s *Store) Receipts(ctx context.Context, tenant string) ([]event.Receipt, error) {
	items, err := s.query(ctx, "receipts", tenPK(tenant), "RCPT#")
	if err != nil {
		return nil, err
	}
	seqs := map[string]map[int64]bool{} // request id -> seqs its index entries claim
	var ids []string
	for _, it := range items {
		id, seq, err := indexEntry(it, "request_id", "receipt")
		if err != nil {
			return nil, err
		}
		if seqs[id] == nil {
			seqs[id] = map[int64]bool{}
			ids = append(ids, id)
		}
		seqs[id][seq] = true
	}
	got, err := s.batchGetReceipts(ctx, ids)
	if err != nil {
		return nil, err
	}
	var rs []event.Receipt
	for _, r := range got {
		if r.TenantID == tenant && seqs[r.RequestID][r.Seq] {
			rs = append(rs, r)
		}
	}
	auditlog.SortReceipts(rs)
	return rs, nil
}

var _ auditlog.ReceiptsReader = (*Store)(nil)

// ReceiptsOf reads the receipts of ids (auditlog.ReceiptsReader).
func (s *Store) ReceiptsOf(ctx context.Context, ids []string) ([]event.Receipt, error) {
	return s.batchGetReceipts(ctx, ids)
}

// batchGetReceipts reads the receipts of ids (no duplicates). Missing receipts are left out.
func (s *Store) batchGetReceipts(ctx context.Context, ids []string) ([]event.Receipt, error) {
	keys := make([]map[string]types.AttributeValue, len(ids))
	for i, id := range ids {
		keys[i] = key(reqPK(id), "RECEIPT")
	}
	items, err := s.batchGet(ctx, "receipts", keys)
	if err != nil {
		return nil, err
	}
	rs := make([]event.Receipt, 0, len(items))
	for _, it := range items {
		var r event.Receipt
		if err := decode(it, &r); err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}
