package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// The demo tenant and its customers. The first customer asks for erasure; her older
// session predates the customer_id payload field, so its chunks carry only session_id.
const demoTenant = "vastralaya"

type customer struct {
	id       string
	sessions []string // the last one is legacy: its chunks carry only the session id
}

var (
	target     = customer{"anna.schmidt@example.de", []string{"sess-2026-11-a1", "sess-2025-10-legacy"}}
	bystanders = []customer{
		{"ravi.kumar@example.in", []string{"sess-2026-11-r1", "sess-2025-09-r0"}},
		{"anna.schmidt@example.de.evil", []string{"sess-2026-11-a1x", "sess-2025-10-legacyx"}}, // a longer id
		{"cust-*", []string{"sess-*", "sess-?"}},                                               // glob metacharacters
	}
)

// numericCustomer's app stores its id as an integer in Qdrant payloads, as many apps store
// numeric user ids; the demo erases it in a second request. numericBystander's integer id
// shares its digits and must stay.
var numericCustomer, numericBystander = customer{"424242", nil}, customer{"4242420", nil}

func (c customer) subject(k interface{ Pseudonym(t, s string) string }) deletion.Subject {
	return deletion.Subject{Tenant: demoTenant, ID: c.id, Hash: k.Pseudonym(demoTenant, c.id), Sessions: c.sessions, Scope: event.ScopeSubject}
}

// demo seeds the stores, erases the target customer over HTTP and checks the result.
func (a *app) demo(ctx context.Context, stdout, stderr io.Writer) error {
	if err := a.seed(ctx); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	before, err := a.footprints(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "seeded tenant %q: customer %s has %s\n", demoTenant, a.Key.Pseudonym(demoTenant, target.id)[:12], before[target.id])
	if err := a.discover(ctx, stderr); err != nil {
		return err
	}

	start := time.Now()
	acc, err := a.submit(ctx, target)
	if err != nil {
		return err
	}
	accepted := time.Since(start)
	fmt.Fprintf(stderr, "accepted %s in %s (due %s)\n", acc.RequestID, accepted.Round(time.Microsecond), acc.DueAt.Format(time.RFC3339))
	if _, err := a.await(ctx, acc.RequestID, stderr); !errors.Is(err, errIncomplete) {
		return fmt.Errorf("the first attempt is not INCOMPLETE: her CRM profile outside the inventory went unseen (%v)", err)
	}
	fmt.Fprintf(stderr, "first attempt in %s after submission\n", time.Since(start).Round(time.Microsecond))
	if err := a.coverAndRedrive(ctx, acc.RequestID, before, stderr); err != nil {
		return err
	}
	receipt, err := a.await(ctx, acc.RequestID, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "receipt in %s after submission (%d ms from request to receipt, the inventory's extension and the re-drive included)\n", time.Since(start).Round(time.Microsecond), receipt.ElapsedMS)

	after, err := a.footprints(ctx)
	if err != nil {
		return err
	}
	problems := check(receipt, a.Inventory, before, after)
	problems = append(problems, a.completenessProblems(ctx, receipt, stderr)...)
	line, err := json.Marshal(receipt)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		fmt.Fprintln(stdout, string(line))
		return fmt.Errorf("demo failed:\n  %s", strings.Join(problems, "\n  "))
	}
	similar, err := similarSummary(receipt)
	if err != nil {
		fmt.Fprintln(stdout, string(line))
		return fmt.Errorf("demo failed: %w", err)
	}
	fmt.Fprintln(stderr, similar)
	fmt.Fprintln(stderr, datasetSummary())
	fmt.Fprintf(stderr, "re-checked every store: customer gone (%s; the audit log keeps hash-only events by design), %d other customers intact\n", after[target.id], len(bystanders))
	if err := a.eraseNumeric(ctx, stderr); err != nil {
		fmt.Fprintln(stdout, string(line))
		return fmt.Errorf("demo failed: %w", err)
	}
	fmt.Fprintln(stdout, string(line))
	return nil
}

