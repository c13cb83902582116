package dynamokeys_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
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
