package datasetstore

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
)

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
