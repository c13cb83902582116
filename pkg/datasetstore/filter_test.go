package datasetstore

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
)

func testMatcher(id string, sessions ...string) *matcher {
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
			if !errors.Is(err, errMalformed) {
				t.Errorf("err = %v, want errMalformed", err)
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
		if err == nil || errors.Is(err, errMalformed) {
			t.Errorf("format %d: err = %v, want a read error that is not errMalformed", f, err)
		}
	}
}

// TestMalformedObjectLeftUntouched: a dataset with a malformed row, and an object of no
// format the store reads, are neither rewritten nor stripped of their versions, the other
// datasets are erased, and the verification names each of them with its reason, so the
// store ends FAILED.
func TestMalformedObjectLeftUntouched(t *testing.T) {
	ctx := context.Background()
	victim := deletiontest.NewSubject("acme", "a")
	bad := map[string][]byte{
		"bad.csv":   []byte("customer_id,session_id,question\nb,s,ok\na,s,mine\nb,s,\"unterminated\n"),
		"bad.jsonl": []byte(`{"customer_id":"a"}` + "\n" + `{"customer_id":"b",}` + "\n"),
		"notes.bin": []byte("customer_id a\n"),
	}
	reasons := map[string]string{
		"bad.csv":   "extraneous or missing \" in quoted-field",
		"bad.jsonl": "line 2: not a json object",
		"notes.bin": "format not recognised",
	}
	good := renderCSV(t, []row{{Customer: "a"}, {Customer: "b"}})
	run := func(t *testing.T, fx func(*testing.T) (deletion.Store, string, world), s3 bool) {
		impl, prefix, w := fx(t)
		st := testInventory(prefix + "{tenant}/")
		for name, data := range bad {
			w.put(t, "acme/"+name, data)
			if s3 {
				w.(s3World).putVersion(t, "acme/"+name, data) // an older version with the rows
			}
		}
		w.put(t, "acme/good.csv", good)
		res, err := impl.Erase(ctx, st, victim)
		if err != nil {
			t.Fatal(err)
		}
		if res.Deleted() != 1 {
			t.Errorf("deleted %d, want the good dataset's row", res.Deleted())
		}
		for name, data := range bad {
			vs := w.versions(t, "acme/"+name)
			want := 1
			if s3 {
				want = 2
			}
			if len(vs) != want {
				t.Errorf("%s: %d versions, want %d", name, len(vs), want)
			}
			for _, v := range vs {
				if !bytes.Equal(v, data) {
					t.Errorf("%s was changed: %q", name, v)
				}
			}
		}
		if got := w.versions(t, "acme/good.csv"); len(got) != 1 || countRows(t, "good.csv", got[0], victim) != 0 {
			t.Errorf("good dataset not erased: %q", got)
		}
		v, err := impl.Verify(ctx, st, victim)
		if err != nil {
			t.Fatal(err)
		}
		if got := deletion.StatusOf(res, v); got != event.StatusFailed || v.Remaining != 0 {
			t.Errorf("status %s, verification %+v; want FAILED with nothing remaining", got, v)
		}
		versions := 1
		if s3 {
			versions = 2
		}
		if v.Unexamined != int64(len(bad)*versions) || len(v.UnexaminedItems) != len(bad)*versions {
			t.Errorf("unexamined %d %q, want %d", v.Unexamined, v.UnexaminedItems, len(bad)*versions)
		}
		for name, why := range reasons {
			n := 0
			for _, item := range v.UnexaminedItems {
				if strings.HasPrefix(item, prefix+"{tenant}/"+deletion.Shape(name)) && strings.Contains(item, why) {
					n++
				}
			}
			if n != versions {
				t.Errorf("%s named %d times with %q in %q", name, n, why, v.UnexaminedItems)
			}
		}
	}
	t.Run("s3", func(t *testing.T) {
		run(t, func(t *testing.T) (deletion.Store, string, world) {
			c := newS3Client(t)
			return New(c, ""), "s3://" + testBucket + "/", s3World{c}
		}, true)
	})
	t.Run("dir", func(t *testing.T) {
		run(t, func(t *testing.T) (deletion.Store, string, world) {
			w := dirWorld{t.TempDir()}
			return New(nil, w.root), "file://", w
		}, false)
	})
}
