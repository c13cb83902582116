package datasetstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// rec is one row of a dataset as the format's own library writes and reads it.
type rec struct {
	Customer string `json:"customer_id" parquet:"customer_id"`
	Session  string `json:"session_id" parquet:"session_id"`
	Question string `json:"question" parquet:"question"`
}

// codec writes rows with a format's standard library and reads them back with it.
type codec struct {
	encode func(t *testing.T, rows []rec) []byte
	decode func(t *testing.T, data []byte) []rec
}

func delimited(comma rune) codec {
	return codec{
		encode: func(t *testing.T, rows []rec) []byte {
			var b bytes.Buffer
			w := csv.NewWriter(&b)
			w.Comma = comma
			_ = w.Write([]string{"customer_id", "session_id", "question"})
			for _, r := range rows {
				_ = w.Write([]string{r.Customer, r.Session, r.Question})
			}
			w.Flush()
			if err := w.Error(); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		},
		decode: func(t *testing.T, data []byte) []rec {
			r := csv.NewReader(bytes.NewReader(data))
			r.Comma = comma
			all, err := r.ReadAll()
			if err != nil {
				t.Fatalf("the library cannot read the rewritten object: %v", err)
			}
			var out []rec
			for _, f := range all[1:] {
				out = append(out, rec{f[0], f[1], f[2]})
			}
			return out
		},
	}
}

var jsonLines = codec{
	encode: func(t *testing.T, rows []rec) []byte {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
		return b.Bytes()
	},
	decode: func(t *testing.T, data []byte) []rec {
		var out []rec
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			var r rec
			err := dec.Decode(&r)
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatalf("the library cannot read the rewritten object: %v", err)
			}
			out = append(out, r)
		}
	},
}

var jsonArray = codec{
	encode: func(t *testing.T, rows []rec) []byte {
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	},
	decode: func(t *testing.T, data []byte) []rec {
		var out []rec
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("the library cannot read the rewritten object: %v", err)
		}
		return out
	},
}

func parquetCodec(c pqformat.CompressionCodec) codec {
	return codec{
		encode: func(t *testing.T, rows []rec) []byte {
			var b bytes.Buffer
			w := parquet.NewGenericWriter[rec](&b, parquet.Compression(parquet.LookupCompressionCodec(c)), parquet.KeyValueMetadata("origin", "test"))
			if _, err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		},
		decode: func(t *testing.T, data []byte) []rec {
			out, err := parquet.Read[rec](bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("the library cannot read the rewritten object: %v", err)
			}
			return out
		},
	}
}

func gzipped(c codec) codec {
	return codec{
		encode: func(t *testing.T, rows []rec) []byte {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Name = "qa"
			_, _ = zw.Write(c.encode(t, rows))
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		},
		decode: func(t *testing.T, data []byte) []rec {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("the rewritten object is not gzip: %v", err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("the rewritten object does not decompress: %v", err)
			}
			if zr.Name != "qa" {
				t.Errorf("gzip header name %q, want it kept", zr.Name)
			}
			return c.decode(t, plain)
		},
	}
}

// formatCases are the dataset objects of every format, by name; names and contents
// exercise case-insensitive extensions and sniffing.
var formatCases = []struct {
	name, key string
	codec     codec
}{
	{"csv", "eval/qa.csv", delimited(',')},
	{"csv gzip", "eval/QA.CSV.GZ", gzipped(delimited(','))},
	{"csv gzip without .gz", "eval/hidden.csv", gzipped(delimited(','))},
	{"tsv", "eval/qa.tsv", delimited('\t')},
	{"tsv gzip", "eval/qa.tsv.gz", gzipped(delimited('\t'))},
	{"jsonl", "eval/qa.jsonl", jsonLines},
	{"ndjson gzip", "eval/qa.NDJSON.gz", gzipped(jsonLines)},
	{"json that is jsonl", "eval/lines.json", jsonLines},
	{"json array", "eval/qa.json", jsonArray},
	{"json array gzip", "eval/qa.json.gz", gzipped(jsonArray)},
	{"json array without extension", "eval/array", jsonArray},
	{"parquet zstd", "eval/qa.parquet", parquetCodec(pqformat.Zstd)},
	{"parquet snappy without extension", "eval/part-0000", parquetCodec(pqformat.Snappy)},
	{"parquet uncompressed", "eval/qa.PARQUET", parquetCodec(pqformat.Uncompressed)},
}

