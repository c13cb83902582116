package event

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current samples")

// at is a fixed UTC instant with millisecond precision (timestamp-millis keeps no more).
func at(day, hour, minute, second, milli int) time.Time {
	return time.Date(2026, time.November, day, hour, minute, second, milli*int(time.Millisecond), time.UTC)
}

// golden is one event type with a fully populated sample value; every field is non-zero so
// that a field the codec drops or mangles shows up in the round trip.
type golden struct {
	typ    *Type
	sample any             // pointer to the sample value
	fresh  func() any      // a new zero value to decode into
	deref  func(v any) any // *T -> T, for comparisons
}

func goldens() []golden {
	return []golden{
		{
			typ: Intake,
			sample: &IntakeRequest{
				TenantID:       "acme",
				SubjectID:      "cust-42",
				SessionIDs:     []string{"sess-1", "sess-2"},
				Regulation:     "GDPR",
				Scope:          ScopeSubject,
				IdempotencyKey: "idem-0001",
				Source:         "shopbot",
				SubmittedAt:    at(30, 9, 15, 30, 123),
			},
			fresh: func() any { return new(IntakeRequest) },
			deref: func(v any) any { return *v.(*IntakeRequest) },
		},
		{
			typ: Request,
			sample: &Requested{
				RequestID:   "req-0001",
				TenantID:    "acme",
				SubjectHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
				KeyID:       "key-2026-11",
				Identifiers: Identifiers{
					SubjectID:  "cust-42",
					SessionIDs: []string{"sess-1", "sess-2"},
				},
				Sealed:           &SealedIdentifiers{KEKID: "kek1", Nonce: []byte("0123456789ab"), Ciphertext: []byte("sealed")},
				Scope:            ScopeTenant,
				Regulation:       "GDPR",
				RequestedAt:      at(30, 9, 15, 31, 7),
				DueAt:            at(30, 9, 15, 31, 7).AddDate(0, 0, 30),
				InventoryVersion: "2026-11-30.1",
				ExpectedStores:   []string{"qdrant", "redis", "langgraph", "dataset", "audit_log"},
				OnlyStores:       []string{"redis"},
				Attempt:          2,
				SessionHashes:    []string{"5c1f0e0a", "77aa01b2"},
				Purpose:          PurposeSweep,
				Pass:             "sweep-2",
				DryRun:           true,
				Exempt:           []Exemption{{Store: "dataset", HoldID: "hold-1", LegalBasis: "GDPR Art. 17(3)(e)"}},
				Review:           &ReviewDecision{Store: "qdrant", Kind: ReviewSimilar, Item: "17", Decision: ReviewDismiss, Reason: "another customer's order"},
			},
			fresh: func() any { return new(Requested) },
			deref: func(v any) any { return *v.(*Requested) },
		},
		{
			typ: Done,
			sample: &StoreDone{
				RequestID: "req-0001",
				TenantID:  "acme",
				Store:     "redis",
				Kind:      "redis",
				Status:    StatusFailed,
				Locations: []LocationCount{
					{Location: "session:acme:{subject}:*", Deleted: 12},
					{Location: "cache:acme:{subject}:*", Deleted: 3},
				},
				Verification: Verification{
					Method: "scan", Remaining: 1, Unexamined: 2,
					UnexaminedItems:    []string{"index:acme:{subject}: WRONGTYPE", "cache:acme:{subject}:7: read timeout"},
					Excluded:           []string{"blob:acme:{subject}:*"},
					Attestation:        "att-7f3a",
					Mentions:           3,
					Similar:            []string{"17", "5c56c793-69f3-4fbf-87e6-c4bf54c28c26"},
					DiscoveryRunAt:     ptr(at(30, 8, 0, 0, 250)),
					DiscoveryUncovered: 2,
					OutsideInventory:   []OutsideLocation{{Location: "crm:{tenant}:{id}", Found: 1, Unexamined: "bound reached", Suggest: "name: crm"}},
				},
				Physical:   "AOF keeps values until rewrite",
				Attempt:    3,
				StartedAt:  at(30, 9, 15, 32, 0),
				FinishedAt: at(30, 9, 15, 32, 999),
				Error:      "verify: 1 key remains",
				Purpose:    PurposeReapply,
				Pass:       "reapply-20261130T0915Z",
				DryRun:     true,
				FoundRuns:  []string{"3f2b9c1e-run"},
			},
			fresh: func() any { return new(StoreDone) },
			deref: func(v any) any { return *v.(*StoreDone) },
		},
		{
			typ: Completed,
			sample: &Receipt{
				ReceiptID:        "rcpt-0001",
				RequestID:        "req-0001",
				TenantID:         "acme",
				SubjectHash:      "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
				KeyID:            "key-2026-11",
				Scope:            ScopeSubject,
				Regulation:       "GDPR",
				RequestedAt:      at(30, 9, 15, 31, 7),
				CompletedAt:      at(30, 9, 16, 0, 500),
				DueAt:            at(30, 9, 15, 31, 7).AddDate(0, 0, 30),
				ElapsedMS:        29493,
				InventoryVersion: "2026-11-30.1",
				Stores: []StoreEvidence{
					{
						Store: "qdrant", Kind: "qdrant", Status: StatusDeleted, Deleted: 5,
						Locations: []LocationCount{{Location: "shopbot_acme", Deleted: 5}},
						Verification: Verification{
							Method: "count", Remaining: 0x7fffffff, Unexamined: 1,
							UnexaminedItems: []string{"shopbot_acme: unreadable"}, Excluded: []string{"shopbot_acme_old"},
							Attestation: "att-1", Mentions: 1, Similar: []string{"9"},
							DiscoveryRunAt: ptr(at(30, 7, 0, 0, 0)), DiscoveryUncovered: 1,
							OutsideInventory: []OutsideLocation{{Location: "kb_{tenant}/metadata.customer_id", Found: 6, Unexamined: "timeout", Suggest: "name: kb"}},
						},
						Physical:           "vacuum pending",
						PhysicalErasureDue: ptr(at(30, 10, 0, 0, 0)),
					},
					{
						Store: "audit_log", Kind: "audit_log", Status: StatusNoPII, Deleted: -1,
						Locations: []LocationCount{{Location: "audit", Deleted: -1}},
						Verification: Verification{
							Method: "by-design", Remaining: -1, Unexamined: -1,
							UnexaminedItems: []string{"evt-1: undecodable"}, Excluded: []string{"evt-2"},
							Attestation: "att-2", Mentions: 2, Similar: []string{"10"},
							DiscoveryRunAt: ptr(at(30, 6, 0, 0, 0)), DiscoveryUncovered: 4,
							OutsideInventory: []OutsideLocation{{Location: "audit", Found: 2, Unexamined: "unreadable", Suggest: "name: audit"}},
						},
						Physical:           "pseudonyms only",
						PhysicalErasureDue: ptr(at(30, 11, 0, 0, 0)),
					},
				},
				AuditLogPII:        true,
				Status:             ReceiptComplete,
				Seq:                3,
				PrevHash:           "ab12",
				Hash:               "cd34",
				IdentifiersShredAt: ptr(at(30, 12, 0, 0, 1)),
				ChainKeyID:         "chain1",
				ChainMAC:           "ef56",
				Review:             []ReviewItem{{Store: "qdrant", Kind: ReviewSimilar, Item: "9"}},
			},
			fresh: func() any { return new(Receipt) },
			deref: func(v any) any { return *v.(*Receipt) },
		},
		{
			typ: Overdues,
			sample: &Overdue{
				RequestID:     "req-0001",
				TenantID:      "acme",
				SubjectHash:   "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
				Regulation:    "LGPD",
				RequestedAt:   at(30, 9, 15, 31, 7),
				DueAt:         at(30, 9, 15, 31, 7).AddDate(0, 0, 15),
				Threshold:     80,
				Window:        WindowTarget,
				PendingStores: []string{"dataset"},
				At:            at(30, 9, 16, 0, 500),
			},
			fresh: func() any { return new(Overdue) },
			deref: func(v any) any { return *v.(*Overdue) },
		},
		{
			typ: Suppressions,
			sample: &Suppression{
				TenantID:     "acme",
				Pseudonym:    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
				KeyID:        "key-2026-11",
				Kind:         SuppressSession,
				State:        Lifted,
				RequestID:    "req-0001",
				ReceiptID:    "rcpt-0001",
				SuppressedAt: at(30, 9, 16, 0, 500),
				LiftedAt:     ptr(at(30, 10, 0, 0, 1)),
				LiftEventID:  "lift-0001",
				LiftedBy:     "shopbot-privacy",
				Version:      2,
			},
			fresh: func() any { return new(Suppression) },
			deref: func(v any) any { return *v.(*Suppression) },
		},
		{
			typ: Reappear,
			sample: &Reappeared{
				RequestID: "req-0001",
				TenantID:  "acme",
				Store:     "redis",
				Kind:      "redis",
				Purpose:   PurposeSweep,
				Pass:      "sweep-2",
				Deleted:   4,
				Locations: []LocationCount{{Location: "session:acme:{subject}:*", Deleted: 4}},
				Remaining: 1,
				At:        at(30, 10, 16, 0, 500),
			},
			fresh: func() any { return new(Reappeared) },
			deref: func(v any) any { return *v.(*Reappeared) },
		},
		{
			typ: Found,
			sample: &StoreFound{
				RequestID: "req-0001",
				TenantID:  "acme",
				Store:     "dataset",
				Kind:      "dataset",
				Attempt:   2,
				Locations: []LocationCount{
					{Location: "s3://evals/acme/", Deleted: 4},
					{Location: "s3://evals/acme/ (older versions)", Deleted: 9},
				},
				FoundAt: at(30, 9, 15, 32, 1),
				Run:     "3f2b9c1e-run",
			},
			fresh: func() any { return new(StoreFound) },
			deref: func(v any) any { return *v.(*StoreFound) },
		},
	}
}

