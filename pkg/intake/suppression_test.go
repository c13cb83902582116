package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// Session ids of the tests, long enough that finding one by chance is impossible.
const (
	sessA = "sess-alpha-0001"
	sessB = "sess-bravo-0002"
	sessC = "sess-charlie-0003"
)

// suppressing returns a secured env whose intake keeps its suppression list in the
// directory store, logs into the returned observer and allows plenty of requests.
func suppressing(t *testing.T) (*env, *observer.ObservedLogs) {
	t.Helper()
	e := secured(t)
	core, logs := observer.New(zap.DebugLevel)
	e.svc.Log = zap.New(core)
	e.svc.Store = e.store.Table // the DirStore itself: it is an auditlog.SuppressionStore
	e.svc.Limiter = auth.NewLimiter(1000, 1000)
	return e, logs
}

// erase submits an erasure with token and completes it as the aggregator does once every
// store reported success; it returns the receipt.
func (e *env) erase(t *testing.T, token string, body map[string]any) event.Receipt {
	t.Helper()
	b, _ := json.Marshal(body)
	acc := e.submit(t, string(b), bearer(token)...)
	if acc.State == intake.StateAwaitingApproval {
		if code, b := e.do(t, "POST", "/v1/erasures/"+acc.RequestID+"/approve", "", bearer(opsToken)...); code != http.StatusOK {
			t.Fatalf("approve: %d %s", code, b)
		}
	}
	reqs := e.of(t, acc.RequestID)
	agg := &aggregator.Aggregator{Store: e.store.Table, Producer: e.svc.Producer, Now: e.clock}
	ctx := context.Background()
	rec, err := event.Request.Encode(&reqs[0])
	if err != nil {
		t.Fatal(err)
	}
	recs := []*kgo.Record{{Topic: event.TopicRequested, Key: []byte(acc.RequestID), Value: rec}}
	for _, st := range inventory.Reference().Stores {
		d := event.StoreDone{RequestID: acc.RequestID, TenantID: reqs[0].TenantID, Store: st.Name, Kind: st.Kind,
			Status: event.StatusNothingFound, Verification: event.Verification{Method: "read-back"}, Attempt: 1}
		if st.Kind == auditlog.Kind {
			d.Status = event.StatusNoPII
		}
		v, err := event.Done.Encode(&d)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: event.TopicStoreDone, Key: []byte(acc.RequestID), Value: v})
	}
	for _, r := range recs {
		if err := agg.Handle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := e.store.GetReceipt(ctx, acc.RequestID)
	if err != nil {
		t.Fatalf("no receipt after every store succeeded: %v", err)
	}
	return rc
}

func (e *env) check(t *testing.T, token string, body map[string]any) (int, intake.CheckResponse) {
	t.Helper()
	b, _ := json.Marshal(body)
	code, resp := e.do(t, "POST", "/v1/suppressions/check", string(b), bearer(token)...)
	if code != http.StatusOK {
		return code, intake.CheckResponse{}
	}
	return code, decode[intake.CheckResponse](t, resp)
}

func suppressedFlags(rs []intake.CheckResult) []bool {
	out := []bool{}
	for _, r := range rs {
		out = append(out, r.Suppressed)
	}
	return out
}

