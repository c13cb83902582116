// Package dynamo is the DynamoDB implementation of auditlog.Store.
//
// It uses one table with string keys pk and sk and single-item conditional writes only (no
// transactions, so it runs on DynamoDB Local and dynalite as well). Records are stored as
// JSON in the attribute "data", beside the few attributes that conditions and ordering
// need (attempt, seq, request_id). Every read is strongly consistent. Items:
//
//	pk                               sk                        holds
//	EVT#<tenant>#<subject hash>      EVT#<event id>            an audit event
//	REQ#<request id>                 REQUEST                   the request (attempt)
//	REQIDX#<tenant>                  <requested at>#<request id>   request index entry
//	REQIDX                           <requested at>#<request id>   request index entry (all tenants)
//	REQ#<request id>                 REPORT#<store>            a store's report (attempt)
//	REQ#<request id>                 REPORT#<store>#<seq>#<digest>   a store's report, one of several (AppendReport)
//	REQ#<request id>                 RECEIPT                   the receipt (seq)
//	REQ#<request id>                 PUBLISHED                 the receipt was published (PublishMarker)
//	TEN#<tenant>                     HEAD                      the chain's head (seq)
//	TEN#<tenant>                     RCPT#<seq, 20 digits>#<request id>   receipt index entry
//	SUP#<tenant>#<pseudonym>         SUPPRESSION               a suppression entry (version)
//
// Addenda and the aggregator's schedule have items of their own (addenda.go), and so has
// the privacy team's workflow, under WF#REC and WF#HOLD (pkg/workflow/dynamo).
//
// Key components are escaped with url.PathEscape, so '#' and '%' inside ids cannot make
// two keys collide.
//
// Errors: ConditionalCheckFailedException becomes auditlog.ErrExists or ErrConflict, or is
// swallowed where the contract says an older write is ignored. Requests DynamoDB rejects as
// malformed (validation, serialization, item too large) and undecodable items are
// retry.Permanent; everything else (throttling, 5xx, network, a missing table) is
// transient. The SDK's own retryer already retries throttling and 5xx a few times.
package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/lethe-erasure/lethe/pkg/coalesce"
	"github.com/lethe-erasure/lethe/pkg/dynamoerr"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Store is an auditlog.Store on one DynamoDB table. It is safe for concurrent use.
type Store struct {
	c        *dynamodb.Client
	table    string
	pageSize int32
	group    coalesce.Calls[[]map[string]types.AttributeValue, error]       // unconditional writes shared by concurrent callers
	reads    coalesce.Calls[[][2]string, []map[string]types.AttributeValue] // item reads shared by concurrent callers
	cursor   struct {
		sync.Mutex
		atMost string // a bucket the schedule's cursor was at or before when last written or checked
	}
	reqs requestCalls // request reads and index writes shared by concurrent callers
}

var _ auditlog.Table = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// PageSize sets the Limit of each Query page (default 0: DynamoDB's 1 MB pages). Queries
// always follow LastEvaluatedKey to the end; a small page size only adds round trips.
func PageSize(n int32) Option { return func(s *Store) { s.pageSize = n } }

// New returns a Store on table through client.
func New(client *dynamodb.Client, table string, opts ...Option) *Store {
	s := &Store{c: client, table: table}
	for _, o := range opts {
		o(s)
	}
	s.initRequestCalls()
	s.initGroup()
	s.initItemReads()
	return s
}

// CreateTable creates the table (pk and sk string keys, on-demand billing) and waits until
// it is ACTIVE. A table that exists already is fine.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(s.table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
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
		return fmt.Errorf("auditlog/dynamo: wait for table: %w", err)
	}
	return nil
}

// AppendEvent stores e unless its id is stored for the tenant and subject hash.
func (s *Store) AppendEvent(ctx context.Context, e auditlog.Event) error {
	if e.EventID == "" || e.TenantID == "" || e.SubjectHash == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: event needs an event id, a tenant id and a subject hash"))
	}
	item, err := record(eventPK(e.TenantID, e.SubjectHash), "EVT#"+esc(e.EventID), e)
	if err != nil {
		return err
	}
	err = s.put(ctx, "append event", item, "attribute_not_exists(pk)", nil)
	if isConditionFailed(err) {
		return nil
	}
	return err
}

// Events returns the subject's events ordered by At then EventID.
func (s *Store) Events(ctx context.Context, tenant, subjectHash string) ([]auditlog.Event, error) {
	items, err := s.query(ctx, "events", eventPK(tenant, subjectHash), "EVT#")
	if err != nil {
		return nil, err
	}
	evs := make([]auditlog.Event, 0, len(items))
	for _, it := range items {
		var e auditlog.Event
		if err := decode(it, &e); err != nil {
			return nil, err
		}
		evs = append(evs, e)
	}
	auditlog.SortEvents(evs)
	return evs, nil
}

