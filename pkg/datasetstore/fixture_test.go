package datasetstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/parquet-go/parquet-go"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

const testBucket = "lethe-datasets"

// world is a backend as the tests see it, through its own read and write path.
type world interface {
	// put writes key so that it holds exactly one version with data.
	put(t *testing.T, key string, data []byte)
	// versions returns the content of every version of key that holds data, current first
	// (nil when key does not exist).
	versions(t *testing.T, key string) [][]byte
}

// newS3Client serves an in-memory gofakes3 over HTTP and returns a client for it, with the
// bucket created and versioning enabled.
func newS3Client(t *testing.T) *s3.Client {
	return testenv.S3(t, testBucket).Client
}

// newS3ClientWith is newS3Client; without versioning the server cannot even list versions.
func newS3ClientWith(t *testing.T, versioning bool) *s3.Client {
	return testenv.S3With(t, testenv.S3Options{Unversioned: !versioning}, testBucket).Client
}

type s3World struct{ c *s3.Client }

// putVersion writes a new version of key and returns its id.
func (w s3World) putVersion(t *testing.T, key string, data []byte) string {
	t.Helper()
	out, err := w.c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: &key, Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.VersionId)
}

// put writes key and then deletes its older versions: the conformance suite counts the
// rows of current objects, so each Seed must leave one version (history is tested apart).
func (w s3World) put(t *testing.T, key string, data []byte) {
	t.Helper()
	w.putVersion(t, key, data)
	for _, v := range w.list(t, key) {
		if !aws.ToBool(v.IsLatest) {
			w.deleteVersion(t, key, aws.ToString(v.VersionId))
		}
	}
}

func (w s3World) deleteVersion(t *testing.T, key, id string) {
	t.Helper()
	_, err := w.c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(testBucket), Key: &key, VersionId: &id})
	if err != nil {
		t.Fatal(err)
	}
}

// list returns the data versions of exactly key.
func (w s3World) list(t *testing.T, key string) []types.ObjectVersion {
	t.Helper()
	out, err := w.c.ListObjectVersions(context.Background(), &s3.ListObjectVersionsInput{Bucket: aws.String(testBucket), Prefix: &key})
	if err != nil {
		t.Fatal(err)
	}
	var vs []types.ObjectVersion
	for _, v := range out.Versions {
		if aws.ToString(v.Key) == key {
			vs = append(vs, v)
		}
	}
	// Current first.
	slices.SortStableFunc(vs, func(a, b types.ObjectVersion) int {
		if aws.ToBool(a.IsLatest) == aws.ToBool(b.IsLatest) {
			return 0
		}
		if aws.ToBool(a.IsLatest) {
			return -1
		}
		return 1
	})
	return vs
}