// eraseNumeric erases numericCustomer over HTTP and re-checks Qdrant with a filter of its
// own (an integer match, not the deleter's): none of its integer-tagged chunks remain and
// numericBystander's are intact.
func (a *app) eraseNumeric(ctx context.Context, stderr io.Writer) error {
	count := func(c customer) (int64, error) {
		n, _ := strconv.ParseInt(c.id, 10, 64)
		var total int64
		for _, st := range a.Inventory.OfKinds(qdrantstore.Kind) {
			l, err := qdrantstore.LocatorsOf(st)
			if err != nil {
				return 0, err
			}
			for _, tmpl := range l.Collections {
				k, err := a.Stack.Qdrant.Count(ctx, &qdrant.CountPoints{
					CollectionName: inventory.Expand(tmpl, inventory.Vars{Tenant: demoTenant}, nil),
					Filter:         &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchInt("customer_id", n)}},
					Exact:          qdrant.PtrOf(true),
				})
				if err != nil {
					return 0, fmt.Errorf("re-check qdrant: %w", err)
				}
				total += int64(k)
			}
		}
		return total, nil
	}
	both := func() (victim, other int64, err error) {
		if victim, err = count(numericCustomer); err == nil {
			other, err = count(numericBystander)
		}
		return victim, other, err
	}
	before, kept, err := both()
	if err != nil {
		return err
	}
	acc, err := a.submit(ctx, numericCustomer)
	if err != nil {
		return err
	}
	r, err := a.await(ctx, acc.RequestID, stderr)
	if err != nil {
		return err
	}
	left, still, err := both()
	if err != nil {
		return err
	}
	if r.Status != event.ReceiptComplete || before == 0 || left != 0 || still != kept {
		return fmt.Errorf("numeric customer: receipt %s, %d of %d integer-tagged chunks remain, the bystander has %d of %d", r.Status, left, before, still, kept)
	}
	fmt.Fprintf(stderr, "numeric-id customer erased: %d integer-tagged chunks gone, re-checked 0 left; the customer whose id shares its digits kept %d\n", before, still)
	return nil
}

// footprint counts one customer's items per store, read back through each store's
// verification (the number of the customer's items present) and, for the audit log, the
// customer's hash-only events.
type footprint map[string]int64