// formatRows interleaves the victim's rows (by id, by session) with other customers',
// including one whose id extends the victim's and one holding it in another column.
func formatRows() (all, kept []rec) {
	all = []rec{
		{"cust-2", "sess-cust-2", "other, \"quoted\"\n" + trickyText},
		{"cust-1", "sess-x", "mine"},
		{"cust-10", "sess-cust-10", "a longer id"},
		{"", "sess-cust-1", "legacy session row"},
		{"cust-3", "", "cust-1 in the text"},
		{"cust-1", "sess-cust-1", "mine again"},
	}
	for _, r := range all {
		if r.Customer != "cust-1" && r.Session != "sess-cust-1" {
			kept = append(kept, r)
		}
	}
	return all, kept
}

// TestEveryFormatErased: for each format, an object written by the format's library is
// erased and read back by that library: the victim's rows are gone, every other row is
// unchanged, compression and the parquet schema and codec are kept, and the store verifies
// clean.
func TestEveryFormatErased(t *testing.T) {
	ctx := context.Background()
	victim := deletiontest.NewSubject("acme", "cust-1")
	all, kept := formatRows()
	for _, tc := range formatCases {
		t.Run(tc.name, func(t *testing.T) {
			c := newS3Client(t)
			w := s3World{c}
			key := "acme/" + tc.key
			orig := tc.codec.encode(t, all)
			w.put(t, key, orig)
			store := New(c, "")
			st := testInventory("s3://" + testBucket + "/{tenant}/")
			if v, err := store.Verify(ctx, st, victim); err != nil || v.Remaining != 3 || v.Unexamined != 0 {
				t.Fatalf("Verify before = %+v, %v; want 3 rows", v, err)
			}
			res, err := store.Erase(ctx, st, victim)
			if err != nil {
				t.Fatal(err)
			}
			if res.Locations[0].Deleted != 3 {
				t.Errorf("deleted %+v, want 3 rows", res.Locations)
			}
			v, err := store.Verify(ctx, st, victim)
			// The row holding cust-1 in its text is a mention, left under the default policy.
			if err != nil || v.Remaining != 0 || v.Mentions != 1 || deletion.StatusOf(res, v) != event.StatusFailed {
				t.Errorf("Verify after = %+v, %v; want nothing remaining and the one mention", v, err)
			}
			got := w.versions(t, key)
			if len(got) != 1 {
				t.Fatalf("%d versions left, want the rewritten one", len(got))
			}
			if rows := tc.codec.decode(t, got[0]); !slices.Equal(rows, kept) {
				t.Errorf("rows after the erasure:\n%q\nwant\n%q", rows, kept)
			}
			if gzipMagic := []byte{0x1f, 0x8b}; bytes.HasPrefix(orig, gzipMagic) != bytes.HasPrefix(got[0], gzipMagic) {
				t.Error("compression not kept")
			}
			if bytes.HasPrefix(orig, []byte("PAR1")) {
				checkParquetKept(t, orig, got[0])
			}
			if res, err := store.Erase(ctx, st, victim); err != nil || res.Deleted() != 0 {
				t.Errorf("second Erase = %+v, %v; want nothing", res, err)
			}
		})
	}
}

// checkParquetKept checks that the rewrite kept the schema, the codec of every column and
// the key/value metadata.
func checkParquetKept(t *testing.T, before, after []byte) {
	t.Helper()
	open := func(b []byte) *parquet.File {
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b := open(before), open(after)
	if a.Schema().String() != b.Schema().String() {
		t.Errorf("schema\n%s\nbecame\n%s", a.Schema(), b.Schema())
	}
	codecs := func(f *parquet.File) (out []pqformat.CompressionCodec) {
		for _, c := range f.Metadata().RowGroups[0].Columns {
			out = append(out, c.MetaData.Codec)
		}
		return out
	}
	if !slices.Equal(codecs(a), codecs(b)) {
		t.Errorf("codecs %v became %v", codecs(a), codecs(b))
	}
	if v, ok := b.Lookup("origin"); !ok || v != "test" {
		t.Errorf("key/value metadata not kept: %q %v", v, ok)
	}
}

// TestGzipKeepsContentEncoding: a gzip object served with Content-Encoding: gzip is
// rewritten compressed, with the header kept, and a default client reads it.
func TestGzipKeepsContentEncoding(t *testing.T) {
	ctx := context.Background()
	c := newS3Client(t)
	all, kept := formatRows()
	gz := gzipped(delimited(','))
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:          aws.String(testBucket),
		Key:             aws.String("acme/qa.csv.gz"),
		Body:            bytes.NewReader(gz.encode(t, all)),
		ContentType:     aws.String("text/csv"),
		ContentEncoding: aws.String("gzip"),
	})
	if err != nil {
		t.Fatal(err)
	}
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	if _, err := New(c, "").Erase(ctx, st, deletiontest.NewSubject("acme", "cust-1")); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String("acme/qa.csv.gz")})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.ContentEncoding) != "gzip" || aws.ToString(out.ContentType) != "text/csv" {
		t.Errorf("headers %q %q not kept", aws.ToString(out.ContentEncoding), aws.ToString(out.ContentType))
	}
	if rows := gz.decode(t, data); !slices.Equal(rows, kept) {
		t.Errorf("rows %q, want %q", rows, kept)
	}
}

