package rows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
)

func testMatcher(id string, sessions ...string) *Match {
	return newMatcher([]string{"customer_id", "owner"}, []string{"session_id"}, id, sessions)
}

// seg is a piece of a dataset and whether the filter must drop it.
type seg struct {
	raw  string
	drop bool
}

func join(segs []seg, dropped bool) string {
	var b strings.Builder
	for _, s := range segs {
		if dropped || !s.drop {
			b.WriteString(s.raw)
		}
	}
	return b.String()
}

func TestFilterKeepsEveryOtherRowByteForByte(t *testing.T) {
	csvSegs := []seg{
		{raw: "\ufeffcustomer_id,session_id,question,owner\r\n", drop: false},
		{raw: "b,s1,\"comma, and \"\"quotes\"\"\",x\r\n", drop: false},
		{raw: "a,s2,\"line one\r\nline two — ünïcødé ✓\",x\r\n", drop: true},
		{raw: "\r\n", drop: false}, // a blank line travels with the next record
		{raw: "A,s3,case differs,x\r\n", drop: false},
		{raw: "\"a\",s4,quoted id,x\n", drop: true},
		{raw: "ab,s5,prefix of another id,a b\n", drop: false},
		{raw: ",sess-a,legacy session row,\n", drop: true},
		{raw: "c,s6,owner column,a\n", drop: true},
		{raw: "\" a\",s7,space is part of the id,x\n", drop: false},
		{raw: "d,sess-a ,session with a space,x", drop: false}, // no final newline
	}
	jsonSegs := []seg{
		{raw: `{"customer_id":"b","question":"x, \"y\"\nz"}` + "\n"},
		{raw: `{"customer_id":"a","question":"ünïcødé"}` + "\n", drop: true},
		{raw: `{"customer_id":"\u0061","question":"escaped id"}` + "\r\n", drop: true},
		{raw: "   \n"},
		{raw: `{"customer_id":["x","a"],"question":"array"}` + "\n", drop: true},
		{raw: `{"customer_id":["x","ab"],"question":"array, no match"}` + "\n"},
		{raw: `{"customer_id":{"id":"a"},"question":"nested object does not match"}` + "\n"},
		{raw: `{"customer_id":"A","question":"case"}` + "\n"},
		{raw: `{"customer_id":null,"session_id":["other","sess-a"]}` + "\n", drop: true},
		{raw: `{"customer_id":"b","customer_id":"a"}` + "\n", drop: true}, // any occurrence
		{raw: `{"question":"customer_id a","customer":"a"}` + "\n"},
		{raw: `{"customer_id":"a "}`},
	}
	m := testMatcher("a", "sess-a")
	for _, tc := range []struct {
		name string
		f    format
		segs []seg
	}{{"csv", formatCSV, csvSegs}, {"jsonl", formatJSONL, jsonSegs}} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			n, err := filter(tc.f, strings.NewReader(join(tc.segs, true)), &out, m, testLimits)
			if err != nil {
				t.Fatal(err)
			}
			want, drops := join(tc.segs, false), 0
			for _, s := range tc.segs {
				if s.drop {
					drops++
				}
			}
			if n != drops || out.String() != want {
				t.Errorf("dropped %d rows, want %d\ngot:\n%q\nwant:\n%q", n, drops, out.String(), want)
			}
			if n, err := filter(tc.f, strings.NewReader(want), nil, m, testLimits); err != nil || n != 0 {
				t.Errorf("filtering the result again: %d, %v", n, err)
			}
		})
	}
}

func TestFilterLongLines(t *testing.T) {
	long := strings.Repeat("ü,\"x\n", 50_000) // 300 kB, beyond every buffer
	var csvIn, jsonIn strings.Builder
	csvIn.WriteString("customer_id,question\n")
	jsonIn.WriteString(`{"customer_id":"b","q":"` + strings.Repeat("ü", 100_000) + "\"}\n")
	for _, id := range []string{"b", "a", "b"} {
		csvIn.WriteString(id + ",\"" + strings.ReplaceAll(long, `"`, `""`) + "\"\n")
		jsonIn.WriteString(`{"customer_id":"` + id + `","q":"` + strings.Repeat("x", 200_000) + "\"}\n")
	}
	for _, tc := range []struct {
		f    format
		in   string
		keep int
	}{{formatCSV, csvIn.String(), 3}, {formatJSONL, jsonIn.String(), 3}} {
		var out bytes.Buffer
		n, err := filter(tc.f, strings.NewReader(tc.in), &out, testMatcher("a"), testLimits)
		if err != nil || n != 1 {
			t.Fatalf("format %d: dropped %d, %v", tc.f, n, err)
		}
		if got := len(strings.SplitAfter(out.String(), "\n")); out.Len() >= len(tc.in) || got < tc.keep {
			t.Errorf("format %d: output %d bytes of %d", tc.f, out.Len(), len(tc.in))
		}
	}
}

