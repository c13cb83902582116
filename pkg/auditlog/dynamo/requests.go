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
	"github.com/lethe-erasure/lethe/pkg/coalesce"
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

// requestCalls are the request reads and index writes that concurrent callers share
// (coalesce.Calls): GetRequest's, one BatchGetItem call for up to batchGetMax requests,
// and PutRequest's index entries, one BatchWriteItem call for the entries of up to
// batchWriteMax/2 requests. Each call starts after every operation it carries was asked
// for, and each caller returns once the call carrying its operation returned.
type requestCalls struct {
	gets    coalesce.Calls[string, map[string]types.AttributeValue]
	indexes coalesce.Calls[auditlog.Request, struct{}]
}

// initRequestCalls sets up s.reqs.
func (s *Store) initRequestCalls() {
	s.reqs.gets = coalesce.Calls[string, map[string]types.AttributeValue]{Do: s.getRequests, Max: batchGetMax}
	s.reqs.indexes = coalesce.Calls[auditlog.Request, struct{}]{Do: s.putRequestIndexes, Max: batchWriteMax / 2}
}

// getRequest returns the item of the request, nil when it is not stored.
func (s *Store) getRequest(ctx context.Context, requestID string) (map[string]types.AttributeValue, error) {
	return s.reqs.gets.Submit(ctx, requestID)
}

// getRequests reads the items of the requests ids in one strongly consistent BatchGetItem
// call, and returns them in the order of ids, nil where a request is not stored.
func (s *Store) getRequests(ctx context.Context, ids []string) ([]map[string]types.AttributeValue, error) {
	seen := map[string]bool{}
	var keys []map[string]types.AttributeValue
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			keys = append(keys, key(reqPK(id), "REQUEST"))
		}
	}
	got, err := s.batchGet(ctx, "get request", keys)
	if err != nil {
		return nil, err
	}
	byPK := make(map[string]map[string]types.AttributeValue, len(got))
	for _, it := range got {
		if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok {
			byPK[pk.Value] = it
		}
	}
	out := make([]map[string]types.AttributeValue, len(ids))
	for i, id := range ids {
		out[i] = byPK[reqPK(id)]
	}
	return out, nil
}

// putRequestIndex writes r's index entries in the tenant's partition and in the partition
// of all tenants, in a BatchWriteItem call it may share with concurrent callers. Rewriting
// them (a later attempt) is idempotent.
func (s *Store) putRequestIndex(ctx context.Context, r auditlog.Request) error {
	_, err := s.reqs.indexes.Submit(ctx, r)
	return err
}

// putRequestIndexes writes the index entries of rs, each once, in one BatchWriteItem
// call.
func (s *Store) putRequestIndexes(ctx context.Context, rs []auditlog.Request) ([]struct{}, error) {
	seen := map[[2]string]bool{}
	var writes []types.WriteRequest
	for _, r := range rs {
		for _, pk := range []string{requestIndexPK(r.TenantID), allRequestsPK} {
			k := [2]string{pk, requestIndexSK(r)}
			if seen[k] {
				continue
			}
			seen[k] = true
			item := key(k[0], k[1])
			item["request_id"] = str(r.RequestID)
			writes = append(writes, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
	}
	if err := s.batchWrite(ctx, "put request index", writes); err != nil {
		return nil, err
	}
	return make([]struct{}, len(rs)), nil
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
