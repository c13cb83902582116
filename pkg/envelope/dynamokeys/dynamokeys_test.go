package dynamokeys_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/envelope/dynamokeys"
	"github.com/lethe-erasure/lethe/pkg/envelope/keystoretest"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func client(t *testing.T) *dynamodb.Client {
	t.Helper()
	url := testenv.DynamoDB(t)
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(url),
	})
}

func newStoreFunc(t *testing.T) func(t *testing.T) *dynamokeys.Store {
	c := client(t)
	var tables atomic.Int64
	return func(t *testing.T) *dynamokeys.Store {
		t.Helper()
		s := dynamokeys.New(c, testenv.DynamoTable(t, fmt.Sprintf("keys-%d", tables.Add(1))))
		dynamokeys.SetScanPage(s, 4) // Live crosses pages (tombstones filtered within a page)
		if err := s.CreateTable(context.Background()); err != nil {
			t.Fatalf("CreateTable: %v", err)
		}
		return s
	}
}

func TestConformance(t *testing.T) {
	newStore := newStoreFunc(t)
	keystoretest.Run(t, func(t *testing.T) envelope.KeyStore { return newStore(t) })
}

func TestSealerOnDynamo(t *testing.T) {
	ctx := t.Context()
	c := client(t)
	table := testenv.DynamoTable(t, "keys")
	s := dynamokeys.New(c, table)
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(ctx); err != nil {
		t.Fatalf("CreateTable on an existing table: %v", err)
	}
	kek := make([]byte, envelope.KeySize)
	rand.Read(kek)
	k, err := envelope.NewKEK("k1", map[string][]byte{"k1": kek})
	if err != nil {
		t.Fatal(err)
	}
	sealer := &envelope.Sealer{KEK: k, Keys: s}
	sealed, err := sealer.Seal(ctx, "er_1", []byte("cust-42"))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := sealer.Open(ctx, "er_1", sealed); err != nil || string(pt) != "cust-42" {
		t.Fatalf("Open = %q, %v", pt, err)
	}
	if err := sealer.Shred(ctx, "er_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := sealer.Open(ctx, "er_1", sealed); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Open after Shred = %v, want ErrShredded", err)
	}
	// The tombstone item holds no key material.
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "er_1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	at, ok := out.Item["shredded_at"].(*types.AttributeValueMemberS)
	if _, hasKey := out.Item["wrapped"]; hasKey || len(out.Item) != 3 || !ok {
		t.Fatalf("tombstone item = %v, want only pk, shredded and shredded_at", out.Item)
	}
	if _, err := time.Parse(time.RFC3339Nano, at.Value); err != nil {
		t.Fatalf("shredded_at %q is not an RFC 3339 time: %v", at.Value, err)
	}
	// A tombstone written before tombstones held a time still reads as shredded.
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "er_old"}, "shredded": &types.AttributeValueMemberBOOL{Value: true},
	}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(ctx, "er_old")
	if when, shredded := envelope.ShreddedAt(err); !shredded || !when.IsZero() {
		t.Fatalf("Get of a tombstone without a time = %v, want ErrShredded with no time", err)
	}
}

func TestErrorsClassified(t *testing.T) {
	ctx := t.Context()
	c := client(t)
	missing := dynamokeys.New(c, "no-such-table")
	_, err := missing.Get(ctx, "er_1")
	if err == nil || errors.Is(err, envelope.ErrShredded) || retry.IsPermanent(err) {
		t.Fatalf("Get on a missing table = %v, want a transient error", err)
	}
	table := testenv.DynamoTable(t, "keys")
	s := dynamokeys.New(c, table)
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "bad\xff", []byte("w")); err == nil || !retry.IsPermanent(err) {
		t.Fatalf("Create with a non-UTF-8 id = %v, want a permanent error", err)
	}
	// An item of an unknown shape is corrupt, not shredded.
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "er_odd"}, "other": &types.AttributeValueMemberS{Value: "x"},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "er_odd"); !errors.Is(err, envelope.ErrCorrupt) || !retry.IsPermanent(err) {
		t.Fatalf("Get of a malformed item = %v, want permanent ErrCorrupt", err)
	}
}

// batchWire watches the DynamoDB calls of a client: it counts GetItem and BatchGetItem
// calls, records the keys of each BatchGetItem, and, while hold is set, holds back the
// second half of the keys of the next BatchGetItem and answers them as unprocessed, as
// DynamoDB does when it throttles part of a batch.
type batchWire struct {
	base  http.RoundTripper
	mu    sync.Mutex
	gets  int
	reads []batchRead // every BatchGetItem, in order
	hold  bool
}

type batchRead struct {
	keys       []string // the ids asked for
	consistent bool
	deferred   int // ids answered as unprocessed without asking the server
}

type batchGetRequest struct {
	RequestItems map[string]keysAndAttributes
}

type keysAndAttributes struct {
	Keys           []map[string]map[string]string
	ConsistentRead bool
}

func (b *batchWire) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Header.Get("X-Amz-Target") {
	case "DynamoDB_20120810.GetItem":
		b.mu.Lock()
		b.gets++
		b.mu.Unlock()
	case "DynamoDB_20120810.BatchGetItem":
		return b.batchGet(r)
	}
	return b.base.RoundTrip(r)
}

