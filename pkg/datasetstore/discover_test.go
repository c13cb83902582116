package datasetstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// TestDiscover seeds covered and uncovered datasets in S3 and in the dataset directory:
// discovery lists every uncovered one that looks personal, no covered one, no harmless
// one and no object that is no dataset, and its reports hold no raw value.
func TestDiscover(t *testing.T) {
	ctx := context.Background()
	c := newS3Client(t)
	w := s3World{c}
	type prow struct {
		Customer string `parquet:"customer_id"`
		Text     string `parquet:"text"`
	}
	var pq bytes.Buffer
	pw := parquet.NewGenericWriter[prow](&pq)
	_, _ = pw.Write([]prow{{"cust-31", "hello"}})
	_ = pw.Close()
	w.put(t, "acme/eval/qa.csv", []byte("customer_id,session_id,question\ncust-1,s1,jane.doe@example.com\n"))
	w.put(t, "acme/eval/old/qa.jsonl", []byte(`{"customer_id":"cust-1"}`+"\n"))
	w.put(t, "acme/exports/users-2026-11.csv", []byte("name,email\nJane,jane.doe@example.com\n"))
	w.put(t, "acme/exports/users-2026-12.csv", []byte("name,email\nJoe,joe@example.com\n"))
	w.put(t, "acme/exports/anna.schmidt@example.de.csv", []byte("name,email\nAnna,anna.schmidt@example.de\n"))
	w.put(t, "acme/exports/annaschmidt.csv", []byte("name,email\nAnna,anna.schmidt@example.de\n"))
	w.put(t, "legacy/transcripts.jsonl", []byte(`{"meta":{"session_id":"sess-cust-1"},"text":"hi"}`+"\n"))
	w.put(t, "notes.json", []byte(`[{"note":"reach me at jane.doe@example.com"}]`))
	w.put(t, "backup/part-0", pq.Bytes())
	w.put(t, "acme/exports/metrics.csv", []byte("day,count\n2026-11-30,17\n"))
	w.put(t, "acme/readme.txt", []byte("contact jane.doe@example.com"))
	root := t.TempDir()
	for name, data := range map[string]string{
		"datasets/acme/qa.csv": "customer_id,user_id\ncust-1,u1\n",
		"scratch/cust-9.csv":   "user_id,text\ncust-9,hi\n",
		"scratch/plain.jsonl":  `{"label":1}` + "\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inv := &inventory.Inventory{Version: "1", Stores: []inventory.Entry{
		testInventory("s3://"+testBucket+"/{tenant}/eval/", "datasets/{tenant}/"),
	}}
	got, err := New(c, root).Discover(ctx, inv, deletion.DiscoverOptions{Tenants: []string{"acme"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		reason string
		count  int64
	}{
		"s3://" + testBucket + "/{tenant}/exports/{id}.csv": {"identity-like columns email; values match personal-data patterns", 4},
		"s3://" + testBucket + "/legacy/{id}.jsonl":         {"identity-like columns session_id", 1},
		"s3://" + testBucket + "/{id}.json":                 {"values match personal-data patterns", 1},
		"s3://" + testBucket + "/backup/{id}":               {"identity-like columns customer_id", 1},
		"file://scratch/{id}.csv":                           {"identity-like columns user_id", 1},
	}
	if len(got) != len(want) {
		t.Errorf("discovered %d: %+v; want %d", len(got), got, len(want))
	}
	for _, u := range got {
		if w, ok := want[u.Location]; !ok || u.Reason != w.reason || u.Count != w.count || u.Kind != Kind {
			t.Errorf("discovered %+v; want %+v", u, w)
		}
		for _, raw := range []string{"jane", "Jane", "joe", "cust-", "sess-", "anna", "schmidt", "example"} {
			if strings.Contains(fmt.Sprint(u), raw) {
				t.Errorf("report %+v holds a raw value", u)
			}
		}
	}
}
