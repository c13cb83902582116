package event

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/iskorotkov/avro/v2"
	"github.com/iskorotkov/avro/v2/soe"
)

// withWriter returns a copy of t that also knows writer, as if writer were released.
func withWriter(t *testing.T, typ *Type, writer avro.Schema) *Type {
	t.Helper()
	c := *typ
	c.writers = maps.Clone(typ.writers)
	c.writers[string(fingerprintBytes(Fingerprint(writer)))] = writer
	return &c
}

// encodeSOE writes v with writer in single-object encoding, with the specification's
// fingerprint of writer.
func encodeSOE(t *testing.T, writer avro.Schema, v any) []byte {
	t.Helper()
	body, err := avro.Marshal(writer, v)
	if err != nil {
		t.Fatal(err)
	}
	return append(append(slices.Clone(soe.Magic), fingerprintBytes(Fingerprint(writer))...), body...)
}

// TestDecodeOlderWriter decodes records written with schema versions that were never
// released (so the type must be told about them) into the current Requested: fields the
// writer lacks take their schema defaults, fields the reader lacks are skipped, every other
// field survives.
func TestDecodeOlderWriter(t *testing.T) {
	sample := *goldens()[1].sample.(*Requested)
	tests := []struct {
		name string
		edit func(rec map[string]any)
		want func(r *Requested)
	}{
		{
			name: "before only_stores and attempt",
			edit: func(rec map[string]any) {
				removeField("only_stores")(rec)
				removeField("attempt")(rec)
			},
			want: func(r *Requested) { r.OnlyStores, r.Attempt = []string{}, 1 },
		},
		{
			name: "with a field since removed",
			edit: addField(map[string]any{"name": "legacy", "type": "string", "default": "gone"}),
			want: func(*Requested) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writer := editedSchema(t, "requested", tt.edit)
			data := encodeSOE(t, writer, &sample)

			var got Requested
			if err := Request.Decode(data, &got); !errors.Is(err, ErrUnknownSchema) {
				t.Fatalf("Decode with an unreleased writer: err = %v, want ErrUnknownSchema", err)
			}
			if err := withWriter(t, Request, writer).Decode(data, &got); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := sample
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

// TestDecodeReleased writes each sample with every released version of its schema and
// decodes it with the current type: every field the version has must survive.
func TestDecodeReleased(t *testing.T) {
	rel, err := Released()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens() {
		for i, writer := range rel[g.typ.Name()] {
			data := encodeSOE(t, writer, g.sample)
			got := g.fresh()
			if err := g.typ.Decode(data, got); err != nil {
				t.Fatalf("%s v%d: decode: %v", g.typ.Name(), i+1, err)
			}
			again := encodeSOE(t, writer, got)
			if !bytes.Equal(again, data) {
				t.Errorf("%s v%d: fields of the released version lost in decoding:\n got %+v\nwant %+v",
					g.typ.Name(), i+1, g.deref(got), g.deref(g.sample))
			}
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	intake, err := Intake.Encode(goldens()[0].sample)
	if err != nil {
		t.Fatal(err)
	}
	badMagic := slices.Clone(intake)
	badMagic[0] = 0
	unknownFP := slices.Clone(intake)
	copy(unknownFP[2:10], bytes.Repeat([]byte{0xff}, 8))

	tests := []struct {
		name string
		typ  *Type
		data []byte
		want error
	}{
		{"nil", Intake, nil, ErrMalformed},
		{"garbage", Intake, []byte("not an avro record"), ErrMalformed},
		{"missing magic", Intake, badMagic, ErrMalformed},
		{"body without header", Intake, intake[10:], ErrMalformed},
		{"magic only", Intake, intake[:2], ErrMalformed},
		{"truncated fingerprint", Intake, intake[:6], ErrMalformed},
		{"header only", Intake, intake[:10], ErrMalformed},
		{"truncated body", Intake, intake[:len(intake)/2], ErrMalformed},
		{"last byte missing", Intake, intake[:len(intake)-1], ErrMalformed},
		{"unknown fingerprint", Intake, unknownFP, ErrUnknownSchema},
		{"record of another type", Request, intake, ErrUnknownSchema},
		{"trailing bytes", Intake, append(slices.Clone(intake), 0), ErrMalformed},
		{"huge array count", Intake, hugeArray(t, 1<<40), ErrMalformed},
		{"negative array count overflow", Intake, hugeArray(t, math.MinInt64), ErrMalformed},
		{"hand-written record with a sized block (control)", Intake, intakeRecord(t, func(w *avro.Writer) {
			w.WriteString("t")
			w.WriteString("s")
			w.WriteLong(-1)
			w.WriteLong(2)
			w.WriteString("x")
			w.WriteLong(0)
			intakeTail(w, 1)
		}), nil},
		{"block size is not its items", Intake, intakeRecord(t, func(w *avro.Writer) {
			w.WriteString("t")
			w.WriteString("s")
			w.WriteLong(-1) // one item, then its byte size
			w.WriteLong(1)  // wrong: "x" takes 2 bytes
			w.WriteString("x")
			w.WriteLong(0)
			intakeTail(w, 0)
		}), ErrMalformed},
		{"enum index out of range", Intake, intakeRecord(t, func(w *avro.Writer) {
			w.WriteString("t")
			w.WriteString("s")
			w.WriteLong(0)
			intakeTail(w, 2)
		}), ErrMalformed},
		{"negative string length", Intake, intakeRecord(t, func(w *avro.Writer) { w.WriteLong(-5) }), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.typ.Decode(tt.data, new(IntakeRequest))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			other := ErrMalformed
			if tt.want == ErrMalformed {
				other = ErrUnknownSchema
			}
			if errors.Is(err, other) {
				t.Errorf("err = %v is both ErrMalformed and ErrUnknownSchema", err)
			}
		})
	}
}

// intakeRecord is an intake header followed by the body write writes.
func intakeRecord(t testing.TB, write func(w *avro.Writer)) []byte {
	var buf bytes.Buffer
	buf.Write(Intake.header)
	w := avro.NewWriter(&buf, 64)
	write(w)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hugeArray is an intake record of a dozen bytes whose session_ids block claims n items.
func hugeArray(t testing.TB, n int64) []byte {
	return intakeRecord(t, func(w *avro.Writer) {
		w.WriteString("t")
		w.WriteString("s")
		w.WriteLong(n)
		w.WriteString("x")
	})
}

// intakeTail writes the intake fields after session_ids with scope index scope.
func intakeTail(w *avro.Writer, scope int64) {
	w.WriteString("GDPR")
	w.WriteLong(scope)
	w.WriteString("key")
	w.WriteString("")
	w.WriteLong(0)
}

// FuzzDecode feeds arbitrary bytes to every type's Decode: it must never panic, and fail
// only with ErrMalformed or ErrUnknownSchema. A record that decodes must encode again and
// decode to the same value.
func FuzzDecode(f *testing.F) {
	for _, g := range goldens() {
		b, err := os.ReadFile(filepath.Join("testdata", g.typ.Name()+".golden"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(hugeArray(f, 1<<40))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, g := range goldens() {
			v := g.fresh()
			err := g.typ.Decode(data, v)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownSchema) {
					t.Fatalf("%s: unclassified error %v", g.typ.Name(), err)
				}
				continue
			}
			again, err := g.typ.Encode(v)
			if err != nil {
				t.Fatalf("%s: decoded %+v does not encode: %v", g.typ.Name(), g.deref(v), err)
			}
			w := g.fresh()
			if err := g.typ.Decode(again, w); err != nil {
				t.Fatalf("%s: re-encoded record does not decode: %v", g.typ.Name(), err)
			}
			if !reflect.DeepEqual(g.deref(v), g.deref(w)) {
				t.Fatalf("%s: round trip changed the value:\n %+v\n %+v", g.typ.Name(), g.deref(v), g.deref(w))
			}
		}
	})
}
