package rows

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// FuzzFilterRows checks, against the standard library's own parsers, that filtering keeps
// every row that does not belong to the target, byte for byte and in order, drops every row
// that does, and counts what it dropped. Seed corpus: testdata/fuzz/FuzzFilterRows.
func FuzzFilterRows(f *testing.F) {
	f.Add([]byte("customer_id,session_id\na,s\nab,t\n\"a\",\"x\ny\"\n"), "a", "t", false)
	f.Add([]byte(`{"customer_id":"a"}`+"\n"+`{"customer_id":["ab","A"],"session_id":"s"}`+"\n"), "a", "s", true)
	f.Fuzz(func(t *testing.T, data []byte, target, session string, jsonl bool) {
		m := newMatcher([]string{"customer_id"}, []string{"session_id"}, target, []string{session})
		isID := func(v string) bool { return target != "" && v == target }
		isSession := func(v string) bool { return session != "" && v == session }
		fm := formatCSV
		if jsonl {
			fm = formatJSONL
		}
		var out bytes.Buffer
		n, err := filter(fm, bytes.NewReader(data), &out, m, testLimits)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error that is not ErrMalformed: %v", err)
			}
			return
		}
		if jsonl {
			checkJSONL(t, data, out.Bytes(), n, isID, isSession)
			return
		}
		checkCSV(t, data, out.Bytes(), n, isID, isSession)
	})
}

func checkCSV(t *testing.T, in, out []byte, n int, isID, isSession func(string) bool) {
	recs, err := csv.NewReader(bytes.NewReader(in)).ReadAll()
	if err != nil {
		t.Fatalf("filter accepted input the reference rejects: %v", err)
	}
	var want [][]string
	var subj, sess []int // every column of the name: a duplicated column matches in any copy
	for i, rec := range recs {
		if i == 0 {
			for j, name := range rec {
				if j == 0 {
					name = strings.TrimPrefix(name, "\ufeff")
				}
				if name == "customer_id" {
					subj = append(subj, j)
				}
				if name == "session_id" {
					sess = append(sess, j)
				}
			}
			want = append(want, rec)
			continue
		}
		mine := slices.ContainsFunc(subj, func(j int) bool { return isID(rec[j]) }) ||
			slices.ContainsFunc(sess, func(j int) bool { return isSession(rec[j]) })
		if !mine {
			want = append(want, rec)
		}
	}
	got, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("output does not parse: %v\n%q", err, out)
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("output rows differ\ngot  %q\nwant %q", got, want)
	}
	if n != len(recs)-len(want) {
		t.Fatalf("reported %d dropped, dropped %d", n, len(recs)-len(want))
	}
}

func checkJSONL(t *testing.T, in, out []byte, n int, isID, isSession func(string) bool) {
	lines := strings.SplitAfter(string(in), "\n")
	rest, dropped := string(out), 0
	for _, line := range lines {
		if line == "" {
			continue
		}
		mine, dup := refMatchJSON(t, line, isID, isSession)
		if strings.HasPrefix(rest, line) && !mine {
			rest = rest[len(line):]
			continue
		}
		// The line was dropped: it must belong to the target (or hold a duplicated key, one
		// of whose values may belong to the target though the reference sees only the last).
		if !mine && !dup {
			t.Fatalf("dropped a line of someone else: %q", line)
		}
		if strings.HasPrefix(rest, line) {
			t.Fatalf("kept a line of the target: %q", line)
		}
		dropped++
	}
	if rest != "" {
		t.Fatalf("output has bytes that are no kept input line: %q", rest)
	}
	if n != dropped {
		t.Fatalf("reported %d dropped, dropped %d", n, dropped)
	}
}

// refMatchJSON decodes one line with encoding/json into a map and reports whether it
// belongs to the target, and whether the object has a duplicated key.
func refMatchJSON(t *testing.T, line string, isID, isSession func(string) bool) (mine, dup bool) {
	if strings.TrimSpace(line) == "" {
		return false, false
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("filter accepted a line the reference rejects: %v", err)
	}
	has := func(v any, eq func(string) bool) bool {
		one := func(v any) bool {
			switch v := v.(type) {
			case string:
				return eq(v)
			case json.Number:
				return eq(string(v))
			}
			return false
		}
		if list, ok := v.([]any); ok {
			return slices.ContainsFunc(list, one)
		}
		return one(v)
	}
	mine = has(obj["customer_id"], isID) || has(obj["session_id"], isSession)
	// Count the top-level keys to spot duplicates.
	keys := 0
	dec = json.NewDecoder(strings.NewReader(line))
	_, _ = dec.Token()
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			break
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil && err != io.EOF {
			break
		}
		keys++
	}
	return mine, keys != len(obj)
}

