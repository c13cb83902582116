package datasetstore

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// TestEraseOldVersions: the subject's rows sit in three older versions and the current one
// of a dataset, in the only version of a dataset deleted since (its current version is a
// delete marker), and in a dataset whose key extends the first one's.
func TestEraseOldVersions(t *testing.T) {
	ctx := context.Background()
	c := newS3Client(t)
	w := s3World{c}
	victim := deletiontest.NewSubject("acme", "a")
	by := deletiontest.NewSubject("acme", "ab") // a prefix of the victim's id would match it
	vRow := row{Customer: "a", Text: "victim, " + trickyText}
	vLegacy := row{Sessions: []string{"sess-a"}, Text: "victim legacy"}
	bRow := row{Customer: "ab", Text: "bystander, " + trickyText}
	bLegacy := row{Sessions: []string{"sess-ab"}, Text: "bystander legacy"}

	const key = "acme/qa.csv"
	history := [][]row{
		{vRow, bRow},                   // v1: victim
		{bRow, bLegacy},                // v2: clean
		{bRow, vLegacy},                // v3: victim (legacy row only)
		{vRow, bRow, vLegacy},          // v4: victim
		{bRow, vRow, bLegacy, vLegacy}, // v5, current: victim
	}
	var ids []string
	for _, rows := range history {
		ids = append(ids, w.putVersion(t, key, renderCSV(t, rows)))
	}
	cleanID := ids[1]

	const gone = "acme/deleted.jsonl"
	w.putVersion(t, gone, renderJSONL(t, []row{vRow, bRow}))
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(testBucket), Key: aws.String(gone)}); err != nil {
		t.Fatal(err)
	}
	const longer = "acme/qa.csv.2024.csv" // objectstore.VersionsOf(key) must not take it for key
	w.putVersion(t, longer, renderCSV(t, []row{bRow, vRow}))
	w.putVersion(t, longer, renderCSV(t, []row{bRow}))

	store := New(c, "")
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	if v, err := store.Verify(ctx, st, victim); err != nil || v.Remaining != 1+1+2+2+1+1 {
		t.Fatalf("Verify before = %+v, %v; want 8 rows", v, err)
	}
	res, err := store.Erase(ctx, st, victim)
	if err != nil {
		t.Fatal(err)
	}
	want := []event.LocationCount{
		{Location: "s3://lethe-datasets/acme/", Deleted: 2},                // rows of v5
		{Location: "s3://lethe-datasets/acme/ (old versions)", Deleted: 5}, // v1, v3, v4, gone's, longer's
	}
	if !equalLocations(res.Locations, want) {
		t.Errorf("locations = %+v, want %+v", res.Locations, want)
	}
	if v, err := store.Verify(ctx, st, victim); err != nil || v.Remaining != 0 || v.Method != MethodRows {
		t.Errorf("Verify after = %+v, %v", v, err)
	}

	vs := w.list(t, key)
	var left []string
	for _, v := range vs {
		left = append(left, aws.ToString(v.VersionId))
	}
	if len(vs) != 2 || !slices.Contains(left, cleanID) {
		t.Errorf("versions left %v, want the rewritten current one and the clean v2 %s", left, cleanID)
	}
	if got := w.get(t, key, cleanID); !bytes.Equal(got, renderCSV(t, history[1])) {
		t.Errorf("clean version changed:\n%s", got)
	}
	if got, want := w.get(t, key, ""), renderCSV(t, []row{bRow, bLegacy}); !bytes.Equal(got, want) {
		t.Errorf("current = %q, want %q", got, want)
	}
	for _, k := range []string{key, gone, longer} {
		for _, v := range w.versions(t, k) {
			if n := countRows(t, k, v, victim); n != 0 {
				t.Errorf("%s: a version still holds %d victim rows", k, n)
			}
		}
	}
	if got := w.versions(t, longer); len(got) != 1 || countRows(t, longer, got[0], by) != 1 {
		t.Errorf("%s: want its current version with the bystander's row", longer)
	}
	if v, err := store.Verify(ctx, st, by); err != nil || v.Remaining != 5 {
		t.Errorf("bystander: Verify = %+v, %v; want 5 rows (v2, the current version, %s)", v, err, longer)
	}

	res, err = store.Erase(ctx, st, victim)
	if err != nil || res.Deleted() != 0 {
		t.Errorf("second Erase = %+v, %v; want nothing deleted", res, err)
	}
}

// TestS3WithoutVersionListing: a server that cannot list versions is served as an
// unversioned bucket.
func TestS3WithoutVersionListing(t *testing.T) {
	ctx := context.Background()
	c := newS3ClientWith(t, false)
	w := s3World{c}
	victim := deletiontest.NewSubject("acme", "a")
	w.putVersion(t, "acme/qa.csv", renderCSV(t, []row{{Customer: "a"}, {Customer: "ab"}, {Sessions: []string{"sess-a"}}}))
	w.putVersion(t, "acme/qa.jsonl", renderJSONL(t, []row{{Customer: "b"}}))
	store := New(c, "")
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	res, err := store.Erase(ctx, st, victim)
	if err != nil {
		t.Fatal(err)
	}
	want := []event.LocationCount{{Location: "s3://lethe-datasets/acme/", Deleted: 2}}
	if !equalLocations(res.Locations, want) {
		t.Errorf("locations = %+v, want %+v", res.Locations, want)
	}
	if got, want := w.get(t, "acme/qa.csv", ""), renderCSV(t, []row{{Customer: "ab"}}); !bytes.Equal(got, want) {
		t.Errorf("current = %q, want %q", got, want)
	}
	if v, err := store.Verify(ctx, st, victim); err != nil || v.Remaining != 0 {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}