// The same subject id in two tenants, erased in one: the check answers suppressed only in
// that tenant, for the subject and its sessions, with the erasure's request and receipt;
// subjects never erased are not suppressed; a token of one tenant cannot check the other;
// identifiers appear in no answer and no log line.
func TestSuppressionCheckTwoTenants(t *testing.T) {
	e, logs := suppressing(t)
	acme := e.erase(t, acmeToken, map[string]any{"tenant_id": "acme", "subject_id": subj, "session_ids": []string{sessA, sessB}, "regulation": "GDPR"})
	globex := e.erase(t, globexToken, map[string]any{"tenant_id": "globex", "subject_id": "bob-00042", "regulation": "GDPR"})

	code, got := e.check(t, acmeToken, map[string]any{"tenant_id": "acme",
		"subject_ids": []string{subj, "bob-00042", "carol-0007"}, "session_ids": []string{sessA, sessC, sessB}})
	if code != http.StatusOK {
		t.Fatalf("check acme: %d", code)
	}
	if f := suppressedFlags(got.Subjects); !slices.Equal(f, []bool{true, false, false}) {
		t.Errorf("acme subjects suppressed %v, want [true false false]", f)
	}
	if f := suppressedFlags(got.Sessions); !slices.Equal(f, []bool{true, false, true}) {
		t.Errorf("acme sessions suppressed %v, want [true false true]", f)
	}
	s := got.Subjects[0]
	if s.By != event.SuppressSubject || s.RequestID != acme.RequestID || s.ReceiptID != acme.ReceiptID ||
		s.Pseudonym != e.key.Pseudonym("acme", subj) || s.SuppressedAt == nil || got.KeyID != "k1" {
		t.Errorf("acme subject result %+v, want suppressed by receipt %s", s, acme.ReceiptID)
	}
	if ss := got.Sessions[0]; ss.By != event.SuppressSession || ss.RequestID != acme.RequestID || ss.Pseudonym != e.key.SessionPseudonym("acme", sessA) {
		t.Errorf("acme session result %+v", ss)
	}
	if e.key.SessionPseudonym("acme", subj) == e.key.Pseudonym("acme", subj) {
		t.Error("a session pseudonym equals the subject pseudonym of the same id")
	}

	_, got = e.check(t, globexToken, map[string]any{"tenant_id": "globex",
		"subject_ids": []string{subj, "bob-00042"}, "session_ids": []string{sessA}})
	if f := suppressedFlags(got.Subjects); !slices.Equal(f, []bool{false, true}) {
		t.Errorf("globex subjects suppressed %v, want [false true]: the subject erased in acme is not erased in globex", f)
	}
	if got.Subjects[1].ReceiptID != globex.ReceiptID || got.Sessions[0].Suppressed {
		t.Errorf("globex results %+v", got)
	}

	for _, tc := range []struct {
		name  string
		token string
		body  map[string]any
		want  int
	}{
		{"another tenant's token", acmeToken, map[string]any{"tenant_id": "globex", "subject_ids": []string{"bob-00042"}}, http.StatusForbidden},
		{"no identifiers", acmeToken, map[string]any{"tenant_id": "acme"}, http.StatusBadRequest},
		{"an empty identifier", acmeToken, map[string]any{"tenant_id": "acme", "subject_ids": []string{""}}, http.StatusBadRequest},
		{"a bad tenant", acmeToken, map[string]any{"tenant_id": "ACME", "subject_ids": []string{"x"}}, http.StatusBadRequest},
		{"unauthenticated", "lt_unknown", map[string]any{"tenant_id": "acme", "subject_ids": []string{subj}}, http.StatusUnauthorized},
	} {
		if code, _ := e.check(t, tc.token, tc.body); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
		}
	}
	ids := make([]string, intake.MaxCheckIdentifiers+1)
	for i := range ids {
		ids[i] = "x"
	}
	if code, _ := e.check(t, acmeToken, map[string]any{"tenant_id": "acme", "subject_ids": ids}); code != http.StatusBadRequest {
		t.Errorf("%d identifiers: %d, want 400", len(ids), code)
	}

	e.svc.Limiter = auth.NewLimiter(0.001, 1)
	body := map[string]any{"tenant_id": "acme", "subject_ids": []string{subj}}
	first, _ := e.check(t, acmeToken, body)
	second, _ := e.check(t, acmeToken, body)
	if first != http.StatusOK || second != http.StatusTooManyRequests {
		t.Errorf("over the rate: %d then %d, want 200 then 429", first, second)
	}

	checks := 0
	for _, l := range logs.All() {
		b, _ := json.Marshal(l.ContextMap())
		line := l.Message + string(b)
		for _, id := range []string{subj, "bob-00042", "carol-0007", sessA, sessB, sessC} {
			if bytes.Contains([]byte(line), []byte(id)) {
				t.Errorf("log line names identifier %q: %s", id, line)
			}
		}
		if l.Message == "suppression check" {
			checks++
		}
	}
	if checks < 3 {
		t.Errorf("%d suppression check log lines, want one per answered check", checks)
	}
}

// A whole-tenant erasure suppresses every identifier of that tenant and none of another.
func TestSuppressionCheckTenantScope(t *testing.T) {
	e, _ := suppressing(t)
	rc := e.erase(t, globexToken, map[string]any{"tenant_id": "globex", "scope": "TENANT", "regulation": "GDPR"})
	_, got := e.check(t, globexToken, map[string]any{"tenant_id": "globex", "subject_ids": []string{"anyone-1"}, "session_ids": []string{sessC}})
	if !got.Subjects[0].Suppressed || got.Subjects[0].By != event.SuppressTenant || got.Subjects[0].ReceiptID != rc.ReceiptID || !got.Sessions[0].Suppressed {
		t.Errorf("globex after offboarding: %+v", got)
	}
	_, got = e.check(t, acmeToken, map[string]any{"tenant_id": "acme", "subject_ids": []string{"anyone-1"}})
	if got.Subjects[0].Suppressed {
		t.Errorf("acme suppressed by globex's offboarding: %+v", got.Subjects[0])
	}
}

