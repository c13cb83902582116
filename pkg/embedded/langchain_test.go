package embedded_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Six LangChain-shaped chunks of a customer ({"page_content": …, "metadata":
// {"customer_id": …}}): with the reference inventory, which names customer_id at the top of
// the payload, the erasure finds nothing in its own locators, but its probe of what
// discovery found (metadata.customer_id) finds the chunks, so the request is INCOMPLETE and
// names the key; with the LangChain example inventory the receipt is COMPLETE and the
// chunks are gone, another customer's kept.
func TestLangChainShapedChunks(t *testing.T) {
	langchain, err := inventory.Load("../../deploy/examples/inventory-langchain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		inv      *inventory.Inventory
		coll     string
		complete bool
	}{
		{"reference", inventory.Reference(), "shopbot_acme", false},
		{"langchain", langchain, "docs_acme", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
			if err != nil {
				t.Fatal(err)
			}
			cfg := embedded.DefaultConfig()
			cfg.Deleter.Discovery.Tenants = []string{"acme"}
			sys, err := embedded.Start(ctx, embedded.Options{Key: key, Inventory: tc.inv, Config: &cfg, External: external(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sys.Stop() })
			if _, err := sys.Stack.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("rag-exports")}); err != nil && !strings.Contains(err.Error(), "BucketAlready") {
				t.Fatal(err)
			}
			q := sys.Stack.Qdrant
			if err := q.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: tc.coll,
				VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Cosine})}); err != nil {
				t.Fatal(err)
			}
			var points []*qdrant.PointStruct
			for i := range 8 {
				owner := "cust-7"
				if i >= 6 {
					owner = "cust-77"
				}
				points = append(points, &qdrant.PointStruct{Id: qdrant.NewIDNum(uint64(i + 1)), Vectors: qdrant.NewVectorsDense([]float32{1, float32(i)}),
					Payload: qdrant.NewValueMap(map[string]any{"page_content": fmt.Sprintf("chunk %d", i), "metadata": map[string]any{"customer_id": owner, "source": "faq"}})})
			}
			if _, err := q.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: tc.coll, Points: points, Wait: aws.Bool(true)}); err != nil {
				t.Fatal(err)
			}
			count := func(owner string) uint64 {
				n, err := q.Count(ctx, &qdrant.CountPoints{CollectionName: tc.coll, Exact: aws.Bool(true),
					Filter: &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatch("metadata.customer_id", owner)}}})
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			if resp, err := http.Post(sys.BaseURL+"/discovery", "", nil); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("discovery: %v %v", resp, err)
			}
			acc := submit(t, sys, `{"tenant_id":"acme","subject_id":"cust-7","regulation":"GDPR"}`, "")
			var st intake.Status
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				resp, err := http.Get(sys.BaseURL + "/v1/erasures/" + acc.RequestID)
				if err != nil {
					t.Fatal(err)
				}
				json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
				if st.State == intake.StateComplete || st.State == intake.StateIncomplete || st.State == intake.StateFailed || time.Now().After(deadline) {
					break
				}
			}
			if !tc.complete {
				var named []event.OutsideLocation
				for _, s := range st.Stores {
					if s.Verification != nil {
						named = append(named, s.Verification.OutsideInventory...)
					}
				}
				if st.State != intake.StateIncomplete || len(named) != 1 || named[0].Location != "shopbot_{tenant}/metadata.customer_id" || named[0].Found != 6 ||
					!strings.Contains(named[0].Suggest, "metadata.customer_id") {
					t.Fatalf("state %s, outside the inventory %+v; want INCOMPLETE naming metadata.customer_id with 6 chunks", st.State, named)
				}
				if _, err := sys.Stack.Audit.GetReceipt(ctx, acc.RequestID); err == nil {
					t.Error("a receipt was issued")
				}
				if n := count("cust-7"); n != 6 {
					t.Errorf("%d of the customer's chunks left, want 6: the reference inventory's locators never reach them", n)
				}
				return
			}
			r := waitReceipt(t, sys, acc.RequestID)
			if r.Status != event.ReceiptComplete || r.Stores[0].Store != "qdrant" || r.Stores[0].Deleted != 6 {
				t.Errorf("receipt %s, qdrant %+v", r.Status, r.Stores[0])
			}
			if n, other := count("cust-7"), count("cust-77"); n != 0 || other != 2 {
				t.Errorf("%d of the customer's chunks left, %d of the other's (want 0 and 2)", n, other)
			}
		})
	}
}