// TestUnreadableObjects: objects the store cannot decode are unexamined, with their name
// and reason, and left byte for byte; an excluded object is recorded and not read.
func TestUnreadableObjects(t *testing.T) {
	all, _ := formatRows()
	var truncated bytes.Buffer
	zw := gzip.NewWriter(&truncated)
	_, _ = zw.Write(delimited(',').encode(t, all))
	_ = zw.Close()
	pq := parquetCodec(pqformat.Snappy).encode(t, all)
	objects := map[string]struct {
		data   []byte
		reason string
	}{
		"broken.csv.gz":     {truncated.Bytes()[:truncated.Len()-12], "unexpected EOF"},
		"corrupt.parquet":   {append(append([]byte{}, pq[:len(pq)/2]...), pq[len(pq)/2+8:]...), "parquet"},
		"fake.parquet":      {[]byte("customer_id\ncust-1\n"), "no parquet magic number"},
		"object.json":       {[]byte("{\n  \"customer_id\": \"cust-1\"\n}\n"), "line 1: not a json object"},
		"array.json":        {[]byte(`[{"customer_id":"cust-1"}, 42]`), "element 2"},
		"photo.png":         {[]byte("\x89PNG\r\n\x1a\ncust-1"), "format not recognised"},
		"images/scan.bin":   {[]byte("cust-1"), "format not recognised"},
		"unterminated.json": {[]byte(`[{"customer_id":"cust-2"}`), "json array"},
	}
	c := newS3Client(t)
	w := s3World{c}
	for name, o := range objects {
		w.put(t, "acme/"+name, o.data)
	}
	w.put(t, "acme/logo.PNG", []byte("\x89PNG not read"))
	w.put(t, "acme/good.csv", delimited(',').encode(t, all))
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	st.Locators = st.Locators.With("exclude", []string{"*.png"})
	store := New(c, "", WithKey(deletiontest.Key))
	victim := deletiontest.NewSubject("acme", "cust-1")
	res, v := eraseAndVerify(t, store, st, victim)
	if got := deletion.StatusOf(res, v); got != event.StatusFailed || v.Remaining != 0 {
		t.Errorf("status %s, %+v; want FAILED with the good dataset erased", got, v)
	}
	names := deletion.NewItemNames(deletiontest.Key)
	name := func(rel string) string {
		return names.Name("s3://lethe-datasets/{tenant}/", rel, "s3://lethe-datasets/acme/"+rel)
	}
	wantExcluded := []string{name("logo.PNG"), name("photo.png")}
	slices.Sort(wantExcluded)
	if !slices.Equal(v.Excluded, wantExcluded) {
		t.Errorf("excluded %q, want %q", v.Excluded, wantExcluded)
	}
	delete(objects, "photo.png") // excluded: never read
	if v.Unexamined != int64(len(objects)) {
		t.Errorf("unexamined %d, want %d: %q", v.Unexamined, len(objects), v.UnexaminedItems)
	}
	for key, o := range objects {
		want := name(key) + ": "
		i := slices.IndexFunc(v.UnexaminedItems, func(s string) bool { return strings.HasPrefix(s, want) })
		if i < 0 || !strings.Contains(v.UnexaminedItems[i], o.reason) {
			t.Errorf("%s: not named with %q in %q", key, o.reason, v.UnexaminedItems)
		}
		if got := w.versions(t, "acme/"+key); len(got) != 1 || !bytes.Equal(got[0], o.data) {
			t.Errorf("%s was changed", key)
		}
	}
	for _, item := range v.UnexaminedItems {
		if strings.Contains(item, "cust-1") || strings.Contains(item, "acme") {
			t.Errorf("item %q names the subject or the tenant", item)
		}
	}
}