// Lifting needs a token scoped to the tenant by name and a consent basis; it records an
// audit event (principal and reason, no identifier), and the check then answers not
// suppressed, lifted; the topic carries the lifted entry, pseudonyms only.
func TestSuppressionLift(t *testing.T) {
	e, _ := suppressing(t)
	ctx := context.Background()
	e.erase(t, acmeToken, map[string]any{"tenant_id": "acme", "subject_id": subj, "session_ids": []string{sessA}, "regulation": "GDPR"})
	lift := func(token string, body map[string]any) (int, intake.LiftResponse) {
		t.Helper()
		b, _ := json.Marshal(body)
		code, resp := e.do(t, "POST", "/v1/suppressions/lift", string(b), bearer(token)...)
		if code != http.StatusOK {
			return code, intake.LiftResponse{}
		}
		return code, decode[intake.LiftResponse](t, resp)
	}
	valid := func(mod func(map[string]any)) map[string]any {
		m := map[string]any{"tenant_id": "acme", "subject_ids": []string{subj, "carol-0007"}, "basis": "consent", "reason": "consent record CR-2291 of 2026-12-01"}
		if mod != nil {
			mod(m)
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		token string
		body  map[string]any
		want  int
	}{
		{"another tenant's token", globexToken, valid(nil), http.StatusForbidden},
		{"an operator's wildcard token", opsToken, valid(nil), http.StatusForbidden},
		{"the tenant's app token, without the lift role", acmeToken, valid(nil), http.StatusForbidden},
		{"no token", "", valid(nil), http.StatusUnauthorized},
		{"another basis", privacyToken, valid(func(m map[string]any) { m["basis"] = "legitimate_interest" }), http.StatusBadRequest},
		{"no reason", privacyToken, valid(func(m map[string]any) { m["reason"] = " " }), http.StatusBadRequest},
		{"a reason naming the subject", privacyToken, valid(func(m map[string]any) { m["reason"] = "consent of " + subj }), http.StatusBadRequest},
	} {
		if code, _ := lift(tc.token, tc.body); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
		}
	}
	if _, got := e.check(t, acmeToken, map[string]any{"tenant_id": "acme", "subject_ids": []string{subj}}); !got.Subjects[0].Suppressed {
		t.Fatal("a refused lift lifted the suppression")
	}

	e.setNow(start.Add(time.Hour))
	code, res := lift(privacyToken, valid(nil))
	if code != http.StatusOK || res.Subjects[0].Outcome != intake.LiftLifted || res.Subjects[1].Outcome != intake.LiftNotSuppressed || res.Subjects[0].LiftEventID == "" {
		t.Fatalf("lift: %d %+v", code, res)
	}
	pseudonym := e.key.Pseudonym("acme", subj)
	evs, err := e.store.Events(ctx, "acme", pseudonym)
	if err != nil || len(evs) != 1 {
		t.Fatalf("audit events of the lifted pseudonym: %+v, %v; want one", evs, err)
	}
	if ev := evs[0]; ev.Type != auditlog.TypeSuppressionLifted || ev.Actor != "acme-privacy" || ev.EventID != res.Subjects[0].LiftEventID ||
		ev.Reason != "consent record CR-2291 of 2026-12-01" || !ev.At.Equal(start.Add(time.Hour)) {
		t.Errorf("lift event %+v", ev)
	}
	_, got := e.check(t, acmeToken, map[string]any{"tenant_id": "acme", "subject_ids": []string{subj}, "session_ids": []string{sessA}})
	if got.Subjects[0].Suppressed || !got.Subjects[0].Lifted || !got.Sessions[0].Suppressed {
		t.Errorf("after lifting the subject: %+v; want the subject lifted, its session still suppressed", got)
	}
	if _, again := lift(privacyToken, valid(nil)); again.Subjects[0].Outcome != intake.LiftAlreadyLifted || again.Subjects[0].LiftEventID != res.Subjects[0].LiftEventID {
		t.Errorf("second lift: %+v", again)
	}
	if evs, _ := e.store.Events(ctx, "acme", pseudonym); len(evs) != 1 {
		t.Errorf("%d lift events after a second lift, want 1", len(evs))
	}

	var latest event.Suppression
	for _, r := range testenv.ReadTopic(t, e.addrs, event.TopicSuppressions) {
		for _, id := range []string{subj, sessA, "carol-0007"} {
			if bytes.Contains(r.Value, []byte(id)) || bytes.Contains(r.Key, []byte(id)) {
				t.Errorf("record on %s holds identifier %q", event.TopicSuppressions, id)
			}
		}
		var s event.Suppression
		if err := event.Suppressions.Decode(r.Value, &s); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) == "acme/"+pseudonym && s.Version >= latest.Version {
			latest = s
		}
	}
	if latest.State != event.Lifted || latest.LiftedBy != "acme-privacy" || latest.LiftEventID != res.Subjects[0].LiftEventID {
		t.Errorf("latest record of the lifted pseudonym: %+v", latest)
	}
}

