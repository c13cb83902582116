// Package dynamo is the DynamoDB implementation of workflow.Store, for intake processes
// that share one workflow (several replicas).
//
// It keeps its items in the audit table (auditlog/dynamo's table: string keys pk and sk),
// in two partitions of its own, one item per record or hold, the JSON in "data":
//
//	pk         sk              holds
//	WF#REC     <request id>    a gated request's record (version)
//	WF#HOLD    <hold id>       a legal hold
//
// Ids are escaped with url.PathEscape. Create writes with attribute_not_exists(pk), Swap
// with version = the record's Version, PutHold without a condition: single-item writes
// only, so replicas never overwrite each other's changes. Every read is strongly
// consistent; List and Holds query their partition, following pages, and sort in memory.
// Concurrent Holds calls share a query, started after each of them was made.
//
// Errors: a failed condition becomes workflow.ErrExists, ErrConflict or ErrNotFound.
// Malformed requests and undecodable items are retry.Permanent; throttling, 5xx, network
// errors and a missing table are transient (pkg/dynamoerr).
package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/coalesce"
	"github.com/lethe-erasure/lethe/pkg/dynamoerr"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// Partitions of the workflow's items.
const (
	recordsPK = "WF#REC"
	holdsPK   = "WF#HOLD"
)

// Store is a workflow.Store on one DynamoDB table. It is safe for concurrent use, by any
// number of processes on the same table.
type Store struct {
	c        *dynamodb.Client
	table    string
	pageSize int32
	holds    coalesce.Calls[struct{}, []workflow.Hold] // Holds' queries, shared by concurrent callers
}

var _ workflow.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// PageSize sets the Limit of each Query page (default 0: DynamoDB's 1 MB pages). Queries
// always follow LastEvaluatedKey to the end; a small page only adds round trips.
func PageSize(n int32) Option { return func(s *Store) { s.pageSize = n } }

// New returns a Store on table through client. The table is the audit table, created by
// auditlog/dynamo's CreateTable; New creates nothing.
func New(client *dynamodb.Client, table string, opts ...Option) *Store {
	s := &Store{c: client, table: table}
	for _, o := range opts {
		o(s)
	}
	s.holds.Do = s.readHolds
	return s
}

// Create implements workflow.Store: the record at version 1, if its request id is not
// stored.
func (s *Store) Create(ctx context.Context, r workflow.Record) error {
	if r.RequestID == "" {
		return retry.Permanent(errors.New("workflow/dynamo: record needs a request id"))
	}
	r.Version = 1
	item, err := recordItem(r)
	if err != nil {
		return err
	}
	err = s.put(ctx, "create", item, "attribute_not_exists(pk)", nil)
	if dynamoerr.IsConditionFailed(err) {
		return workflow.ErrExists
	}
	return err
}

// Get implements workflow.Store.
func (s *Store) Get(ctx context.Context, requestID string) (workflow.Record, error) {
	var r workflow.Record
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: key(recordsPK, requestID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return r, classify("get", err)
	}
	if out.Item == nil {
		return r, workflow.ErrNotFound
	}
	return r, decode(out.Item, &r)
}

// Swap implements workflow.Store: it writes r at r.Version+1 on the condition that the
// stored version is r.Version. When the condition fails, a read tells a missing record
// (ErrNotFound) from a changed one (ErrConflict).
func (s *Store) Swap(ctx context.Context, r workflow.Record) (workflow.Record, error) {
	if r.RequestID == "" {
		return workflow.Record{}, retry.Permanent(errors.New("workflow/dynamo: record needs a request id"))
	}
	prev := r.Version
	r.Version++
	item, err := recordItem(r)
	if err != nil {
		return workflow.Record{}, err
	}
	err = s.put(ctx, "swap", item, "version = :v", map[string]types.AttributeValue{":v": num(prev)})
	if !dynamoerr.IsConditionFailed(err) {
		if err != nil {
			return workflow.Record{}, err
		}
		return r, nil
	}
	if _, err := s.Get(ctx, r.RequestID); err != nil {
		return workflow.Record{}, err // ErrNotFound, or the read failed
	}
	return workflow.Record{}, workflow.ErrConflict
}

