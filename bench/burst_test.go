package bench

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestCheckBurst checks the burst's verdict on the dataset after erasing: it accepts the
// seeded object minus exactly the erased subjects' rows and rejects every way of getting
// that wrong.
func TestCheckBurst(t *testing.T) {
	targets := burstTargets(10)
	erased, kept := targets[:7], targets[7:]
	before := DatasetCSV(burstTenant, targets, 500)
	var good bytes.Buffer
	for row := range bytes.Lines(before) {
		if !newErasedRows(erased).holds(row) {
			good.Write(row)
		}
	}
	lines := func(b []byte) [][]byte { return slices.Collect(bytes.Lines(b)) }
	join := func(rows [][]byte) []byte { return bytes.Join(rows, nil) }
	goodRows := lines(good.Bytes())
	otherRow := slices.IndexFunc(goodRows[1:], func(r []byte) bool { return bytes.HasPrefix(r, []byte("other-")) }) + 1
	cases := []struct {
		name  string
		after []byte
		want  string // "" when the check must pass
	}{
		{"exactly the erased rows removed", good.Bytes(), ""},
		{"an erased row left", join(slices.Insert(slices.Clone(goodRows), 3, []byte(strings.Replace(string(goodRows[otherRow]), "other-0000000@", "sub-0000002@", 1)))), "still holds an erased subject"},
		{"an erased session left under another id", join(slices.Insert(slices.Clone(goodRows), 3, []byte("x@example.test,s-sub-0000004-cur,q,a,0.9\n"))), "still holds an erased subject"},
		{"a kept subject's row removed too", join(slices.DeleteFunc(slices.Clone(goodRows), func(r []byte) bool { return bytes.HasPrefix(r, []byte(kept[0].ID+",")) })), "differs"},
		{"an unrelated row changed", bytes.Replace(good.Bytes(), []byte("0.9\n"), []byte("0.8\n"), 1), "differs"},
		{"an unrelated row dropped", join(slices.Delete(slices.Clone(goodRows), len(goodRows)-1, len(goodRows))), "rows left"},
		{"two rows swapped", func() []byte {
			r := slices.Clone(goodRows)
			r[1], r[2] = r[2], r[1]
			return join(r)
		}(), "differs"},
		{"nothing erased", before, "still holds an erased subject"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := checkBurst(before, c.after, erased)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("checkBurst: %v", err)
			case c.want == "" && n != len(lines(before))-1:
				t.Fatalf("checked %d rows, want %d", n, len(lines(before))-1)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("checkBurst = %v, want an error with %q", err, c.want)
			}
		})
	}
	if _, err := checkBurst(good.Bytes(), good.Bytes(), erased); err == nil || !strings.Contains(err.Error(), "held 0 rows") {
		t.Errorf("a seeded object without the erased rows: %v, want an error", err)
	}
}

// TestPutCounter checks that only the successful PUTs of the one object are counted, with
// their decoded sizes, and that the sizes give the rows each rewrite removed.
func TestPutCounter(t *testing.T) {
	status := http.StatusOK
	p := &putCounter{path: "/b/t/ragas_eval.csv"}
	srv := httptest.NewServer(p.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
	})))
	defer srv.Close()
	do := func(method, path string, size string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader("0123456789"))
		if err != nil {
			t.Fatal(err)
		}
		if size != "" {
			req.Header.Set("X-Amz-Decoded-Content-Length", size)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	do(http.MethodPut, "/b/t/ragas_eval.csv", "") // 10 bytes, its Content-Length
	do(http.MethodPut, "/b/t/ragas_eval.csv", "7")
	do(http.MethodPut, "/b/.lethe/summary/t/ragas_eval.csv", "5")
	do(http.MethodGet, "/b/t/ragas_eval.csv", "")
	status = http.StatusPreconditionFailed
	do(http.MethodPut, "/b/t/ragas_eval.csv", "1")
	status = http.StatusOK
	do(http.MethodPut, "/b/t/ragas_eval.csv?x-id=PutObject", "1")
	if got, want := p.since(0), []int64{10, 7, 1}; !slices.Equal(got, want) {
		t.Fatalf("sizes %v, want %v", got, want)
	}
	if got, want := subjectsPerRewrite(p.since(0), 3), []int64{1, 2}; !slices.Equal(got, want) {
		t.Errorf("rows per rewrite %v, want %v", got, want)
	}
	if got := subjectsPerRewrite([]int64{10, -1}, 3); got != nil {
		t.Errorf("rows per rewrite with an unknown size: %v, want none", got)
	}
}