func (f footprint) String() string {
	var parts []string
	for _, k := range []string{"qdrant", "redis", "langgraph", "dataset", "audit_log", "crm"} {
		if n, ok := f[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
	}
	return strings.Join(parts, " ")
}

func (a *app) footprints(ctx context.Context) (map[string]footprint, error) {
	out := map[string]footprint{}
	for _, c := range append([]customer{target}, bystanders...) {
		s := c.subject(a.Key)
		fp := footprint{}
		for _, st := range a.Inventory.Stores {
			if st.Kind == auditlog.Kind {
				evs, err := a.Stack.Audit.Events(ctx, demoTenant, s.Hash)
				if err != nil {
					return nil, err
				}
				fp[st.Name] = int64(len(evs))
				continue
			}
			v, err := a.Stores[st.Kind].Verify(ctx, st, s)
			if err != nil {
				return nil, fmt.Errorf("read back %s: %w", st.Name, err)
			}
			fp[st.Name] = v.Remaining
			if st.Kind == datasetstore.Kind {
				// Verify counts rows in every object version; erasing a customer rightly
				// deletes old versions that also hold others' rows, so others are compared
				// on the current objects.
				fp[st.Name+allVersions] = v.Remaining
				objects, err := a.currentRows(ctx, c)
				if err != nil {
					return nil, err
				}
				fp[st.Name] = 0
				for key, n := range objects {
					fp[st.Name] += n
					fp[datasetObject(st.Name, key)] = n
				}
			}
		}
		out[c.id] = fp
	}
	return out, nil
}

const allVersions = " (all versions)"

// check lists what is wrong with the outcome.
func check(r event.Receipt, inv *inventory.Inventory, before, after map[string]footprint) []string {
	var bad []string
	if r.Status != event.ReceiptComplete {
		bad = append(bad, "receipt status "+r.Status)
	}
	if len(r.Stores) != len(inv.Stores) {
		bad = append(bad, fmt.Sprintf("receipt has %d stores, inventory %d", len(r.Stores), len(inv.Stores)))
	}
	for _, s := range r.Stores {
		if !s.Verification.Clean() {
			bad = append(bad, fmt.Sprintf("receipt: %s remaining %d unexamined %d", s.Store, s.Verification.Remaining, s.Verification.Unexamined))
		}
	}
	bad = append(bad, objectProblems(before, after)...)
	for _, st := range inv.Stores {
		if st.Kind != auditlog.Kind && before[target.id][st.Name] == 0 {
			bad = append(bad, fmt.Sprintf("seed: the customer had no data in %s", st.Name))
		}
		if st.Kind != auditlog.Kind && after[target.id][st.Name]+after[target.id][st.Name+allVersions] != 0 {
			bad = append(bad, fmt.Sprintf("%s: %d items of the customer remain", st.Name, after[target.id][st.Name]+after[target.id][st.Name+allVersions]))
		}
		for _, c := range bystanders {
			if after[c.id][st.Name] != before[c.id][st.Name] || before[c.id][st.Name] == 0 {
				bad = append(bad, fmt.Sprintf("%s: another customer had %d items, now %d", st.Name, before[c.id][st.Name], after[c.id][st.Name]))
			}
		}
	}
	return bad
}

func (a *app) submit(ctx context.Context, c customer) (intake.Accepted, error) {
	body, _ := json.Marshal(intake.SubmitRequest{TenantID: demoTenant, SubjectID: c.id, SessionIDs: c.sessions, Regulation: "GDPR"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.BaseURL+"/v1/erasures", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "demo-"+time.Now().UTC().Format(time.RFC3339Nano))
	var acc intake.Accepted
	if err := doJSON(req, http.StatusAccepted, &acc); err != nil {
		return acc, fmt.Errorf("submit: %w", err)
	}
	return acc, nil
}

// errIncomplete is await's error for an INCOMPLETE request.
var errIncomplete = errors.New("INCOMPLETE")

// await polls the request's status, printing each store's progress, until the receipt
// exists, a store failed, the request is INCOMPLETE (errIncomplete, after printing what
// was found outside the inventory), or 30 s passed.
func (a *app) await(ctx context.Context, id string, stderr io.Writer) (event.Receipt, error) {
	seen := map[string]event.Status{}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var st intake.Status
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.BaseURL+"/v1/erasures/"+id, nil)
		err := doJSON(req, http.StatusOK, &st)
		if err != nil && !errors.Is(err, errNotFound) {
			return event.Receipt{}, fmt.Errorf("status: %w", err)
		}
		for _, s := range st.Stores {
			if seen[s.Store] != s.Status && s.Status != intake.Pending {
				seen[s.Store] = s.Status
				fmt.Fprintf(stderr, "  %-10s %-16s deleted %-4d remaining %d\n", s.Store, s.Status, s.Deleted, s.Remaining)
			}
		}
		switch st.State {
		case intake.StateComplete:
			var r event.Receipt
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.BaseURL+"/v1/erasures/"+id+"/receipt", nil)
			return r, doJSON(req, http.StatusOK, &r)
		case intake.StateFailed:
			return event.Receipt{}, fmt.Errorf("request %s failed: %+v", id, st.Stores)
		case intake.StateIncomplete:
			a.outside = printOutside(st, stderr)
			return event.Receipt{}, errIncomplete
		}
		select {
		case <-ctx.Done():
			return event.Receipt{}, fmt.Errorf("no receipt for %s: %w", id, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

var errNotFound = errors.New("not found")

func doJSON(req *http.Request, want int, v any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return errNotFound
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, v)
}

// seed writes every customer's data into the five stores, as the RAG app would.
func (a *app) seed(ctx context.Context) error {
	for _, st := range a.Inventory.OfKinds(qdrantstore.Kind) {
		if err := a.seedQdrant(ctx, st); err != nil {
			return err
		}
	}
	for _, st := range a.Inventory.OfKinds(redisstore.Kind) {
		if err := a.seedRedis(ctx, st); err != nil {
			return err
		}
	}
	if err := a.seedDatasets(ctx); err != nil {
		return err
	}
	if err := a.seedCompleteness(ctx); err != nil {
		return err
	}
	w := auditlog.NewWriter(a.Stack.Audit, a.Key)
	for _, c := range append([]customer{target}, bystanders...) {
		for i, q := range []string{"do you have this kurta in blue?", "where is my order?", "return policy for sarees"} {
			if err := w.Query(ctx, demoTenant, c.id, c.sessions[i%len(c.sessions)], q, []string{fmt.Sprintf("chunk-%d", i)}, "gpt-4o-mini", "/v1/chat"); err != nil {
				return err
			}
		}
	}
	return nil
}

// seedQdrant writes 30 chunks per customer tagged with customer_id and session_id, and 17
// legacy chunks tagged only with the old session id (47 in all, as in the seeds' story),
// 12 chunks for each numeric-id customer tagged with its id as an integer, and one untagged
// near-duplicate of the target's first chunk for the semantic read-back to find.
func (a *app) seedQdrant(ctx context.Context, st inventory.Entry) error {
	q := a.Stack.Qdrant
	l, err := qdrantstore.LocatorsOf(st)
	if err != nil {
		return err
	}
	for _, tmpl := range l.Collections {
		coll := inventory.Expand(tmpl, inventory.Vars{Tenant: demoTenant}, nil)
		err := q.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: coll,
			VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: demoDim, Distance: qdrant.Distance_Cosine})})
		if err != nil {
			return fmt.Errorf("qdrant create collection: %w", err)
		}
		if err := qdrantstore.New(q).EnsureIndexes(ctx, st, demoTenant); err != nil {
			return err
		}
		var points []*qdrant.PointStruct
		id := uint64(1)
		for _, c := range append([]customer{target}, bystanders...) {
			for i := 0; i < 47; i++ {
				payload := map[string]any{"text": fmt.Sprintf("chunk %d of a product answer", i)}
				if i < 30 {
					payload["customer_id"] = c.id
					payload["session_id"] = c.sessions[0]
				} else {
					payload["session_id"] = c.sessions[len(c.sessions)-1]
				}
				points = append(points, &qdrant.PointStruct{Id: qdrant.NewIDNum(id), Vectors: qdrant.NewVectorsDense(demoVector(c.id, i)), Payload: qdrant.NewValueMap(payload)})
				id++
			}
		}
		for _, c := range []customer{numericCustomer, numericBystander} {
			n, _ := strconv.ParseInt(c.id, 10, 64)
			for i := 0; i < 12; i++ {
				payload := map[string]any{"text": fmt.Sprintf("chunk %d of an order answer", i), "customer_id": n}
				points = append(points, &qdrant.PointStruct{Id: qdrant.NewIDNum(id), Vectors: qdrant.NewVectorsDense(demoVector(c.id, i)), Payload: qdrant.NewValueMap(payload)})
				id++
			}
		}
		points = append(points, nearDuplicate())
		if _, err := q.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Points: points, Wait: aws.Bool(true)}); err != nil {
			return fmt.Errorf("qdrant upsert: %w", err)
		}
	}
	return nil
}

// seedRedis writes each customer's keys for st (4 per session, as the app does), listing
// the current session's keys in the per-customer index and leaving the legacy ones unindexed.
func (a *app) seedRedis(ctx context.Context, st inventory.Entry) error {
	l, err := redisstore.LocatorsOf(st)
	if err != nil {
		return err
	}
	for _, c := range append([]customer{target}, bystanders...) {
		s := c.subject(a.Key)
		for si, sess := range c.sessions {
			var keys []string
			for _, tmpl := range l.Keys {
				for i := 0; i < 2; i++ {
					k := redisstore.Key(tmpl, s.Vars(sess), fmt.Sprintf("%s:%d", redisstore.KeyPart(sess), i))
					if err := a.Stack.Redis.Set(ctx, k, "turn", 0).Err(); err != nil {
						return err
					}
					keys = append(keys, k)
				}
			}
			if si == 0 {
				if err := redisstore.Index(ctx, a.Stack.Redis, st, s, keys...); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