func (w s3World) get(t *testing.T, key, id string) []byte {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: &key}
	if id != "" {
		in.VersionId = &id
	}
	out, err := w.c.GetObject(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (w s3World) versions(t *testing.T, key string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, v := range w.list(t, key) {
		out = append(out, w.get(t, key, aws.ToString(v.VersionId)))
	}
	return out
}

type dirWorld struct{ root string }

func (w dirWorld) put(t *testing.T, key string, data []byte) {
	t.Helper()
	p := filepath.Join(w.root, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

func (w dirWorld) versions(t *testing.T, key string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.root, filepath.FromSlash(key)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{b}
}

// row is one labelled example. Sessions holds one session for CSV, any number for JSONL.
type row struct {
	Customer string
	Sessions []string
	Text     string
}

// trickyText exercises quoting: commas, quotes, a newline, Unicode.
const trickyText = "said \"hi, there\"\nthen left — ünïcødé ✓, 日本語"

func renderCSV(t *testing.T, rows []row) []byte {
	t.Helper()
	return renderDelimited(t, rows, ',')
}

func renderDelimited(t *testing.T, rows []row, comma rune) []byte {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Comma = comma
	_ = w.Write([]string{"customer_id", "session_id", "question"})
	for _, r := range rows {
		_ = w.Write([]string{r.Customer, strings.Join(r.Sessions, ""), r.Text})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func renderJSONL(t *testing.T, rows []row) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, r := range rows {
		m := map[string]any{"question": r.Text, "label": 1}
		if r.Customer != "" {
			m["customer_id"] = r.Customer
		} else {
			m["customer_id"] = nil
		}
		if len(r.Sessions) > 0 {
			m["session_id"] = r.Sessions // an array: any element matches
		}
		line, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	return b.Bytes()
}

// prow is a fixture row as Parquet holds it: a legacy row has no customer, and the
// session column is repeated.
type prow struct {
	Customer *string  `parquet:"customer_id,optional"`
	Sessions []string `parquet:"session_id"`
	Question string   `parquet:"question"`
}

// render writes rows in the format key names (.csv, .tsv, .jsonl, .json for an array,
// .parquet, each also with .gz), with the format's own library.
func render(t *testing.T, key string, rows []row) []byte {
	t.Helper()
	if plain, ok := strings.CutSuffix(key, ".gz"); ok {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(render(t, plain, rows))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	switch path.Ext(key) {
	case ".csv":
		return renderCSV(t, rows)
	case ".tsv":
		return renderDelimited(t, rows, '\t')
	case ".json":
		var list []json.RawMessage
		for _, line := range bytes.Split(bytes.TrimSpace(renderJSONL(t, rows)), []byte("\n")) {
			if len(line) > 0 {
				list = append(list, line)
			}
		}
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	case ".parquet":
		var b bytes.Buffer
		w := parquet.NewGenericWriter[prow](&b, parquet.Compression(&parquet.Zstd))
		for _, r := range rows {
			p := prow{Sessions: r.Sessions, Question: r.Text}
			if r.Customer != "" {
				p.Customer = &r.Customer
			}
			if _, err := w.Write([]prow{p}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	return renderJSONL(t, rows)
}

// countRows counts, with the format's own library, the rows of s in a dataset.
func countRows(t *testing.T, key string, data []byte, s deletion.Subject) int {
	t.Helper()
	isID := func(v string) bool { return s.ID != "" && v == s.ID }
	isSession := func(v string) bool { return v != "" && slices.Contains(s.Sessions, v) }
	if plain, ok := strings.CutSuffix(key, ".gz"); ok {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		key = plain
	}
	n := 0
	switch path.Ext(key) {
	case ".csv", ".tsv":
		r := csv.NewReader(bytes.NewReader(data))
		if path.Ext(key) == ".tsv" {
			r.Comma = '\t'
		}
		recs, err := r.ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		for _, r := range recs[1:] {
			if isID(r[0]) || isSession(r[1]) {
				n++
			}
		}
		return n
	case ".parquet":
		rows, err := parquet.Read[prow](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		for _, r := range rows {
			if r.Customer != nil && isID(*r.Customer) || slices.ContainsFunc(r.Sessions, isSession) {
				n++
			}
		}
		return n
	}
	var objs []map[string]any
	if path.Ext(key) == ".json" {
		if err := json.Unmarshal(data, &objs); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if path.Ext(key) == ".json" || strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		objs = append(objs, m)
	}
	is := func(v any, want func(string) bool) bool {
		switch v := v.(type) {
		case string:
			return want(v)
		case []any:
			for _, e := range v {
				if e, ok := e.(string); ok && want(e) {
					return true
				}
			}
		}
		return false
	}
	for _, m := range objs {
		if is(m["customer_id"], isID) || is(m["session_id"], isSession) {
			n++
		}
	}
	return n
}

// fixture is the conformance fixture: per tenant a CSV and a JSONL dataset whose rows
// interleave the seeded subjects with other customers and legacy session-only rows.
type fixture struct {
	w      world
	keys   func(tenant string) []string // the tenant's dataset keys
	rows   map[string][]row             // current content per key
	filler int
}

func (f *fixture) seed(t *testing.T, s deletion.Subject, n int) int {
	t.Helper()
	for _, key := range f.keys(s.Tenant) {
		for i := 0; i < n; i++ {
			f.filler++
			other := fmt.Sprintf("filler-%d", f.filler)
			f.rows[key] = append(f.rows[key],
				row{Customer: other, Sessions: []string{"sess-" + other}, Text: trickyText},
				row{Customer: s.ID, Text: fmt.Sprintf("q%d %s", i, trickyText)},
				row{Sessions: []string{"legacy-" + other}, Text: "legacy, other"},
				row{Sessions: []string{s.Sessions[0]}, Text: "legacy\n" + trickyText},
			)
		}
		f.w.put(t, key, render(t, key, f.rows[key]))
	}
	return 2 * n * len(f.keys(s.Tenant))
}

func (f *fixture) count(t *testing.T, s deletion.Subject) int {
	t.Helper()
	n := 0
	for _, key := range f.keys(s.Tenant) {
		for _, v := range f.w.versions(t, key) {
			n += countRows(t, key, v, s)
		}
	}
	return n
}

func testInventory(prefixes ...string) inventory.Entry {
	return inventory.Entry{
		Name: "dataset",
		Kind: Kind,
		Locators: inventory.Locators{
			"prefixes":        prefixes,
			"subject_columns": []string{"customer_id"},
			"session_columns": []string{"session_id"},
		},
	}
}

// testLimits are the default limits.
var testLimits = Limits{}.WithDefaults()
