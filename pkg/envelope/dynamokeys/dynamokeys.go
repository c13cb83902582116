// Package dynamokeys is the DynamoDB implementation of envelope.KeyStore.
//
// One table with the string hash key pk (the id, which must be UTF-8) holds one item per id: either
// {pk, wrapped (binary)} or the tombstone {pk, shredded: true, shredded_at (RFC 3339
// string, UTC; absent in tombstones of earlier versions)}. An id without an item has no key
// (envelope.ErrMissing). Create is a PutItem conditioned on attribute_not_exists(pk);
// Destroy is a PutItem of the tombstone conditioned on there being no tombstone yet, which
// replaces the whole item and drops the wrapped key (a repeated Destroy keeps the first
// time); Replace is a PutItem conditioned on the stored wrapped key; Live is a paginated
// Scan of the ids; GetBatch is a BatchGetItem per 100 distinct ids. Single-item
// conditional writes only, and every read and scan is strongly consistent, so it runs on
// DynamoDB Local and dynalite as well.
//
// Point-in-time recovery and on-demand backups keep destroyed items for their retention
// period (up to 35 days for PITR): what they keep is a data key wrapped by the KEK, useless
// without it. Keep the KEK out of DynamoDB and its backups.
//
// Errors: requests DynamoDB rejects as malformed (validation, serialization) and items of
// an unknown shape are retry.Permanent; everything else (throttling, 5xx, network, a
// missing table) is transient. The SDK's retryer already retries throttling and 5xx.
package dynamokeys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"time"
	"unicode/utf8"

	"github.com/lethe-erasure/lethe/pkg/dynamoerr"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Store is an envelope.KeyStore on one DynamoDB table. It is safe for concurrent use.
type Store struct {
	c     *dynamodb.Client
	table string
	now   func() time.Time // the time Destroy records
	page  int32            // items per Scan page in Live; 0: DynamoDB's default (1 MB)
}

var (
	_ envelope.KeyStore    = (*Store)(nil)
	_ envelope.Replacer    = (*Store)(nil)
	_ envelope.Lister      = (*Store)(nil)
	_ envelope.BatchGetter = (*Store)(nil)
)

// New returns a Store on table through client.
func New(client *dynamodb.Client, table string) *Store {
	return &Store{c: client, table: table, now: time.Now}
}

// CreateTable creates the table (string hash key pk, on-demand billing) and waits until it
// is ACTIVE. A table that exists already is fine.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(s.table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return classify("create table", err)
	}
	w := dynamodb.NewTableExistsWaiter(s.c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 2*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)}, 5*time.Minute); err != nil {
		return fmt.Errorf("envelope/dynamokeys: wait for table: %w", err)
	}
	return nil
}

// Create stores wrapped for id (envelope.KeyStore).
func (s *Store) Create(ctx context.Context, id string, wrapped []byte) error {
	if !validID(id) {
		return badID
	}
	_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                keyItem(id, wrapped),
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if !isConditionFailed(err) {
		return classify("create", err)
	}
	_, tomb, err := s.get(ctx, "create", id)
	switch {
	case err != nil:
		return err
	case tomb != nil:
		return tomb
	default:
		return envelope.ErrExists
	}
}

// Get returns the wrapped key of id (envelope.KeyStore).
func (s *Store) Get(ctx context.Context, id string) ([]byte, error) {
	if !validID(id) {
		return nil, badID
	}
	return keyOf(s.get(ctx, "get", id))
}

// batchGetMax is the most keys one BatchGetItem reads; batchRounds bounds the calls that
// read one batch's unprocessed keys, unprocessedBackoff spaces them.
const (
	batchGetMax = 100
	batchRounds = 20
)

var unprocessedBackoff = retry.Backoff{Base: 10 * time.Millisecond, Max: time.Second}

