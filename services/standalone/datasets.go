package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/parquet-go/parquet-go"

	"github.com/lethe-erasure/lethe/pkg/embedded"
)

// demoRow is one labelled example of a demo dataset; an empty Customer is a legacy row
// that carries only the session id.
type demoRow struct {
	Customer string `json:"customer_id" parquet:"customer_id"`
	Session  string `json:"session_id" parquet:"session_id"`
	Question string `json:"question" parquet:"question"`
	Label    string `json:"label" parquet:"label"`
	Version  int64  `json:"v" parquet:"v"`
}

// demoDatasets are the tenant's dataset objects, one of each format the dataset store
// reads, each written by that format's own library.
var demoDatasets = []struct {
	key    string
	encode func([]demoRow) ([]byte, error)
	decode func([]byte) ([]demoRow, error)
}{
	{"ragas_eval.csv", delimitedRows(','), readDelimited(',')},
	{"ragas_eval_2025.csv.gz", gzipRows(delimitedRows(',')), gunzipRows(readDelimited(','))},
	{"feedback.tsv", delimitedRows('\t'), readDelimited('\t')},
	{"feedback_archive.tsv.gz", gzipRows(delimitedRows('\t')), gunzipRows(readDelimited('\t'))},
	{"intent_labels.jsonl", jsonLinesRows, readJSONLines},
	{"chat_exports.ndjson.gz", gzipRows(jsonLinesRows), gunzipRows(readJSONLines)},
	{"retrieval_eval.json", jsonArrayRows, readJSONArray},
	{"retrieval_eval_2025.json.gz", gzipRows(jsonArrayRows), gunzipRows(readJSONArray)},
	{"embeddings_audit.parquet", parquetRows, readParquet},
}

// seedDatasets writes every demo dataset twice (so the bucket holds an older version with
// the customer's rows as well), with every customer's rows and their legacy session rows.
func (a *app) seedDatasets(ctx context.Context) error {
	for version := int64(1); version <= 2; version++ {
		var rows []demoRow
		for _, c := range append([]customer{target}, bystanders...) {
			rows = append(rows,
				demoRow{c.id, c.sessions[0], "is this kurta, in \"blue\", available?", "yes, sizes S-XL", version},
				demoRow{"", c.sessions[len(c.sessions)-1], "legacy question\nover two lines", "order_status", version})
		}
		for _, d := range demoDatasets {
			body, err := d.encode(rows)
			if err != nil {
				return fmt.Errorf("encode %s: %w", d.key, err)
			}
			_, err = a.Stack.S3.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(embedded.DatasetBucket),
				Key:    aws.String(demoTenant + "/" + d.key),
				Body:   bytes.NewReader(body),
			})
			if err != nil {
				return fmt.Errorf("s3 put: %w", err)
			}
		}
	}
	return nil
}

// currentRows counts the rows of c in each current dataset object of the demo tenant,
// decoded by the format's own library.
func (a *app) currentRows(ctx context.Context, c customer) (map[string]int64, error) {
	out := map[string]int64{}
	for _, d := range demoDatasets {
		obj, err := a.Stack.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(embedded.DatasetBucket), Key: aws.String(demoTenant + "/" + d.key)})
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		if err != nil {
			return nil, err
		}
		rows, err := d.decode(b)
		if err != nil {
			return nil, fmt.Errorf("read back %s: %w", d.key, err)
		}
		for _, r := range rows {
			if r.Customer == c.id || slices.Contains(c.sessions, r.Session) {
				out[d.key]++
			}
		}
	}
	return out, nil
}

// datasetSummary says what the re-check read of the datasets.
func datasetSummary() string {
	var keys []string
	for _, d := range demoDatasets {
		keys = append(keys, d.key)
	}
	return fmt.Sprintf("re-read %d dataset objects with their formats' own libraries (%s): the customer's rows gone, every other customer's unchanged",
		len(keys), strings.Join(keys, ", "))
}

// datasetObject names one dataset object's count in a footprint.
func datasetObject(store, key string) string { return store + "/" + key }

// objectProblems lists the dataset objects where the customer's rows remain or another
// customer's rows changed.
func objectProblems(before, after map[string]footprint) []string {
	var bad []string
	var names []string
	for name := range before[target.id] {
		if strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if after[target.id][name] != 0 {
			bad = append(bad, fmt.Sprintf("%s (%s): %d rows of the customer remain", name, path.Ext(name), after[target.id][name]))
		}
		for _, c := range bystanders {
			if after[c.id][name] != before[c.id][name] || before[c.id][name] == 0 {
				bad = append(bad, fmt.Sprintf("%s: another customer had %d rows, now %d", name, before[c.id][name], after[c.id][name]))
			}
		}
	}
	if len(names) != len(demoDatasets) {
		bad = append(bad, fmt.Sprintf("seed: the customer had rows in %d of %d dataset objects", len(names), len(demoDatasets)))
	}
	return bad
}

func delimitedRows(comma rune) func([]demoRow) ([]byte, error) {
	return func(rows []demoRow) ([]byte, error) {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		w.Comma = comma
		_ = w.Write([]string{"customer_id", "session_id", "question", "label", "v"})
		for _, r := range rows {
			_ = w.Write([]string{r.Customer, r.Session, r.Question, r.Label, fmt.Sprint(r.Version)})
		}
		w.Flush()
		return b.Bytes(), w.Error()
	}
}

func readDelimited(comma rune) func([]byte) ([]demoRow, error) {
	return func(b []byte) ([]demoRow, error) {
		r := csv.NewReader(bytes.NewReader(b))
		r.Comma = comma
		recs, err := r.ReadAll()
		if err != nil || len(recs) == 0 {
			return nil, fmt.Errorf("no header: %w", err)
		}
		var out []demoRow
		for _, f := range recs[1:] {
			out = append(out, demoRow{Customer: f[0], Session: f[1], Question: f[2], Label: f[3]})
		}
		return out, nil
	}
}

func jsonLinesRows(rows []demoRow) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

func readJSONLines(b []byte) ([]demoRow, error) {
	var out []demoRow
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var r demoRow
		if err := dec.Decode(&r); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
}

func jsonArrayRows(rows []demoRow) ([]byte, error) { return json.MarshalIndent(rows, "", "  ") }

func readJSONArray(b []byte) (out []demoRow, err error) { return out, json.Unmarshal(b, &out) }

func parquetRows(rows []demoRow) ([]byte, error) {
	var b bytes.Buffer
	w := parquet.NewGenericWriter[demoRow](&b, parquet.Compression(&parquet.Zstd))
	if _, err := w.Write(rows); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func readParquet(b []byte) ([]demoRow, error) {
	return parquet.Read[demoRow](bytes.NewReader(b), int64(len(b)))
}

func gzipRows(enc func([]demoRow) ([]byte, error)) func([]demoRow) ([]byte, error) {
	return func(rows []demoRow) ([]byte, error) {
		plain, err := enc(rows)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(plain); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
}

func gunzipRows(dec func([]byte) ([]demoRow, error)) func([]byte) ([]demoRow, error) {
	return func(b []byte) ([]demoRow, error) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			return nil, err
		}
		return dec(plain)
	}
}
