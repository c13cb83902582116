package datasetstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// TestBoundedObjectsAreUnexamined: through the store, with summaries and mention
// redaction on, each object past a bound is unexamined with the bound named, is left byte
// for byte, and is never counted as holding nothing; the readable dataset is erased.
func TestBoundedObjectsAreUnexamined(t *testing.T) {
	const record = 64 << 10
	lim := Limits{Record: record, Decompressed: 256 << 10}
	big := strings.Repeat("x", record+4<<10+1) // past the record and what a parser reads ahead
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = io.WriteString(zw, "customer_id,question\n"+strings.Repeat("cust-2,hello there\n", 20_000)+"cust-1,mine\n")
	_ = zw.Close()
	all, _ := formatRows()
	objects := map[string]struct {
		data []byte
		want string
	}{
		"acme/big.csv":        {[]byte("customer_id,question\ncust-1," + big + "\ncust-2,ok\n"), "a record over the 64 KiB record bound"},
		"acme/big.tsv":        {[]byte("customer_id\tquestion\ncust-1\t" + big + "\n"), "a record over the 64 KiB record bound"},
		"acme/big.jsonl":      {[]byte(`{"customer_id":"cust-1","question":"` + big + `"}` + "\n"), "line 1 over the 64 KiB record bound"},
		"acme/big.json":       {[]byte(`[{"customer_id":"cust-1","question":"` + big + `"}]`), "an array element over the 64 KiB record bound"},
		"acme/big.csv.gz":     {gz.Bytes(), "the decompressed content over the 256 KiB decompressed bound"},
		"acme/big.parquet":    {parquetOf(t, pqformat.Zstd, strings.Repeat("a", record+1)), "a parquet page, decoded, over the 64 KiB record bound"},
		"acme/brotli.parquet": {parquetOf(t, pqformat.Brotli, strings.Repeat("a", 100)), "brotli pages are not read"},
	}
	c := newS3Client(t)
	w := s3World{c}
	for k, o := range objects {
		w.put(t, k, o.data)
	}
	w.put(t, "acme/good.csv", delimited(',').encode(t, all))
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	st.Locators = st.Locators.With("mentions", MentionsRedact)
	ctx := context.Background()
	victim := deletiontest.NewSubject("acme", "cust-1")
	rows := int64(countRows(t, "good.csv", delimited(',').encode(t, all), victim))
	for round := range 2 { // the second round reads through the summaries the first wrote
		store := New(c, "", withSummaries, WithLimits(lim))
		if n, err := store.Count(ctx, st, victim); err != nil || round == 0 && deletion.Total(n) != rows {
			t.Fatalf("count %+v, %v; want the good dataset's %d rows only", n, err, rows)
		}
		res, v := eraseAndVerify(t, store, st, victim)
		if got := deletion.StatusOf(res, v); got != event.StatusFailed || v.Remaining != 0 || v.Mentions != 0 {
			t.Fatalf("round %d: status %s, %+v; want FAILED, the good dataset erased", round, got, v)
		}
		if v.Unexamined != int64(len(objects)) {
			t.Fatalf("round %d: unexamined %d, want %d: %q", round, v.Unexamined, len(objects), v.UnexaminedItems)
		}
		for k, o := range objects {
			n := 0
			for _, item := range v.UnexaminedItems {
				if strings.Contains(item, o.want) {
					n++
				}
			}
			if n == 0 {
				t.Errorf("%s: no item names %q in %q", k, o.want, v.UnexaminedItems)
			}
			if got := w.versions(t, k); len(got) != 1 || !bytes.Equal(got[0], o.data) {
				t.Errorf("%s was changed", k)
			}
		}
	}
}

func TestSettings(t *testing.T) {
	env := map[string]string{"LETHE_DATASET_MAX_RECORD": "8MiB", "LETHE_DATASET_MAX_DECOMPRESSED": "1073741824"}
	var s Settings
	err := envconf.Load(&s, func(k string) string { return env[k] })
	if l := s.Limits(); err != nil || l != (Limits{Record: 8 << 20, Decompressed: 1 << 30, Parquet: DefaultMaxParquet}) || s.Summaries != "on" {
		t.Errorf("settings %+v, limits %+v, %v", s, l, err)
	}
	if err := envconf.Defaults(&s); err != nil || s.Limits() != (Limits{}).WithDefaults() {
		t.Errorf("default limits %+v, %v; want the package's defaults", s.Limits(), err)
	}
	for _, bad := range []string{"0", "-1", "8 MB", "lots", "9999999999GiB"} {
		env["LETHE_DATASET_MAX_PARQUET"] = bad
		if err := envconf.Load(&s, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "LETHE_DATASET_MAX_PARQUET") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	env = map[string]string{"LETHE_DATASET_SUMMARIES": "no"}
	if err := envconf.Load(&s, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "LETHE_DATASET_SUMMARIES") {
		t.Errorf("summaries no: %v", err)
	}
	var b strings.Builder
	if err := envconf.Print(&b, Settings{Summaries: "off", MaxRecord: 8 << 20, MaxDecompressed: 1 << 30, MaxParquet: 1000}); err != nil ||
		!strings.Contains(b.String(), "LETHE_DATASET_MAX_RECORD=8MiB\nLETHE_DATASET_MAX_DECOMPRESSED=1GiB\nLETHE_DATASET_MAX_PARQUET=1000\n") {
		t.Errorf("printed %q, %v", b.String(), err)
	}
}

// parquetOf is a Parquet file, compressed with codec, of one row whose column q0 holds
// text (without statistics, which would copy it to the footer).
func parquetOf(t *testing.T, codec pqformat.CompressionCodec, text string) []byte {
	t.Helper()
	type qa struct {
		CustomerID string `parquet:"customer_id"`
		Q0         string `parquet:"q0"`
	}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[qa](&b, parquet.Compression(parquet.LookupCompressionCodec(codec)),
		parquet.DataPageStatistics(false), parquet.SkipPageBounds("q0"))
	if _, err := w.Write([]qa{{"cust-2", text}}); err != nil || w.Close() != nil {
		t.Fatal("cannot write the parquet object")
	}
	return b.Bytes()
}
