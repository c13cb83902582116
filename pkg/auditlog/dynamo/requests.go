package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// batchGetMax is BatchGetItem's limit of keys per call, batchWriteMax BatchWriteItem's of
// writes.
const (
	batchGetMax   = 100
	batchWriteMax = 25
)

// allRequestsPK is the partition of the index entries of every tenant's requests. It
// cannot collide with a tenant's partition, which always has a '#' after REQIDX.
const allRequestsPK = "REQIDX"

// indexTime is the index entries' time format: RFC 3339 in UTC with a fixed nine-digit
// fraction, so entries sort by time as strings (RFC3339Nano drops trailing zeros and
// would not).
const indexTime = "2006-01-02T15:04:05.000000000Z"

func requestIndexPK(tenant string) string { return allRequestsPK + "#" + esc(tenant) }

func requestIndexSK(r auditlog.Request) string {
	return r.RequestedAt.UTC().Format(indexTime) + "#" + esc(r.RequestID)
}

// putRequestIndex writes r's index entries in the tenant's partition and in the partition
// of all tenants, in one BatchWriteItem call. Rewriting them (a later attempt) is
// idempotent.
func (s *Store) putRequestIndex(ctx context.Context, r auditlog.Request) error {
	var writes []types.WriteRequest
	for _, pk := range []string{requestIndexPK(r.TenantID), allRequestsPK} {
		item := key(pk, requestIndexSK(r))
		item["request_id"] = str(r.RequestID)
		writes = append(writes, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
	}
	return s.batchWrite(ctx, "put request index", writes)
}

// ListRequests returns the tenant's requests ("" for every tenant) ordered by RequestedAt
// then RequestID: it queries the index entries (following pages), then reads the requests
// they name in batches (strongly consistent). Entries whose request is missing (a crash
// between the entry and the request) or belongs to another tenant are skipped; a request
// named by several entries is returned once.
func (s *Store) ListRequests(ctx context.Context, tenant string) ([]auditlog.Request, error) {
	pk := allRequestsPK
	if tenant != "" {
		pk = requestIndexPK(tenant)
	}
	items, err := s.query(ctx, "list requests", pk, "")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var keys []map[string]types.AttributeValue
	for _, it := range items {
		id, ok := it["request_id"].(*types.AttributeValueMemberS)
		if !ok {
			return nil, retry.Permanent(errors.New("auditlog/dynamo: malformed request index entry"))
		}
		if !seen[id.Value] {
			seen[id.Value] = true
			keys = append(keys, key(reqPK(id.Value), "REQUEST"))
		}
	}
	got, err := s.batchGet(ctx, "list requests", keys)
	if err != nil {
		return nil, err
	}
	rs := make([]auditlog.Request, 0, len(got))
	for _, it := range got {
		var r auditlog.Request
		if err := decode(it, &r); err != nil {
			return nil, err
		}
		if tenant == "" || r.TenantID == tenant {
			rs = append(rs, r)
		}
	}
	auditlog.SortRequests(rs)
	return rs, nil
}

// batchGet reads the items of keys (no duplicates) batchGetMax at a time, strongly
// consistent, retrying unprocessed keys with backoff. Missing items are left out; the
// order of the result is unspecified.
func (s *Store) batchGet(ctx context.Context, op string, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for start := 0; start < len(keys); start += batchGetMax {
		chunk := keys[start:min(start+batchGetMax, len(keys))]
		req := map[string]types.KeysAndAttributes{s.table: {Keys: chunk, ConsistentRead: aws.Bool(true)}}
		for rounds := 0; len(req) > 0; rounds++ {
			if rounds == 20 {
				return nil, fmt.Errorf("auditlog/dynamo: %s: unprocessed keys after 20 rounds", op)
			}
			if rounds > 0 { // throttled: back off before retrying what was left
				select {
				case <-ctx.Done():
					return nil, fmt.Errorf("auditlog/dynamo: %s: %w", op, ctx.Err())
				case <-time.After(min(time.Duration(1<<rounds)*10*time.Millisecond, time.Second)):
				}
			}
			out, err := s.c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, classify(op, err)
			}
			items = append(items, out.Responses[s.table]...)
			req = out.UnprocessedKeys
		}
	}
	return items, nil
}

// batchWrite applies writes (puts and deletes without conditions, no key twice)
// batchWriteMax at a time, retrying unprocessed ones with backoff, and returns once every
// one was applied.
func (s *Store) batchWrite(ctx context.Context, op string, writes []types.WriteRequest) error {
	for start := 0; start < len(writes); start += batchWriteMax {
		req := map[string][]types.WriteRequest{s.table: writes[start:min(start+batchWriteMax, len(writes))]}
		for rounds := 0; len(req) > 0; rounds++ {
			if rounds == 20 {
				return fmt.Errorf("auditlog/dynamo: %s: unprocessed writes after 20 rounds", op)
			}
			if rounds > 0 { // throttled: back off before retrying what was left
				select {
				case <-ctx.Done():
					return fmt.Errorf("auditlog/dynamo: %s: %w", op, ctx.Err())
				case <-time.After(min(time.Duration(1<<rounds)*10*time.Millisecond, time.Second)):
				}
			}
			out, err := s.c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: req})
			if err != nil {
				return classify(op, err)
			}
			req = out.UnprocessedItems
		}
	}
	return nil
}