func (b *batchWire) batchGet(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var in batchGetRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	if len(in.RequestItems) != 1 {
		return nil, fmt.Errorf("BatchGetItem of %d tables", len(in.RequestItems))
	}
	table := slices.Collect(maps.Keys(in.RequestItems))[0]
	req := in.RequestItems[table]
	read := batchRead{consistent: req.ConsistentRead}
	for _, k := range req.Keys {
		read.keys = append(read.keys, k["pk"]["S"])
	}
	var held []map[string]map[string]string
	b.mu.Lock()
	if b.hold && len(req.Keys) > 1 {
		b.hold = false
		half := len(req.Keys) / 2
		req.Keys, held = req.Keys[:half], req.Keys[half:]
		read.deferred = len(held)
	}
	b.reads = append(b.reads, read)
	b.mu.Unlock()
	if held != nil {
		if body, err = json.Marshal(batchGetRequest{RequestItems: map[string]keysAndAttributes{table: req}}); err != nil {
			return nil, err
		}
	}
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp, err := b.base.RoundTrip(r)
	if err != nil || held == nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	var out map[string]json.RawMessage
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if out["UnprocessedKeys"], err = json.Marshal(map[string]keysAndAttributes{table: {Keys: held, ConsistentRead: req.ConsistentRead}}); err != nil {
		return nil, err
	}
	if body, err = json.Marshal(out); err != nil {
		return nil, err
	}
	resp.Header.Del("X-Amz-Crc32") // the body changed
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return resp, nil
}

// GetBatch reads strongly consistent batches of at most 100 distinct ids, one
// BatchGetItem each and no GetItem, follows the keys DynamoDB leaves unprocessed, and
// answers every id as Get does.
func TestGetBatchOnTheWire(t *testing.T) {
	ctx := t.Context()
	wire := &batchWire{base: http.DefaultTransport}
	c := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(testenv.DynamoDB(t)),
		HTTPClient:   &http.Client{Transport: wire, Timeout: 30 * time.Second},
	})
	s := dynamokeys.New(c, testenv.DynamoTable(t, "keys"))
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 250
	var ids []string
	for i := range n {
		id := fmt.Sprintf("er_%03d", i)
		if err := s.Create(ctx, id, []byte(id+"-key")); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range []string{"er_042", "er_199"} {
		if err := s.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	ids = append(ids, "absent", "er_000", "er_042") // 251 distinct ids, two repeated
	check := func(keys [][]byte, errs []error) {
		t.Helper()
		for i, id := range ids {
			switch id {
			case "absent":
				if !errors.Is(errs[i], envelope.ErrMissing) {
					t.Errorf("%s: %q, %v; want ErrMissing", id, keys[i], errs[i])
				}
			case "er_042", "er_199":
				if _, ok := envelope.ShreddedAt(errs[i]); !ok || keys[i] != nil {
					t.Errorf("%s: %q, %v; want ErrShredded", id, keys[i], errs[i])
				}
			default:
				if errs[i] != nil || string(keys[i]) != id+"-key" {
					t.Errorf("%s: %q, %v; want its key", id, keys[i], errs[i])
				}
			}
		}
	}
	calls := func() (int, []batchRead) {
		wire.mu.Lock()
		defer wire.mu.Unlock()
		gets, reads := wire.gets, wire.reads
		wire.gets, wire.reads = 0, nil
		return gets, reads
	}
	calls()
	check(s.GetBatch(ctx, ids))
	gets, reads := calls()
	if gets != 0 || len(reads) != 3 {
		t.Fatalf("GetBatch of 251 distinct ids: %d GetItem, %d BatchGetItem calls; want 0 and 3", gets, len(reads))
	}
	asked := map[string]int{}
	for _, r := range reads {
		if len(r.keys) > 100 || !r.consistent {
			t.Errorf("a BatchGetItem of %d keys, consistent %v; want at most 100, strongly consistent", len(r.keys), r.consistent)
		}
		for _, k := range r.keys {
			asked[k]++
		}
	}
	for id, times := range asked {
		if times != 1 {
			t.Errorf("%s asked for %d times", id, times)
		}
	}
	if len(asked) != n+1 {
		t.Errorf("%d ids asked for, want %d", len(asked), n+1)
	}

	// Keys left unprocessed are asked for again, and answered.
	wire.mu.Lock()
	wire.hold = true
	wire.mu.Unlock()
	check(s.GetBatch(ctx, ids))
	_, reads = calls()
	if len(reads) != 4 || reads[0].deferred != 50 || len(reads[1].keys) != 50 || !reads[1].consistent {
		var got []string
		for _, r := range reads {
			got = append(got, fmt.Sprintf("%d keys (%d unprocessed, consistent %v)", len(r.keys), r.deferred, r.consistent))
		}
		t.Fatalf("reads after 50 keys were left unprocessed: %v; want the 50 read again in the second call, then two more", got)
	}
	if !slices.Equal(reads[1].keys, reads[0].keys[50:]) {
		t.Errorf("second read asked for %v, want the unprocessed %v", reads[1].keys, reads[0].keys[50:])
	}

	// A failed read fails each of its ids, not as missing.
	_, errs := dynamokeys.New(c, "no-such-table").GetBatch(ctx, ids[:3])
	for i, err := range errs {
		if err == nil || errors.Is(err, envelope.ErrMissing) || retry.IsPermanent(err) {
			t.Errorf("GetBatch on a missing table: %s: %v, want a transient error", ids[i], err)
		}
	}
}