// GetBatch returns the wrapped key of each of ids, as Get does (envelope.BatchGetter): a
// strongly consistent BatchGetItem per 100 distinct ids, whose unprocessed keys are read
// again after a backoff, up to 20 rounds. When the reads of 100 ids fail, each of them
// gets the error.
func (s *Store) GetBatch(ctx context.Context, ids []string) ([][]byte, []error) {
	keys, errs := make([][]byte, len(ids)), make([]error, len(ids))
	at := map[string][]int{} // the indices of each valid id
	var distinct []string
	for i, id := range ids {
		if !validID(id) {
			errs[i] = badID
			continue
		}
		if at[id] == nil {
			distinct = append(distinct, id)
		}
		at[id] = append(at[id], i)
	}
	for start := 0; start < len(distinct); start += batchGetMax {
		chunk := distinct[start:min(start+batchGetMax, len(distinct))]
		items, err := s.batchGet(ctx, chunk)
		for _, id := range chunk {
			key, kerr := []byte(nil), err
			if err == nil {
				key, kerr = keyOf(parseItem("get", items[id]))
			}
			for n, i := range at[id] {
				keys[i], errs[i] = key, kerr
				if n > 0 { // a repeated id: a copy of its own
					keys[i] = bytes.Clone(key)
				}
			}
		}
	}
	return keys, errs
}

// batchGet reads the items of ids (at most batchGetMax, no duplicates) by id; an id
// without an item is left out.
func (s *Store) batchGet(ctx context.Context, ids []string) (map[string]map[string]types.AttributeValue, error) {
	keys := make([]map[string]types.AttributeValue, len(ids))
	for i, id := range ids {
		keys[i] = map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}}
	}
	items := make(map[string]map[string]types.AttributeValue, len(ids))
	req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for round := 0; len(req) > 0; round++ {
		if round == batchRounds {
			return nil, fmt.Errorf("envelope/dynamokeys: get: keys still unprocessed after %d rounds", batchRounds)
		}
		if round > 0 { // throttled: back off before reading what was left
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("envelope/dynamokeys: get: %w", ctx.Err())
			case <-time.After(unprocessedBackoff.Delay(round)):
			}
		}
		out, err := s.c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, classify("get", err)
		}
		for _, it := range out.Responses[s.table] {
			if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok {
				items[pk.Value] = it
			}
		}
		req = out.UnprocessedKeys
	}
	return items, nil
}

// Destroy replaces the item of id by a tombstone (envelope.KeyStore).
func (s *Store) Destroy(ctx context.Context, id string) error {
	if !validID(id) {
		return badID
	}
	_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			"pk":          &types.AttributeValueMemberS{Value: id},
			"shredded":    &types.AttributeValueMemberBOOL{Value: true},
			"shredded_at": &types.AttributeValueMemberS{Value: s.now().UTC().Format(time.RFC3339Nano)},
		},
		ConditionExpression: aws.String("attribute_not_exists(shredded)"),
	})
	if isConditionFailed(err) {
		return nil // destroyed already: keep the first time
	}
	return classify("destroy", err)
}

// Replace stores wrapped for id if the stored key equals old (envelope.Replacer).
func (s *Store) Replace(ctx context.Context, id string, old, wrapped []byte) error {
	if !validID(id) {
		return badID
	}
	_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     keyItem(id, wrapped),
		ConditionExpression:      aws.String("attribute_exists(pk) AND attribute_not_exists(shredded) AND #w = :old"),
		ExpressionAttributeNames: map[string]string{"#w": "wrapped"}, // a reserved word
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":old": &types.AttributeValueMemberB{Value: old},
		},
	})
	if !isConditionFailed(err) {
		return classify("replace", err)
	}
	w, tomb, err := s.get(ctx, "replace", id)
	switch {
	case err != nil:
		return err
	case tomb != nil:
		return tomb
	case w == nil:
		return envelope.ErrMissing
	default:
		return envelope.ErrConflict // changed, perhaps back again: the caller reads anew
	}
}