func TestFilterMalformed(t *testing.T) {
	m := testMatcher("a", "sess-a")
	for _, tc := range []struct {
		name string
		f    format
		in   string
	}{
		{"csv bare quote", formatCSV, "customer_id,q\na,x\"y\n"},
		{"csv unterminated quote", formatCSV, "customer_id,q\nb,\"open\n"},
		{"csv field count", formatCSV, "customer_id,q\na,x\nb,x,extra\n"},
		{"jsonl invalid", formatJSONL, `{"customer_id":"b"}` + "\n{customer_id: a}\n"},
		{"jsonl array line", formatJSONL, `["a"]` + "\n"},
		{"jsonl two objects", formatJSONL, `{"customer_id":"a"} {"customer_id":"b"}` + "\n"},
		{"jsonl trailing garbage", formatJSONL, `{"customer_id":"b"}x` + "\n"},
		{"jsonl truncated", formatJSONL, `{"customer_id":"a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := filter(tc.f, strings.NewReader(tc.in), &bytes.Buffer{}, m, testLimits)
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("err = %v, want ErrMalformed", err)
			}
			if err != nil && strings.Contains(err.Error(), "sess-a") {
				t.Errorf("error %q holds an identifier", err)
			}
		})
	}
}

type failingReader struct{ after int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.after <= 0 {
		return 0, errors.New("connection reset")
	}
	n := min(len(p), r.after)
	for i := range p[:n] {
		p[i] = "x,"[i%2]
	}
	r.after -= n
	return n, nil
}

func TestFilterReadErrorIsNotMalformed(t *testing.T) {
	for _, f := range []format{formatCSV, formatJSONL} {
		_, err := filter(f, &failingReader{after: 10_000}, nil, testMatcher("a"), testLimits)
		if err == nil || errors.Is(err, ErrMalformed) {
			t.Errorf("format %d: err = %v, want a read error that is not ErrMalformed", f, err)
		}
	}
}

// TestNestedPathMatching pins the JSON path rules on single objects.
func TestNestedPathMatching(t *testing.T) {
	m := newMatcher([]string{"metadata.customer_id", "a.b.c"}, nil, "x", nil)
	for _, tc := range []struct {
		obj  string
		want bool
	}{
		{`{"metadata":{"customer_id":"x"}}`, true},
		{`{"metadata":{"customer_id":["y","x"]}}`, true},
		{`{"metadata":{"customer_id":"y"},"metadata":{"customer_id":"x"}}`, true}, // any duplicate
		{`{"metadata.customer_id":"x"}`, true},                                    // the flat name
		{`{"a":{"b":{"c":"x"}}}`, true},
		{`{"a":{"b":{"c":{"d":"x"}}}}`, false},
		{`{"a":{"b.c":"x"}}`, true},
		{`{"customer_id":"x"}`, false},
		{`{"metadata":{"other":"x"}}`, false},
		{`{"metadata":"x"}`, false},
		{`{"metadata":[{"customer_id":"x"}]}`, false},
		{`{"metadatax":{"customer_id":"x"}}`, false},
	} {
		got, err := matchJSONL([]byte(tc.obj), m)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.obj, got, err, tc.want)
		}
	}
}

// TestJSONArrayLayout: dropping elements keeps the bytes around the others and a valid
// array, whichever elements go.
func TestJSONArrayLayout(t *testing.T) {
	m := testMatcher("a")
	for _, tc := range []struct{ in, want string }{
		{`[{"customer_id":"a"}, {"customer_id":"b"},` + "\n" + ` {"customer_id":"a"}]`, `[ {"customer_id":"b"}]`},
		{"[\n  {\"customer_id\":\"b\", \"q\": \"x,y\"},\n  {\"customer_id\":\"a\"},\n  {\"customer_id\":\"c\"}\n]\n", "[\n  {\"customer_id\":\"b\", \"q\": \"x,y\"},\n  {\"customer_id\":\"c\"}\n]\n"},
		{`[{"customer_id":"a"},{"customer_id":"a"}]`, `[]`},
		{` [ ] `, ` [ ] `},
		{`[{"customer_id":1},{"customer_id":"b","n":[1,2]}]`, `[{"customer_id":1},{"customer_id":"b","n":[1,2]}]`},
	} {
		var out strings.Builder
		if _, err := filter(formatJSONArray, strings.NewReader(tc.in), &out, m, testLimits); err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if out.String() != tc.want || !json.Valid([]byte(out.String())) {
			t.Errorf("%q\n became %q\n want   %q", tc.in, out.String(), tc.want)
		}
	}
}

// Filtering a CSV far larger than the recorder's array, read in uneven pieces, copies every
// kept row byte for byte: the recorder reuses its array without losing a byte not taken.
func TestRecorderReusesItsArray(t *testing.T) {
	var in, want bytes.Buffer
	in.WriteString("customer_id,text\n")
	want.WriteString("customer_id,text\n")
	dropped := 0
	for i := range 20_000 {
		row := fmt.Sprintf("cust-%d,\"row %d, %s\"\n", i%7, i, strings.Repeat("x", i%300))
		in.WriteString(row)
		if i%7 != 3 {
			want.WriteString(row)
		} else {
			dropped++
		}
	}
	var out bytes.Buffer
	m := newMatcher([]string{"customer_id"}, nil, "cust-3", nil)
	n, err := filter(formatCSV, iotest.HalfReader(&in), &out, m, testLimits)
	if err != nil || n != dropped {
		t.Fatalf("filter = %d rows, %v", n, err)
	}
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Errorf("output differs from the kept rows (%d bytes, want %d)", out.Len(), want.Len())
	}
}
