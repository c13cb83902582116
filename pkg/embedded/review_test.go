package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// TestReviewResolvesSimilarCopies: the receipt lists two untagged near-copies of the
// customer's chunk for review; a privacy officer erases one and dismisses the other with a
// reason. The chain records both decisions and the erasure (REVIEWED, REVIEWED,
// ITEM_ERASED) and verifies; the erased copy is gone, the dismissed copy and a bystander's
// chunk are kept; an item decided already, or one the receipt does not list, is refused.
func TestReviewResolvesSimilarCopies(t *testing.T) {
	ctx := context.Background()
	inv, err := inventory.Load("../../deploy/examples/inventory-langchain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sys, err := embedded.Start(ctx, embedded.Options{Key: key, Inventory: inv, External: external(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })
	if _, err := sys.Stack.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("rag-exports")}); err != nil && !strings.Contains(err.Error(), "BucketAlready") {
		t.Fatal(err)
	}
	q := sys.Stack.Qdrant
	const coll = "docs_acme"
	if err := q.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: coll,
		VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Cosine})}); err != nil {
		t.Fatal(err)
	}
	point := func(id uint64, v []float32, meta map[string]any) *qdrant.PointStruct {
		return &qdrant.PointStruct{Id: qdrant.NewIDNum(id), Vectors: qdrant.NewVectorsDense(v),
			Payload: qdrant.NewValueMap(map[string]any{"page_content": "order notes", "metadata": meta})}
	}
	if _, err := q.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Wait: aws.Bool(true), Points: []*qdrant.PointStruct{
		point(1, []float32{1, 0}, map[string]any{"customer_id": "cust-7"}),
		point(2, []float32{1, 0.01}, map[string]any{"source": "faq"}),     // an untagged copy
		point(3, []float32{0.99, 0.02}, map[string]any{"source": "wiki"}), // untagged, alike, someone else's
		point(4, []float32{0, 1}, map[string]any{"customer_id": "cust-77"}),
	}}); err != nil {
		t.Fatal(err)
	}
	acc := submit(t, sys, `{"tenant_id":"acme","subject_id":"cust-7","regulation":"GDPR"}`, "")
	rc := waitReceipt(t, sys, acc.RequestID)
	var listed []string
	for _, it := range rc.Review {
		if it.Store == "qdrant" && it.Kind == event.ReviewSimilar {
			listed = append(listed, it.Item)
		}
	}
	slices.Sort(listed)
	if rc.Status != event.ReceiptComplete || !slices.Equal(listed, []string{"2", "3"}) {
		t.Fatalf("receipt %s reviewing %+v; want COMPLETE listing points 2 and 3", rc.Status, rc.Review)
	}

	review := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(sys.BaseURL+"/v1/erasures/"+acc.RequestID+"/review", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := review(`{"store":"qdrant","item":"3","decision":"DISMISS"}`); code != http.StatusBadRequest || !strings.Contains(body, "reason") {
		t.Fatalf("dismiss without reason: %d %s, want 400 naming the reason", code, body)
	}
	if code, body := review(`{"store":"qdrant","item":"4","decision":"ERASE"}`); code != http.StatusBadRequest || !strings.Contains(body, "no item") {
		t.Fatalf("an item the receipt does not list: %d %s, want 400", code, body)
	}
	// A legal hold on the store stops an erase decision until its release.
	resp, err := http.Post(sys.BaseURL+"/v1/holds", "application/json",
		strings.NewReader(`{"tenant_id":"acme","subject_id":"cust-7","store":"qdrant","legal_basis":"GDPR Art. 17(3)(e)"}`))
	if err != nil {
		t.Fatal(err)
	}
	var hold struct {
		ID string `json:"hold_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&hold)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || hold.ID == "" {
		t.Fatalf("hold: %d %+v", resp.StatusCode, hold)
	}
	if code, body := review(`{"store":"qdrant","item":"2","decision":"ERASE"}`); code != http.StatusConflict || !strings.Contains(body, hold.ID) {
		t.Fatalf("an erase in a held store: %d %s, want 409 naming the hold", code, body)
	}
	if resp, err = http.Post(sys.BaseURL+"/v1/holds/"+hold.ID+"/release", "application/json", nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("release: %v %v", resp, err)
	}
	resp.Body.Close()
	code, body := review(`{"store":"qdrant","item":"2","decision":"erase","reason":"re-ingested FAQ answer quoting her order"}`)
	var out intake.ReviewResponse
	if code != http.StatusAccepted || json.Unmarshal([]byte(body), &out) != nil || out.Decision.Decision != event.ReviewErase {
		t.Fatalf("erase point 2: %d %s", code, body)
	}
	if code, body := review(`{"store":"qdrant","item":"3","decision":"DISMISS","reason":"wiki page, written by jane.doe@example.com, not hers"}`); code != http.StatusAccepted {
		t.Fatalf("dismiss point 3: %d %s", code, body)
	}

	var ads []auditlog.Addendum
	for deadline := time.Now().Add(20 * time.Second); len(ads) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ads, err = sys.Stack.Audit.AddendaOf(ctx, acc.RequestID); err != nil {
			t.Fatal(err)
		}
	}
	kinds := map[string]*auditlog.Addendum{}
	for i, ad := range ads {
		if ad.Review == nil {
			t.Fatalf("addendum %s without its review decision", ad.Type)
		}
		kinds[ad.Type+"/"+ad.Review.Item] = &ads[i]
	}
	erased, dismissed, done := kinds["REVIEWED/2"], kinds["REVIEWED/3"], kinds["ITEM_ERASED/2"]
	if len(ads) != 3 || erased == nil || dismissed == nil || done == nil {
		t.Fatalf("addenda %+v; want REVIEWED of 2 and 3 and ITEM_ERASED of 2", ads)
	}
	if done.Seq < erased.Seq || done.Stores[0].Deleted != 1 || done.Stores[0].Remaining != 0 || done.Pass != erased.Pass {
		t.Errorf("ITEM_ERASED %+v after REVIEWED %+v; want it to follow its decision, 1 deleted, 0 remaining", done, erased)
	}
	if dismissed.Review.Decision != event.ReviewDismiss || strings.Contains(dismissed.Review.Reason, "jane.doe@example.com") || !strings.Contains(dismissed.Review.Reason, "wiki page") {
		t.Errorf("dismissal recorded as %+v; want DISMISS with its reason, the address masked", dismissed.Review)
	}
	if err := auditlog.VerifyChain(ctx, sys.Stack.Audit, "acme"); err != nil {
		t.Fatalf("chain: %v", err)
	}
	if code, body := review(`{"store":"qdrant","item":"3","decision":"ERASE"}`); code != http.StatusConflict {
		t.Fatalf("a decided item decided again: %d %s, want 409", code, body)
	}
	pts, err := q.Get(ctx, &qdrant.GetPoints{CollectionName: coll, Ids: []*qdrant.PointId{qdrant.NewIDNum(2), qdrant.NewIDNum(3), qdrant.NewIDNum(4)}})
	if err != nil {
		t.Fatal(err)
	}
	var kept []uint64
	for _, p := range pts {
		kept = append(kept, p.GetId().GetNum())
	}
	slices.Sort(kept)
	if !slices.Equal(kept, []uint64{3, 4}) {
		t.Fatalf("points kept %v, want [3 4]: the erased copy gone, the dismissed copy and the bystander kept", kept)
	}
}