// Without authentication no one may lift: a consent event must name its principal.
func TestSuppressionLiftNeedsAuthentication(t *testing.T) {
	e := setup(t)
	e.svc.Store = e.store.Table
	b := `{"tenant_id": "acme", "subject_ids": ["x"], "basis": "consent", "reason": "r"}`
	if code, _ := e.do(t, "POST", "/v1/suppressions/lift", b); code != http.StatusForbidden {
		t.Errorf("lift with authentication disabled: %d, want 403", code)
	}
}

// A request carries the pseudonyms of its sessions (the subject's are on the request
// already); a re-drive adds those of the sessions it names, so all become suppressed.
func TestRequestCarriesSessionPseudonyms(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	first, err := e.svc.Submit(ctx, event.IntakeRequest{TenantID: "acme", SubjectID: subj, SessionIDs: []string{sessA, sessB}, Regulation: "GDPR"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{e.key.SessionPseudonym("acme", sessA), e.key.SessionPseudonym("acme", sessB)}
	if pub := e.of(t, first.RequestID); !slices.Equal(pub[0].SessionHashes, want) {
		t.Errorf("published session hashes %v, want %v", pub[0].SessionHashes, want)
	}
	if stored, err := e.store.GetRequest(ctx, first.RequestID); err != nil || !slices.Equal(stored.SessionHashes, want) {
		t.Errorf("stored request's session hashes %v (%v), want %v", stored.SessionHashes, err, want)
	}
	again, err := e.svc.Redrive(ctx, first.RequestID, event.Identifiers{SubjectID: subj, SessionIDs: []string{sessC, sessA}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want = append(want, e.key.SessionPseudonym("acme", sessC)); !slices.Equal(again.SessionHashes, want) {
		t.Errorf("re-drive's session hashes %v, want %v", again.SessionHashes, want)
	}
}

// readCounting counts the suppression list's reads.
type readCounting struct {
	*auditlog.DirStore
	reads atomic.Int64
}

func (r *readCounting) GetSuppression(ctx context.Context, tenant, pseudonym string) (event.Suppression, error) {
	r.reads.Add(1)
	return r.DirStore.GetSuppression(ctx, tenant, pseudonym)
}

// A check reads one entry per identifier plus the tenant's own, however many erasures the
// list holds.
func TestSuppressionCheckCost(t *testing.T) {
	e, _ := suppressing(t)
	counting := &readCounting{DirStore: e.store.Table.(*auditlog.DirStore)}
	e.svc.Store = counting
	body := map[string]any{"tenant_id": "acme", "subject_ids": []string{subj, "carol-0007"}, "session_ids": []string{sessA}}
	for round, erasures := range []int{1, 20} {
		for i := range erasures {
			e.erase(t, acmeToken, map[string]any{"tenant_id": "acme", "subject_id": fmt.Sprintf("filler-%d-%d", round, i), "regulation": "GDPR"})
		}
		counting.reads.Store(0)
		if code, _ := e.check(t, acmeToken, body); code != http.StatusOK {
			t.Fatalf("check: %d", code)
		}
		if n := counting.reads.Load(); n != 4 {
			t.Errorf("after %d more erasures a check of 3 identifiers read %d entries, want 4", erasures, n)
		}
	}
}

// A lift's record on erasure.suppressions is framed as the topic's framing says (here the
// registry's), as every record the intake writes.
func TestSuppressionLiftFollowsFraming(t *testing.T) {
	e, _ := suppressing(t)
	ctx := context.Background()
	reg, _ := testenv.Registry(t, "erasure.suppressions=registry")
	e.svc.Registry = reg
	e.erase(t, acmeToken, map[string]any{"tenant_id": "acme", "subject_id": subj, "regulation": "GDPR"})
	e.setNow(start.Add(time.Hour))
	b, _ := json.Marshal(map[string]any{"tenant_id": "acme", "subject_ids": []string{subj}, "basis": "consent", "reason": "consent record CR-2291"})
	if code, _ := e.do(t, "POST", "/v1/suppressions/lift", string(b), bearer(privacyToken)...); code != http.StatusOK {
		t.Fatalf("lift: %d", code)
	}
	lifts := 0
	for _, r := range testenv.ReadTopic(t, e.addrs, event.TopicSuppressions) {
		var s event.Suppression
		if err := reg.Decode(ctx, event.Suppressions, r.Value, &s); err != nil {
			t.Fatal(err)
		}
		if s.State != event.Lifted {
			continue // the aggregator's entry, written without a registry
		}
		lifts++
		if r.Value[0] != 0 {
			t.Errorf("the lift's record starts %#x, want the registry framing", r.Value[0])
		}
	}
	if lifts != 1 {
		t.Fatalf("%d lift records, want 1", lifts)
	}
}

// erasure.suppressions is compacted (lethectl topics apply provisions it so): the log
// cleaner keeps the latest record of each tenant and pseudonym, an erasure's or a lift's
// (a lift is an updated entry, never a tombstone), so that a consumer reading the topic
// late learns each entry's current state and nothing older.
func TestSuppressionTopicCompactsToTheLatestEntry(t *testing.T) {
	e, _ := suppressing(t)
	ctx := context.Background()
	cl := testenv.Producer(t, broker.Config{Brokers: e.addrs}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	// Compacted, its segments rolled after 100 ms and cleaned at once.
	set := map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
	var alter []kadm.AlterConfig
	for k, v := range set {
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
	}
	if res, err := adm.AlterTopicConfigs(ctx, alter, event.TopicSuppressions); err != nil || res[0].Err != nil {
		t.Fatalf("compact %s: %v %v", event.TopicSuppressions, err, res)
	}

	body := map[string]any{"tenant_id": "acme", "subject_id": subj, "session_ids": []string{sessA}, "regulation": "GDPR"}
	e.erase(t, acmeToken, body)
	b, _ := json.Marshal(map[string]any{"tenant_id": "acme", "subject_ids": []string{subj}, "basis": "consent", "reason": "consent record CR-2291"})
	if code, resp := e.do(t, "POST", "/v1/suppressions/lift", string(b), bearer(privacyToken)...); code != http.StatusOK {
		t.Fatalf("lift: %d %s", code, resp)
	}
	e.setNow(start.Add(time.Hour))
	e.erase(t, acmeToken, body) // erased again: suppressed again

	latest := map[string][]byte{} // key -> value of its last record
	var states []string
	for _, r := range testenv.ReadTopic(t, e.addrs, event.TopicSuppressions) {
		latest[string(r.Key)] = r.Value
		var s event.Suppression
		if err := event.Suppressions.Decode(r.Value, &s); err != nil {
			t.Fatal(err)
		}
		if s.Pseudonym == e.key.Pseudonym("acme", subj) {
			states = append(states, s.State)
		}
	}
	if want := []string{event.Suppressed, event.Lifted, event.Suppressed}; !slices.Equal(states, want) {
		t.Fatalf("the subject's records before compaction: %v, want %v", states, want)
	}
	// Each partition's last segment, which the cleaner leaves alone, gets a record of
	// another tenant once the segments holding acme's records are due to roll.
	time.Sleep(200 * time.Millisecond)
	parts, err := adm.ListTopics(ctx, event.TopicSuppressions)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts[event.TopicSuppressions].Partitions.Numbers() {
		s := event.Suppression{TenantID: "globex", Pseudonym: fmt.Sprintf("filler-%d", p), Kind: event.SuppressSubject, State: event.Suppressed, Version: 1}
		v, err := event.Suppressions.Encode(&s)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: event.TopicSuppressions, Partition: p,
			Key: event.SuppressionKey(s.TenantID, s.Pseudonym), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		got := map[string][][]byte{}
		for _, r := range testenv.ReadTopic(t, e.addrs, event.TopicSuppressions) {
			if _, acme := latest[string(r.Key)]; acme {
				got[string(r.Key)] = append(got[string(r.Key)], r.Value)
			}
		}
		compacted := len(got) == len(latest)
		for k, vs := range got {
			compacted = compacted && len(vs) == 1 && bytes.Equal(vs[0], latest[k])
		}
		if compacted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme's records on %s after 60 s: %d keys, %v records each; want %d keys, one record each, the latest",
				event.TopicSuppressions, len(got), recordCounts(got), len(latest))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func recordCounts(m map[string][][]byte) []int {
	var out []int
	for _, vs := range m {
		out = append(out, len(vs))
	}
	return out
}