// RawEvents returns the JSON of every event item of the subject as stored; an item without
// a string "data" attribute comes back with auditlog.ErrNoEventJSON.
func (s *Store) RawEvents(ctx context.Context, tenant, subjectHash string) ([]auditlog.StoredEvent, error) {
	items, err := s.query(ctx, "events", eventPK(tenant, subjectHash), "EVT#")
	if err != nil {
		return nil, err
	}
	out := make([]auditlog.StoredEvent, 0, len(items))
	for _, it := range items {
		if d, ok := it["data"].(*types.AttributeValueMemberS); ok {
			out = append(out, auditlog.StoredEvent{JSON: []byte(d.Value)})
		} else {
			out = append(out, auditlog.StoredEvent{Err: auditlog.ErrNoEventJSON})
		}
	}
	return out, nil
}

// PutRequest inserts r or replaces the stored request when r.Attempt >= its attempt. It
// writes r's index entries (see ListRequests) before the request itself, so a crash in
// between leaves entries that ListRequests skips until the request is written. The
// entries of concurrent calls share BatchWriteItem calls; the request is one conditional
// PutItem.
func (s *Store) PutRequest(ctx context.Context, r auditlog.Request) error {
	if r.RequestID == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: request needs a request id"))
	}
	if err := s.putRequestIndex(ctx, r); err != nil {
		return err
	}
	return s.putAttempt(ctx, "put request", reqPK(r.RequestID), "REQUEST", r, r.Attempt)
}

// GetRequest returns the request or auditlog.ErrNotFound. Concurrent calls share
// strongly consistent BatchGetItem calls, each started after the calls it carries.
func (s *Store) GetRequest(ctx context.Context, requestID string) (auditlog.Request, error) {
	var r auditlog.Request
	item, err := s.getRequest(ctx, requestID)
	if err != nil {
		return r, err
	}
	if item == nil {
		return r, auditlog.ErrNotFound
	}
	return r, decode(item, &r)
}

// PutReport stores d unless a report of a later attempt is stored for its request and store.
func (s *Store) PutReport(ctx context.Context, d event.StoreDone) error {
	if d.RequestID == "" || d.Store == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: report needs a request id and a store"))
	}
	return s.putAttempt(ctx, "put report", reqPK(d.RequestID), reportSK(d.Store), d, d.Attempt)
}

// CreateReport stores d unless a report is stored for its request and store
// (auditlog.ErrExists): one conditional write.
func (s *Store) CreateReport(ctx context.Context, d event.StoreDone) error {
	if d.RequestID == "" || d.Store == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: report needs a request id and a store"))
	}
	item, err := attemptRecord(reqPK(d.RequestID), reportSK(d.Store), d, d.Attempt)
	if err != nil {
		return err
	}
	err = s.put(ctx, "create report", item, "attribute_not_exists(pk)", nil)
	if isConditionFailed(err) {
		return auditlog.ErrExists
	}
	return err
}

// Reports returns the request's reports, each store's folded into one
// (auditlog.FoldReports), ordered by store name.
func (s *Store) Reports(ctx context.Context, requestID string) ([]event.StoreDone, error) {
	items, err := s.query(ctx, "reports", reqPK(requestID), reportPrefix)
	if err != nil {
		return nil, err
	}
	ds := make([]event.StoreDone, 0, len(items))
	for _, it := range items {
		var d event.StoreDone
		if err := decode(it, &d); err != nil {
			return nil, err
		}
		ds = append(ds, d)
	}
	return auditlog.FoldReports(ds), nil
}

// RequestState reads the request's partition in one strongly consistent query: the
// request, its reports (folded, as Reports) and its publication mark share it (its
// receipt and addenda too, which are skipped undecoded).
func (s *Store) RequestState(ctx context.Context, requestID string) (auditlog.RequestState, error) {
	items, err := s.query(ctx, "request state", reqPK(requestID), "")
	if err != nil {
		return auditlog.RequestState{}, err
	}
	var st auditlog.RequestState
	found := false
	for _, it := range items {
		sk, _ := it["sk"].(*types.AttributeValueMemberS)
		switch {
		case sk == nil:
			return auditlog.RequestState{}, retry.Permanent(errors.New("auditlog/dynamo: item without a sort key"))
		case sk.Value == "REQUEST":
			if err := decode(it, &st.Request); err != nil {
				return auditlog.RequestState{}, err
			}
			found = true
		case isReport(sk.Value):
			var d event.StoreDone
			if err := decode(it, &d); err != nil {
				return auditlog.RequestState{}, err
			}
			st.Reports = append(st.Reports, d)
		case sk.Value == publishedSK:
			st.Published = true
		}
	}
	if !found {
		return auditlog.RequestState{}, auditlog.ErrNotFound
	}
	st.Reports = auditlog.FoldReports(st.Reports)
	return st, nil
}

// GetReceipt returns the request's receipt or auditlog.ErrNotFound, read in a call shared
// with concurrent reads.
func (s *Store) GetReceipt(ctx context.Context, requestID string) (event.Receipt, error) {
	items, err := s.read(ctx, [2]string{reqPK(requestID), "RECEIPT"})
	if err != nil {
		return event.Receipt{}, err
	}
	if items[0] == nil {
		return event.Receipt{}, auditlog.ErrNotFound
	}
	var r event.Receipt
	return r, decode(items[0], &r)
}