// FuzzFilterJSONArray checks, against encoding/json, that filtering a JSON array keeps a
// valid array whose elements are the input's other elements, byte for byte and in order,
// drops every element that belongs to the target, and counts what it dropped.
func FuzzFilterJSONArray(f *testing.F) {
	f.Add([]byte(`[{"customer_id":"a"}, {"customer_id":"b","session_id":["s"]},`+"\n"+`{"customer_id":1}]`), "a", "s")
	f.Add([]byte(" [\n] \n"), "a", "")
	f.Add([]byte(`[{"customer_id":"b"},{"customer_id":"a","x":{"y":[1,{"z":"a"}]}}]`), "a", "t")
	f.Fuzz(func(t *testing.T, data []byte, target, session string) {
		m := newMatcher([]string{"customer_id"}, []string{"session_id"}, target, []string{session})
		isID := func(v string) bool { return target != "" && v == target }
		isSession := func(v string) bool { return session != "" && v == session }
		var out bytes.Buffer
		n, err := filter(formatJSONArray, bytes.NewReader(data), &out, m, testLimits)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error that is not ErrMalformed: %v", err)
			}
			return
		}
		var in, kept []json.RawMessage
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatalf("filter accepted an array the reference rejects: %v", err)
		}
		if err := json.Unmarshal(out.Bytes(), &kept); err != nil {
			t.Fatalf("output is no json array: %v\n%q", err, out.Bytes())
		}
		dropped := 0
		for _, e := range in {
			mine, dup := refMatchJSON(t, string(e), isID, isSession)
			if len(kept) > 0 && bytes.Equal(kept[0], e) && !mine {
				kept = kept[1:]
				continue
			}
			if !mine && !dup {
				t.Fatalf("dropped an element of someone else: %q", e)
			}
			dropped++
		}
		if len(kept) != 0 {
			t.Fatalf("output has elements that are no kept input element: %q", kept)
		}
		if n != dropped {
			t.Fatalf("reported %d dropped, dropped %d", n, dropped)
		}
	})
}

// refLZ4 decodes an LZ4 block as the Parquet library's decoder does, into exactly the
// room it needs, or fails.
func refLZ4(b []byte) ([]byte, bool) {
	var out []byte
	ext := func(i, n int) (int, int, bool) {
		for {
			if i >= len(b) {
				return i, n, false
			}
			x := int(b[i])
			i++
			n += x
			if x != 0xFF {
				return i, n, true
			}
		}
	}
	for i := 0; i < len(b); {
		token := b[i]
		i++
		lit := int(token >> 4)
		var ok bool
		if lit == 15 {
			if i, lit, ok = ext(i, lit); !ok {
				return nil, false
			}
		}
		if lit > len(b)-i {
			return nil, false
		}
		out = append(out, b[i:i+lit]...)
		i += lit
		if i == len(b) && token&0xF == 0 {
			break
		}
		if i+2 > len(b) {
			return nil, false
		}
		off := int(b[i]) | int(b[i+1])<<8
		i += 2
		if off == 0 || off > len(out) {
			return nil, false
		}
		n := int(token & 0xF)
		if n == 15 {
			if i, n, ok = ext(i, n); !ok {
				return nil, false
			}
		}
		for range n + 4 {
			out = append(out, out[len(out)-off])
		}
	}
	return out, true
}

// FuzzLZ4Size checks that every LZ4 block lz4Size accepts decodes to exactly the size it
// reads, by a reference decoder and then by the Parquet library's codec: that codec grows
// its output without end on a block it rejects, so lz4Size must reject every such block.
func FuzzLZ4Size(f *testing.F) {
	for _, s := range []string{"", "abcabcabcabcabcabcabcabc", strings.Repeat("customer_id,cust-1\n", 40)} {
		enc, _ := parquet.LookupCompressionCodec(pqformat.Lz4Raw).Encode(nil, []byte(s))
		f.Add(enc)
	}
	f.Add([]byte{0x14, 'a', 0x01, 0x00})
	f.Add([]byte{0x1F, 'a', 0x01, 0x00, 0xFF, 0x10})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := lz4Size(b, 1<<20)
		if err != nil || n > 1<<20 {
			return
		}
		ref, ok := refLZ4(b)
		if !ok || int64(len(ref)) != n {
			t.Fatalf("lz4Size accepted %d bytes the reference decodes to %d, %v", n, len(ref), ok)
		}
		out, err := parquet.LookupCompressionCodec(pqformat.Lz4Raw).Decode(nil, b)
		if err != nil || !bytes.Equal(out, ref) {
			t.Fatalf("the codec decodes to %d bytes, %v; want %d", len(out), err, n)
		}
	})
}

// FuzzZstdSize checks that what zstdSize reads from zstd frame headers bounds what the
// Parquet library's codec decompresses them to.
func FuzzZstdSize(f *testing.F) {
	for _, s := range []string{"", "abc", strings.Repeat("customer_id,cust-1\n", 40000)} {
		enc, _ := parquet.LookupCompressionCodec(pqformat.Zstd).Encode(nil, []byte(s))
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := zstdSize(b, 1<<20)
		if err != nil || n > 1<<20 {
			return
		}
		out, err := parquet.LookupCompressionCodec(pqformat.Zstd).Decode(nil, b)
		if err == nil && int64(len(out)) > n {
			t.Fatalf("zstdSize read %d bytes, the codec decompressed %d", n, len(out))
		}
	})
}
