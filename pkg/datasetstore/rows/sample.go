package rows

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/lethe-erasure/lethe/pkg/deletion"
)

// sampleParquet reads the column names and up to n rows' strings of the first
// row group of a Parquet dataset.
func sampleParquet(r io.Reader, n int, lim Limits) (fields, values []string, err error) {
	defer recovered(&err)
	pf, err := openParquet(r, lim)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pf.Schema().Columns() {
		fields = append(fields, strings.Join(p, "."))
	}
	if groups := pf.RowGroups(); len(groups) > 0 {
		rows := make([]parquet.Row, n)
		r := groups[0].Rows()
		n, _ := r.ReadRows(rows)
		r.Close()
		for _, row := range rows[:n] {
			for _, v := range row {
				if v.Kind() == parquet.ByteArray {
					values = append(values, string(v.ByteArray()))
				}
			}
		}
	}
	return fields, values, nil
}

// sampleBytes bounds what discovery reads of a text dataset's content: its first rows.
const sampleBytes = 1 << 20

// Sample reads up to n rows of the dataset key from body, within its first sampleBytes (a
// Parquet object: within lim), and returns their field names and values (JSON: the paths
// and values deletion.Walk gives). Content of no format this package reads gives none;
// only a failure to read a Parquet object is returned.
func Sample(key string, body io.Reader, n int, lim Limits) (fields, values []string, err error) {
	f, content, _, release, err := open(key, body, lim)
	defer release()
	if err != nil {
		return nil, nil, nil // not a dataset this package reads
	}
	in := io.LimitReader(content, min(sampleBytes, lim.Record))
	switch f {
	case formatCSV, formatTSV:
		cr := csv.NewReader(in)
		cr.FieldsPerRecord = -1
		if f == formatTSV {
			cr.Comma = '\t'
		}
		for i := 0; i <= n; i++ {
			rec, err := cr.Read()
			if err != nil {
				break
			}
			if i == 0 {
				fields = append(fields, rec...)
			} else {
				values = append(values, rec...)
			}
		}
	case formatJSONL:
		br := bufio.NewReader(in)
		var line []byte
		for i := 0; i < n; i++ {
			line, err = readLine(br, line, i+1, lim)
			var doc any
			if json.Unmarshal(line, &doc) == nil {
				f, v := deletion.Walk(doc)
				fields, values = append(fields, f...), append(values, v...)
			}
			if err != nil {
				break
			}
		}
	case formatJSONArray:
		dec := json.NewDecoder(in)
		if _, err := dec.Token(); err == nil {
			for i := 0; i < n && dec.More(); i++ {
				var doc any
				if dec.Decode(&doc) != nil {
					break
				}
				f, v := deletion.Walk(doc)
				fields, values = append(fields, f...), append(values, v...)
			}
		}
	case formatParquet:
		if fields, values, err = sampleParquet(content, n, lim); err != nil {
			if errors.Is(err, ErrMalformed) {
				return nil, nil, nil
			}
			return nil, nil, err
		}
	}
	return fields, values, nil
}