// Head returns the tenant's head, the zero Head when it has none.
func (s *Store) Head(ctx context.Context, tenant string) (auditlog.Head, error) {
	var h auditlog.Head
	err := s.get(ctx, "head", tenPK(tenant), "HEAD", &h)
	if errors.Is(err, auditlog.ErrNotFound) {
		return auditlog.Head{}, nil
	}
	return h, err
}

// SwapHead replaces the tenant's head with h if its seq is oldSeq (0: none), else
// auditlog.ErrConflict.
func (s *Store) SwapHead(ctx context.Context, tenant string, oldSeq int64, h auditlog.Head) error {
	item, err := record(tenPK(tenant), "HEAD", h)
	if err != nil {
		return err
	}
	item["seq"] = num(h.Seq)
	cond, vals := "attribute_not_exists(pk)", map[string]types.AttributeValue(nil)
	if oldSeq != 0 {
		cond, vals = "seq = :s", map[string]types.AttributeValue{":s": num(oldSeq)}
	}
	err = s.put(ctx, "swap head", item, cond, vals)
	if isConditionFailed(err) {
		return auditlog.ErrConflict
	}
	return err
}

// putAttempt writes v unless the stored item has a greater attempt.
func (s *Store) putAttempt(ctx context.Context, op, pk, sk string, v any, attempt int) error {
	item, err := attemptRecord(pk, sk, v, attempt)
	if err != nil {
		return err
	}
	err = s.put(ctx, op, item, "attribute_not_exists(pk) OR attempt <= :a",
		map[string]types.AttributeValue{":a": num(int64(attempt))})
	if isConditionFailed(err) {
		return nil // a later attempt is stored: keep it
	}
	return err
}

func (s *Store) put(ctx context.Context, op string, item map[string]types.AttributeValue, cond string, vals map[string]types.AttributeValue) error {
	in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item, ExpressionAttributeValues: vals}
	if cond != "" {
		in.ConditionExpression = aws.String(cond)
	}
	_, err := s.c.PutItem(ctx, in)
	if isConditionFailed(err) {
		return err
	}
	return classify(op, err)
}

// get decodes the item (pk, sk) into v, or returns auditlog.ErrNotFound.
func (s *Store) get(ctx context.Context, op, pk, sk string, v any) error {
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: key(pk, sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return classify(op, err)
	}
	if out.Item == nil {
		return auditlog.ErrNotFound
	}
	return decode(out.Item, v)
}

// query returns every item of pk whose sk starts with prefix ("": every item of pk),
// following LastEvaluatedKey.
func (s *Store) query(ctx context.Context, op, pk, prefix string) ([]map[string]types.AttributeValue, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":p": str(prefix)},
		ConsistentRead:            aws.Bool(true),
	}
	if prefix == "" {
		in.KeyConditionExpression = aws.String("pk = :pk")
		delete(in.ExpressionAttributeValues, ":p")
	}
	if s.pageSize > 0 {
		in.Limit = aws.Int32(s.pageSize)
	}
	var items []map[string]types.AttributeValue
	for {
		out, err := s.c.Query(ctx, in)
		if err != nil {
			return nil, classify(op, err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// reportPrefix starts the sort key of every report of a request.
const reportPrefix = "REPORT#"

func reportSK(store string) string { return reportPrefix + esc(store) }

func eventPK(tenant, subjectHash string) string { return "EVT#" + esc(tenant) + "#" + esc(subjectHash) }
func reqPK(requestID string) string             { return "REQ#" + esc(requestID) }
func tenPK(tenant string) string                { return "TEN#" + esc(tenant) }
func esc(id string) string                      { return url.PathEscape(id) }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(pk), "sk": str(sk)}
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// record is the item (pk, sk) holding v as JSON in "data".
func record(pk, sk string, v any) (map[string]types.AttributeValue, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, retry.Permanent(fmt.Errorf("auditlog/dynamo: encode: %w", err))
	}
	item := key(pk, sk)
	item["data"] = str(string(b))
	return item, nil
}

// attemptRecord is record with v's attempt beside it, for conditions on the attempt.
func attemptRecord(pk, sk string, v any, attempt int) (map[string]types.AttributeValue, error) {
	item, err := record(pk, sk, v)
	if err != nil {
		return nil, err
	}
	item["attempt"] = num(int64(attempt))
	return item, nil
}

// decode reads the JSON in item's "data" into v; a malformed item is Permanent.
func decode(item map[string]types.AttributeValue, v any) error {
	d, ok := item["data"].(*types.AttributeValueMemberS)
	if !ok {
		return retry.Permanent(errors.New("auditlog/dynamo: item has no data attribute"))
	}
	if err := json.Unmarshal([]byte(d.Value), v); err != nil {
		return retry.Permanent(fmt.Errorf("auditlog/dynamo: malformed item: %w", err))
	}
	return nil
}

func isConditionFailed(err error) bool { return dynamoerr.IsConditionFailed(err) }

// classify wraps err and marks it Permanent when retrying cannot fix it.
func classify(op string, err error) error { return dynamoerr.Classify("auditlog/dynamo", op, err) }