// List implements workflow.Store: one query of the records' partition.
func (s *Store) List(ctx context.Context) ([]workflow.Record, error) {
	items, err := s.query(ctx, "list", recordsPK)
	if err != nil {
		return nil, err
	}
	out := make([]workflow.Record, 0, len(items))
	for _, it := range items {
		var r workflow.Record
		if err := decode(it, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	workflow.SortRecords(out)
	return out, nil
}

// PutHold implements workflow.Store: an unconditional PutItem.
func (s *Store) PutHold(ctx context.Context, h workflow.Hold) error {
	if h.ID == "" {
		return retry.Permanent(errors.New("workflow/dynamo: hold needs an id"))
	}
	item, err := dataItem(holdsPK, h.ID, h)
	if err != nil {
		return err
	}
	return s.put(ctx, "put hold", item, "", nil)
}

// Holds implements workflow.Store: one query of the holds' partition. Concurrent calls
// share a query that starts after each of them was made (coalesce.Calls), so every hold
// stored before a call is in its answer; nothing is kept from one query to the next.
func (s *Store) Holds(ctx context.Context) ([]workflow.Hold, error) {
	hs, err := s.holds.Submit(ctx, struct{}{})
	return slices.Clone(hs), err
}

// readHolds queries the holds once and answers every operation of ops with them.
func (s *Store) readHolds(ctx context.Context, ops []struct{}) ([][]workflow.Hold, error) {
	items, err := s.query(ctx, "holds", holdsPK)
	if err != nil {
		return nil, err
	}
	hs := make([]workflow.Hold, 0, len(items))
	for _, it := range items {
		var h workflow.Hold
		if err := decode(it, &h); err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
	workflow.SortHolds(hs)
	out := make([][]workflow.Hold, len(ops))
	for i := range out {
		out[i] = hs
	}
	return out, nil
}

// put writes item, on cond when it is not empty. A failed condition is returned as the
// SDK's error, for the caller to translate; every other error is classified.
func (s *Store) put(ctx context.Context, op string, item map[string]types.AttributeValue, cond string, vals map[string]types.AttributeValue) error {
	in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item, ExpressionAttributeValues: vals}
	if cond != "" {
		in.ConditionExpression = aws.String(cond)
	}
	_, err := s.c.PutItem(ctx, in)
	if dynamoerr.IsConditionFailed(err) {
		return err
	}
	return classify(op, err)
}

// query returns every item of the partition pk, following LastEvaluatedKey.
func (s *Store) query(ctx context.Context, op, pk string) ([]map[string]types.AttributeValue, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
		ConsistentRead:            aws.Bool(true),
	}
	if s.pageSize > 0 {
		in.Limit = aws.Int32(s.pageSize)
	}
	var items []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(s.c, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, classify(op, err)
		}
		items = append(items, out.Items...)
	}
	return items, nil
}

// recordItem is the item of r, with its version beside the JSON for Swap's condition.
func recordItem(r workflow.Record) (map[string]types.AttributeValue, error) {
	item, err := dataItem(recordsPK, r.RequestID, r)
	if err != nil {
		return nil, err
	}
	item["version"] = num(r.Version)
	return item, nil
}

// dataItem is the item (pk, id) holding v as JSON in "data".
func dataItem(pk, id string, v any) (map[string]types.AttributeValue, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, retry.Permanent(fmt.Errorf("workflow/dynamo: encode: %w", err))
	}
	item := key(pk, id)
	item["data"] = str(string(b))
	return item, nil
}

// decode reads the JSON in item's "data" into v; a malformed item is Permanent.
func decode(item map[string]types.AttributeValue, v any) error {
	d, ok := item["data"].(*types.AttributeValueMemberS)
	if !ok {
		return retry.Permanent(errors.New("workflow/dynamo: item has no data attribute"))
	}
	if err := json.Unmarshal([]byte(d.Value), v); err != nil {
		return retry.Permanent(fmt.Errorf("workflow/dynamo: malformed item: %w", err))
	}
	return nil
}

func key(pk, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(pk), "sk": str(url.PathEscape(id))}
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// classify wraps err and marks it Permanent when retrying cannot fix it.
func classify(op string, err error) error { return dynamoerr.Classify("workflow/dynamo", op, err) }