// Live yields the ids of the items that are not tombstones (envelope.Lister): a
// paginated, strongly consistent Scan that reads the id only (a projection of pk, the
// tombstones filtered out by the table), so no wrapped key leaves the table. Scans read
// the whole table and consume read capacity for every item, tombstones included; pace a
// bulk job with the caller's rate limit.
func (s *Store) Live(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		in := &dynamodb.ScanInput{
			TableName:                aws.String(s.table),
			ConsistentRead:           aws.Bool(true),
			ProjectionExpression:     aws.String("pk"),
			FilterExpression:         aws.String("attribute_not_exists(#s)"),
			ExpressionAttributeNames: map[string]string{"#s": "shredded"},
		}
		if s.page > 0 {
			in.Limit = aws.Int32(s.page)
		}
		p := dynamodb.NewScanPaginator(s.c, in)
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				yield("", classify("scan", err))
				return
			}
			for _, item := range out.Items {
				pk, ok := item["pk"].(*types.AttributeValueMemberS)
				if !ok {
					yield("", retry.Permanent(fmt.Errorf("envelope/dynamokeys: scan: %w: item without a string pk", envelope.ErrCorrupt)))
					return
				}
				if !yield(pk.Value, nil) {
					return
				}
			}
		}
	}
}

// get reads the item of id: its wrapped key (nil when there is no item or a tombstone) and,
// for a tombstone, its *envelope.ShreddedError.
func (s *Store) get(ctx context.Context, op, id string) ([]byte, *envelope.ShreddedError, error) {
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, nil, classify(op, err)
	}
	return parseItem(op, out.Item)
}

// parseItem reads item, an id's item or nil: its wrapped key (nil when there is no item or
// a tombstone) and, for a tombstone, its *envelope.ShreddedError.
func parseItem(op string, item map[string]types.AttributeValue) ([]byte, *envelope.ShreddedError, error) {
	if item == nil {
		return nil, nil, nil
	}
	if sh, ok := item["shredded"].(*types.AttributeValueMemberBOOL); ok && sh.Value {
		var at time.Time
		if v, ok := item["shredded_at"].(*types.AttributeValueMemberS); ok {
			at, _ = time.Parse(time.RFC3339Nano, v.Value) // unparsable: the time is unknown, the id still shredded
		}
		return nil, &envelope.ShreddedError{At: at}, nil
	}
	w, ok := item["wrapped"].(*types.AttributeValueMemberB)
	if !ok || len(w.Value) == 0 {
		return nil, nil, retry.Permanent(fmt.Errorf("envelope/dynamokeys: %s: %w: item has neither a wrapped key nor a tombstone", op, envelope.ErrCorrupt))
	}
	return w.Value, nil, nil
}

// keyOf is what Get returns for an id whose item get or parseItem read.
func keyOf(w []byte, tomb *envelope.ShreddedError, err error) ([]byte, error) {
	switch {
	case err != nil:
		return nil, err
	case tomb != nil:
		return nil, tomb
	case w == nil:
		return nil, envelope.ErrMissing
	default:
		return w, nil
	}
}

// badID is returned for an empty id or one that is not UTF-8 (DynamoDB strings are UTF-8).
var badID = retry.Permanent(errors.New("envelope/dynamokeys: id must be non-empty UTF-8"))

func validID(id string) bool { return id != "" && utf8.ValidString(id) }

func keyItem(id string, wrapped []byte) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk":      &types.AttributeValueMemberS{Value: id},
		"wrapped": &types.AttributeValueMemberB{Value: bytes.Clone(wrapped)},
	}
}

func isConditionFailed(err error) bool { return dynamoerr.IsConditionFailed(err) }

// classify wraps err and marks it Permanent when retrying cannot fix it.
func classify(op string, err error) error { return dynamoerr.Classify("envelope/dynamokeys", op, err) }