func ptr[T any](v T) *T { return &v }

func TestGolden(t *testing.T) {
	for _, g := range goldens() {
		t.Run(g.typ.Name(), func(t *testing.T) {
			assertPopulated(t, reflect.ValueOf(g.sample).Elem(), g.typ.Name())

			got, err := g.typ.Encode(g.sample)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			file := filepath.Join("testdata", g.typ.Name()+".golden")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test ./event -run TestGolden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("encoding of %s changed:\n got %x\nwant %x\n"+
					"if the change is intended and TestSchemaEvolution passes, run go test ./event -run TestGolden -update",
					g.typ.Name(), got, want)
			}

			decoded := g.fresh()
			if err := g.typ.Decode(want, decoded); err != nil {
				t.Fatalf("Decode golden: %v", err)
			}
			if !reflect.DeepEqual(g.deref(decoded), g.deref(g.sample)) {
				t.Errorf("decoded golden differs from sample:\n got %+v\nwant %+v", g.deref(decoded), g.deref(g.sample))
			}
		})
	}
}

// assertPopulated fails for every zero field of v (recursively through structs and slice
// elements), so a field added to an event type must also be added to its sample.
func assertPopulated(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		if _, ok := v.Interface().(time.Time); ok {
			if v.IsZero() {
				t.Errorf("sample field %s is zero", path)
			}
			return
		}
		for i := 0; i < v.NumField(); i++ {
			assertPopulated(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("sample field %s is empty", path)
		}
		for i := 0; i < v.Len(); i++ {
			assertPopulated(t, v.Index(i), path+"[]")
		}
	default:
		if v.IsZero() {
			t.Errorf("sample field %s is zero", path)
		}
	}
}
