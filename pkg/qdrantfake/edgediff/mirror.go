package edgediff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
)

// Divergence is one request the emulator and the engine answered differently.
type Divergence struct {
	Method   string // the gRPC method, e.g. /qdrant.Points/Count
	Request  string // the request in protojson, on one line
	Emulator string // what the emulator answered
	Edge     string // what the engine answered
	Detail   string // the first difference
}

func (d Divergence) String() string {
	return fmt.Sprintf("%s: %s\n  request:  %s\n  emulator: %s\n  edge:     %s", d.Method, d.Detail, d.Request, d.Emulator, d.Edge)
}

// Mirror replays the calls of a client of the emulator on the oracle and compares the
// answers. It serialises the calls, so that both see the same order of writes and reads.
type Mirror struct {
	o  *Oracle
	id int64 // names the mirror's shards apart on an oracle that mirrors share

	mu          sync.Mutex
	colls       map[string]string // collection -> distance of its vectors ("" for several)
	aliases     map[string]string // alias -> collection
	divergences []Divergence
	compared    map[string]int // reads compared per method
	pending     []pending      // oracle requests not sent yet
}

// pending is one request for the oracle and what to do with its answer: decode it into
// resp (when not nil), then call then with the engine's error, if any.
type pending struct {
	req  map[string]any
	resp any
	then func(err error)
}

// batch is how many requests go to the oracle in one line: a round trip per call would
// cost more than the engine's work on a busy machine.
const batch = 256

// ask queues r for the oracle.
func (m *Mirror) ask(r map[string]any, resp any, then func(err error)) {
	m.pending = append(m.pending, pending{req: r, resp: resp, then: then})
	if len(m.pending) >= batch {
		m.flush()
	}
}

// flush sends the queued requests and runs their comparisons. Callers hold mu.
func (m *Mirror) flush() {
	if len(m.pending) == 0 {
		return
	}
	ps := m.pending
	m.pending = nil
	reqs := make([]map[string]any, len(ps))
	for i, p := range ps {
		reqs[i] = p.req
	}
	answers, errs, err := m.o.Batch(reqs)
	if err != nil {
		m.divergences = append(m.divergences, Divergence{Method: "oracle", Detail: "the oracle broke: " + err.Error()})
		return
	}
	for i, p := range ps {
		if errs[i] == nil && p.resp != nil {
			d := json.NewDecoder(bytes.NewReader(answers[i]))
			d.UseNumber()
			if err := d.Decode(p.resp); err != nil {
				errs[i] = fmt.Errorf("undecodable answer %.200s: %w", answers[i], err)
			}
		}
		p.then(errs[i])
	}
}

// mirrors counts the mirrors made, to name their shards apart.
var mirrors atomic.Int64

// Connect starts an emulator following Release120, the engine's release, and the oracle,
// and returns a client of the emulator whose calls are mirrored. When t ends it fails t
// with every divergence recorded.
func Connect(t testing.TB) (*qdrant.Client, *qdrantfake.Server, *Mirror) {
	t.Helper()
	return ConnectWith(t, StartOracle(t))
}

// ConnectWith is Connect over an oracle already started (one per test binary is enough:
// the collections of each Connect are dropped from it when t ends).
func ConnectWith(t testing.TB, o *Oracle) (*qdrant.Client, *qdrantfake.Server, *Mirror) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, err := qdrantfake.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	srv.SetRelease(qdrantfake.Release120) // the engine of qdrant-edge-py 0.9.0
	m := &Mirror{o: o, id: mirrors.Add(1), colls: map[string]string{}, aliases: map[string]string{}, compared: map[string]int{}}
	cfg := srv.Config()
	cfg.GrpcOptions = append(cfg.GrpcOptions, grpc.WithUnaryInterceptor(m.intercept))
	c, err := qdrant.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Cleanup(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.flush()
		for name := range m.colls {
			_ = o.Do(map[string]any{"op": "drop", "collection": m.edge(name)}, nil)
		}
		for i, d := range m.divergences {
			if i == 20 {
				t.Errorf("edgediff: %d more divergences", len(m.divergences)-i)
				break
			}
			t.Errorf("edgediff: emulator and Qdrant Edge differ: %s", d)
		}
	})
	return c, srv, m
}

// Divergences returns the divergences recorded so far.
func (m *Mirror) Divergences() []Divergence {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flush()
	return append([]Divergence(nil), m.divergences...)
}

// Compared returns how many reads were compared, per gRPC method.
func (m *Mirror) Compared() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flush()
	out := map[string]int{}
	for k, v := range m.compared {
		out[k] = v
	}
	return out
}

// Truncate forgets the divergences recorded after the first n, for a test that provokes
// some on purpose (to shrink a failing case, say).
func (m *Mirror) Truncate(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flush()
	if n < len(m.divergences) {
		m.divergences = m.divergences[:n]
	}
}

func (m *Mirror) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := invoker(ctx, method, req, reply, cc, opts...)
	// The comparison may run later (flush): it keeps copies the caller cannot change.
	m.replay(method, proto.Clone(req.(proto.Message)), proto.Clone(reply.(proto.Message)), err)
	return err
}

// diverge records a divergence.
func (m *Mirror) diverge(method string, req proto.Message, emu, edge any, format string, args ...any) {
	m.divergences = append(m.divergences, Divergence{
		Method: method, Request: compact(req), Emulator: show(emu), Edge: show(edge),
		Detail: fmt.Sprintf(format, args...),
	})
}

func show(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case error:
		return v.Error()
	case proto.Message:
		return compact(v)
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// compact is m in protojson on one line, without the spaces protojson may add.
func compact(m proto.Message) string {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err.Error()
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

// edge is the oracle's name of the collection (or alias) name.
func (m *Mirror) edge(name string) string { return fmt.Sprintf("%d/%s", m.id, m.resolve(name)) }

func (m *Mirror) resolve(name string) string {
	if c, ok := m.aliases[name]; ok {
		return c
	}
	return name
}

// replay sends the call the emulator answered to the oracle: a write the emulator applied
// is applied there too; a read is asked there and the answers compared.
func (m *Mirror) replay(method string, req, reply proto.Message, emuErr error) {
	write := func(r map[string]any) {
		if emuErr != nil {
			return
		}
		m.ask(r, nil, func(err error) {
			if err != nil {
				m.diverge(method, req, "applied", err, "the engine refused a write the emulator applied")
			}
		})
	}
	switch rq := req.(type) {
	case *qdrant.CreateCollection:
		vs, dist, ok := vectorsConfig(rq.GetVectorsConfig())
		if !ok || emuErr != nil {
			return
		}
		m.colls[rq.GetCollectionName()] = dist
		write(map[string]any{"op": "create", "collection": m.edge(rq.GetCollectionName()), "vectors": vs})
	case *qdrant.DeleteCollection:
		if emuErr == nil && reply.(*qdrant.CollectionOperationResponse).GetResult() {
			delete(m.colls, rq.GetCollectionName())
			for a, c := range m.aliases {
				if c == rq.GetCollectionName() {
					delete(m.aliases, a)
				}
			}
			write(map[string]any{"op": "drop", "collection": m.edge(rq.GetCollectionName())})
		}
	case *qdrant.ChangeAliases:
		if emuErr != nil {
			return
		}
		for _, a := range rq.GetActions() {
			switch act := a.GetAction().(type) {
			case *qdrant.AliasOperations_CreateAlias:
				m.aliases[act.CreateAlias.GetAliasName()] = act.CreateAlias.GetCollectionName()
			case *qdrant.AliasOperations_DeleteAlias:
				delete(m.aliases, act.DeleteAlias.GetAliasName())
			case *qdrant.AliasOperations_RenameAlias:
				m.aliases[act.RenameAlias.GetNewAliasName()] = m.aliases[act.RenameAlias.GetOldAliasName()]
				delete(m.aliases, act.RenameAlias.GetOldAliasName())
			}
		}
	case *qdrant.UpsertPoints:
		pts := make([]any, 0, len(rq.GetPoints()))
		for _, p := range rq.GetPoints() {
			pts = append(pts, map[string]any{"id": pointID(p.GetId()), "vector": vectors(p.GetVectors()), "payload": payloadJSON(p.GetPayload())})
		}
		write(map[string]any{"op": "upsert", "collection": m.edge(rq.GetCollectionName()), "points": pts})
	case *qdrant.DeletePoints:
		r := map[string]any{"op": "delete", "collection": m.edge(rq.GetCollectionName())}
		selector(r, rq.GetPoints())
		write(r)
	case *qdrant.SetPayloadPoints:
		r := map[string]any{"op": "set_payload", "collection": m.edge(rq.GetCollectionName()), "payload": payloadJSON(rq.GetPayload())}
		if rq.Key != nil {
			r["key"] = rq.GetKey()
		}
		selector(r, rq.GetPointsSelector())
		write(r)
	case *qdrant.CreateFieldIndexCollection:
		r := map[string]any{"op": "index", "collection": m.edge(rq.GetCollectionName()), "field": rq.GetFieldName(),
			"type": strings.TrimPrefix(strings.ToLower(rq.GetFieldType().String()), "fieldtype")}
		if p := rq.GetFieldIndexParams(); p != nil {
			switch {
			case p.GetTextIndexParams() != nil:
				tp := p.GetTextIndexParams()
				ps := map[string]any{"tokenizer": strings.ToLower(tp.GetTokenizer().String())}
				if tp.Lowercase != nil {
					ps["lowercase"] = tp.GetLowercase()
				}
				if tp.PhraseMatching != nil {
					ps["phrase_matching"] = tp.GetPhraseMatching()
				}
				r["params"] = ps
			case p.GetIntegerIndexParams() != nil:
				ip := p.GetIntegerIndexParams()
				ps := map[string]any{}
				if ip.Lookup != nil {
					ps["lookup"] = ip.GetLookup()
				}
				if ip.Range != nil {
					ps["range"] = ip.GetRange()
				}
				r["params"] = ps
			}
		}
		write(r)
	case *qdrant.CountPoints:
		var got struct {
			Count int64 `json:"count"`
		}
		m.ask(map[string]any{"op": "count", "collection": m.edge(rq.GetCollectionName()), "filter": filterJSON(rq.GetFilter())}, &got, func(err error) {
			if m.bothFailed(method, req, emuErr, err) {
				return
			}
			if n := int64(reply.(*qdrant.CountResponse).GetResult().GetCount()); n != got.Count {
				m.diverge(method, req, n, got.Count, "count %d, engine %d", n, got.Count)
			}
		})
	case *qdrant.ScrollPoints:
		limit := uint32(10)
		if rq.Limit != nil {
			limit = rq.GetLimit()
		}
		r := map[string]any{"op": "scroll", "collection": m.edge(rq.GetCollectionName()), "filter": filterJSON(rq.GetFilter()),
			"limit": limit, "with_payload": withPayload(rq.GetWithPayload(), true), "with_vector": withVectors(rq.GetWithVectors())}
		if rq.Offset != nil {
			r["offset"] = pointID(rq.GetOffset())
		}
		var got struct {
			Points []record `json:"points"`
			Next   any      `json:"next"`
		}
		m.ask(r, &got, func(err error) {
			if m.bothFailed(method, req, emuErr, err) {
				return
			}
			rep := reply.(*qdrant.ScrollResponse)
			emu := retrieved(rep.GetResult())
			if d := samePoints(emu, got.Points, true); d != "" {
				m.diverge(method, req, emu, got.Points, "%s", d)
				return
			}
			var next any
			if rep.NextPageOffset != nil {
				next = pointID(rep.GetNextPageOffset())
			}
			if idKey(next) != idKey(got.Next) {
				m.diverge(method, req, next, got.Next, "next_page_offset %v, engine %v", next, got.Next)
			}
		})
	case *qdrant.GetPoints:
		ids := make([]any, 0, len(rq.GetIds()))
		for _, id := range rq.GetIds() {
			ids = append(ids, pointID(id))
		}
		var got struct {
			Points []record `json:"points"`
		}
		m.ask(map[string]any{"op": "get", "collection": m.edge(rq.GetCollectionName()), "ids": ids,
			"with_payload": withPayload(rq.GetWithPayload(), false), "with_vector": withVectors(rq.GetWithVectors())}, &got, func(err error) {
			if m.bothFailed(method, req, emuErr, err) {
				return
			}
			emu := retrieved(reply.(*qdrant.GetResponse).GetResult())
			if d := samePoints(emu, got.Points, false); d != "" {
				m.diverge(method, req, emu, got.Points, "%s", d)
			}
		})
	case *qdrant.QueryPoints:
		var res []*qdrant.ScoredPoint
		if emuErr == nil {
			res = reply.(*qdrant.QueryResponse).GetResult()
		}
		m.query(method, req, rq, res, emuErr)
	case *qdrant.QueryBatchPoints:
		for i, q := range rq.GetQueryPoints() {
			var res []*qdrant.ScoredPoint
			if emuErr == nil {
				res = reply.(*qdrant.QueryBatchResponse).GetResult()[i].GetResult()
			}
			if q.CollectionName == "" {
				q = proto.Clone(q).(*qdrant.QueryPoints)
				q.CollectionName = rq.GetCollectionName()
			}
			m.query(method, req, q, res, emuErr)
		}
	case *qdrant.SearchPoints:
		var res []*qdrant.ScoredPoint
		if emuErr == nil {
			res = reply.(*qdrant.SearchResponse).GetResult()
		}
		q := &qdrant.QueryPoints{
			CollectionName: rq.GetCollectionName(), Query: qdrant.NewQueryDense(rq.GetVector()), Using: rq.VectorName,
			Filter: rq.GetFilter(), Params: rq.GetParams(), ScoreThreshold: rq.ScoreThreshold, Limit: qdrant.PtrOf(rq.GetLimit()),
			Offset: rq.Offset, WithPayload: rq.GetWithPayload(), WithVectors: rq.GetWithVectors(),
		}
		m.query(method, req, q, res, emuErr)
	}
}

// bothFailed compares the outcome of a read: true when there is nothing more to compare
// (both failed, or the oracle broke, or the emulator does not implement the request).
func (m *Mirror) bothFailed(method string, req proto.Message, emuErr, edgeErr error) bool {
	if edgeErr != nil && !IsEngineError(edgeErr) {
		m.diverge(method, req, emuErr, edgeErr, "the oracle broke")
		return true
	}
	switch status.Code(emuErr) {
	case codes.OK, codes.InvalidArgument, codes.NotFound:
	default:
		// Not an answer of the engine: a cancelled call, a fault the test injected, or a
		// request the emulator does not implement.
		return true
	}
	switch {
	case emuErr == nil && edgeErr == nil:
		m.compared[method]++
		return false
	case emuErr != nil && edgeErr != nil:
		m.compared[method]++
		return true
	}
	m.diverge(method, req, emuErr, edgeErr, "only one of them failed")
	return true
}

// query compares one nearest query.
func (m *Mirror) query(method string, req proto.Message, q *qdrant.QueryPoints, emu []*qdrant.ScoredPoint, emuErr error) {
	near := q.GetQuery().GetNearest()
	if near.GetDense() == nil {
		m.diverge(method, req, "answered", "not asked", "only nearest queries by a dense vector are compared")
		return
	}
	vec := near.GetDense().GetData()
	coll := m.resolve(q.GetCollectionName())
	limit := uint64(10)
	if q.Limit != nil {
		limit = q.GetLimit()
	}
	r := map[string]any{"op": "query", "collection": m.edge(coll), "vector": floats(vec), "using": q.GetUsing(), "limit": limit,
		"filter": filterJSON(q.GetFilter()), "with_payload": withPayload(q.GetWithPayload(), false),
		"with_vector": withVectors(q.GetWithVectors())}
	if q.Offset != nil {
		r["offset"] = q.GetOffset()
	}
	if q.ScoreThreshold != nil {
		r["score_threshold"] = float64(q.GetScoreThreshold())
	}
	if p := q.GetParams(); p != nil {
		ps := map[string]any{"exact": p.GetExact()}
		if p.HnswEf != nil {
			ps["hnsw_ef"] = p.GetHnswEf()
		}
		r["params"] = ps
	}
	var got struct {
		Points []record `json:"points"`
	}
	smaller := strings.Contains(m.colls[coll], "euclid") || strings.Contains(m.colls[coll], "manhattan")
	var threshold *float64
	if q.ScoreThreshold != nil {
		t := float64(q.GetScoreThreshold())
		threshold = &t
	}
	m.ask(r, &got, func(err error) {
		if m.bothFailed(method, req, emuErr, err) {
			return
		}
		if d := sameScored(scored(emu), got.Points, int(limit), threshold, smaller); d != "" {
			m.diverge(method, req, scored(emu), got.Points, "%s", d)
		}
	})
}

// record is a point as both sides are compared: id, payload, vectors, score.
type record struct {
	ID      any                  `json:"id"`
	Payload map[string]any       `json:"payload,omitempty"`
	Vectors map[string][]float64 `json:"vectors,omitempty"`
	Score   *float64             `json:"score,omitempty"`
}

func retrieved(ps []*qdrant.RetrievedPoint) []record {
	out := make([]record, 0, len(ps))
	for _, p := range ps {
		out = append(out, record{ID: pointID(p.GetId()), Payload: payloadAny(p.GetPayload()), Vectors: vectorsOut(p.GetVectors())})
	}
	return out
}

func scored(ps []*qdrant.ScoredPoint) []record {
	out := make([]record, 0, len(ps))
	for _, p := range ps {
		s := float64(p.GetScore())
		out = append(out, record{ID: pointID(p.GetId()), Payload: payloadAny(p.GetPayload()), Vectors: vectorsOut(p.GetVectors()), Score: &s})
	}
	return out
}

// samePoints compares two lists of records, in order when ordered, else as sets; it
// returns the first difference, or "".
func samePoints(emu, edge []record, ordered bool) string {
	if !ordered {
		sortRecords(emu)
		sortRecords(edge)
	}
	if len(emu) != len(edge) {
		return fmt.Sprintf("%d points, engine %d: the emulator's only %s; the engine's only %s", len(emu), len(edge), show(minus(emu, edge)), show(minus(edge, emu)))
	}
	for i := range emu {
		if d := sameRecord(emu[i], edge[i]); d != "" {
			return fmt.Sprintf("point %d: %s", i, d)
		}
	}
	return ""
}

func sameRecord(a, b record) string {
	if idKey(a.ID) != idKey(b.ID) {
		return fmt.Sprintf("id %v, engine %v", a.ID, b.ID)
	}
	if (a.Payload == nil) != (b.Payload == nil) && len(a.Payload)+len(b.Payload) > 0 {
		return fmt.Sprintf("id %v: payload %v, engine %v", a.ID, a.Payload, b.Payload)
	}
	if !sameJSON(a.Payload, b.Payload) {
		return fmt.Sprintf("id %v: payload %s, engine %s", a.ID, show(a.Payload), show(b.Payload))
	}
	if len(a.Vectors) != len(b.Vectors) {
		return fmt.Sprintf("id %v: vectors %v, engine %v", a.ID, a.Vectors, b.Vectors)
	}
	for name, va := range a.Vectors {
		vb, ok := b.Vectors[name]
		if !ok || len(va) != len(vb) {
			return fmt.Sprintf("id %v: vector %q %v, engine %v", a.ID, name, va, vb)
		}
		for i := range va {
			if !close(va[i], vb[i]) {
				return fmt.Sprintf("id %v: vector %q %v, engine %v", a.ID, name, va, vb)
			}
		}
	}
	return ""
}

// close reports whether two scores or vector components agree within the rounding of
// f32 arithmetic done in different orders.
func close(a, b float64) bool {
	return math.Abs(a-b) <= 1e-4*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// sameScored compares two answers of a nearest query. Scores are compared within
// rounding, rank by rank (ties have no order); a point only one side returned must sit
// within rounding of the threshold, or of the last score of a full page.
func sameScored(emu, edge []record, limit int, threshold *float64, smaller bool) string {
	for _, rs := range [][]record{emu, edge} {
		for i := 1; i < len(rs); i++ {
			a, b := *rs[i-1].Score, *rs[i].Score
			if smaller && a > b && !close(a, b) || !smaller && a < b && !close(a, b) {
				return fmt.Sprintf("not ordered best first at rank %d", i)
			}
		}
	}
	for i := 0; i < min(len(emu), len(edge)); i++ {
		if !close(*emu[i].Score, *edge[i].Score) {
			return fmt.Sprintf("rank %d: score %v, engine %v", i, *emu[i].Score, *edge[i].Score)
		}
	}
	byID := func(rs []record) map[string]record {
		out := map[string]record{}
		for _, r := range rs {
			out[idKey(r.ID)] = r
		}
		return out
	}
	a, b := byID(emu), byID(edge)
	boundary := func(s float64, other []record) bool {
		if threshold != nil && close(s, *threshold) {
			return true
		}
		return len(other) >= limit && len(other) > 0 && close(s, *other[len(other)-1].Score)
	}
	for k, r := range a {
		if q, ok := b[k]; ok {
			if !close(*r.Score, *q.Score) {
				return fmt.Sprintf("id %v: score %v, engine %v", r.ID, *r.Score, *q.Score)
			}
			if d := sameRecord(withoutScore(r), withoutScore(q)); d != "" {
				return d
			}
		} else if !boundary(*r.Score, edge) {
			return fmt.Sprintf("id %v (score %v) found by the emulator only", r.ID, *r.Score)
		}
	}
	for k, r := range b {
		if _, ok := a[k]; !ok && !boundary(*r.Score, emu) {
			return fmt.Sprintf("id %v (score %v) found by the engine only", r.ID, *r.Score)
		}
	}
	return ""
}

// minus returns the records of a whose ids b lacks.
func minus(a, b []record) []record {
	in := map[string]bool{}
	for _, r := range b {
		in[idKey(r.ID)] = true
	}
	var out []record
	for _, r := range a {
		if !in[idKey(r.ID)] {
			out = append(out, r)
		}
	}
	return out
}

func withoutScore(r record) record { r.Score = nil; return r }

// idKey is the canonical text of an id: a decimal number or a lower-case UUID.
func idKey(id any) string {
	switch v := id.(type) {
	case nil:
		return ""
	case json.Number:
		return v.String()
	case uint64:
		return strconv.FormatUint(v, 10)
	case string:
		return strings.ToLower(v)
	}
	return fmt.Sprint(id)
}

func sortRecords(rs []record) {
	sort.Slice(rs, func(i, j int) bool { return idKey(rs[i].ID) < idKey(rs[j].ID) })
}

// pointID is the JSON form of an id: a number or a UUID string.
func pointID(id *qdrant.PointId) any {
	if id == nil {
		return nil
	}
	if u, ok := id.GetPointIdOptions().(*qdrant.PointId_Uuid); ok {
		return u.Uuid
	}
	return id.GetNum()
}

func selector(r map[string]any, s *qdrant.PointsSelector) {
	if f := s.GetFilter(); f != nil {
		r["filter"] = filterJSON(f)
		return
	}
	ids := []any{}
	for _, id := range s.GetPoints().GetIds() {
		ids = append(ids, pointID(id))
	}
	r["ids"] = ids
}

func withPayload(s *qdrant.WithPayloadSelector, def bool) any {
	switch v := s.GetSelectorOptions().(type) {
	case *qdrant.WithPayloadSelector_Enable:
		return v.Enable
	case *qdrant.WithPayloadSelector_Include:
		return v.Include.GetFields()
	case *qdrant.WithPayloadSelector_Exclude:
		return map[string]any{"exclude": v.Exclude.GetFields()}
	}
	return def
}

func withVectors(s *qdrant.WithVectorsSelector) bool {
	switch v := s.GetSelectorOptions().(type) {
	case *qdrant.WithVectorsSelector_Enable:
		return v.Enable
	case *qdrant.WithVectorsSelector_Include:
		return len(v.Include.GetNames()) > 0
	}
	return false
}

func distanceName(d qdrant.Distance) string { return strings.ToLower(d.String()) }

// vectorsConfig is the JSON form of a collection's dense vectors and a summary of their
// distances; ok is false for a layout the oracle does not take.
func vectorsConfig(c *qdrant.VectorsConfig) (map[string]any, string, bool) {
	if p := c.GetParams(); p != nil {
		return map[string]any{"": map[string]any{"size": p.GetSize(), "distance": distanceName(p.GetDistance())}}, distanceName(p.GetDistance()), true
	}
	if pm := c.GetParamsMap(); pm != nil {
		out := map[string]any{}
		var ds []string
		for name, p := range pm.GetMap() {
			out[name] = map[string]any{"size": p.GetSize(), "distance": distanceName(p.GetDistance())}
			ds = append(ds, distanceName(p.GetDistance()))
		}
		sort.Strings(ds)
		return out, strings.Join(ds, ","), true
	}
	return nil, "", false
}

func floats(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func dense(v *qdrant.Vector) []float32 {
	if d := v.GetDense(); d != nil {
		return d.GetData()
	}
	return v.Data //nolint:staticcheck // the deprecated form the client's helpers send
}

func vectors(v *qdrant.Vectors) map[string]any {
	if one := v.GetVector(); one != nil {
		return map[string]any{"": floats(dense(one))}
	}
	out := map[string]any{}
	for name, one := range v.GetVectors().GetVectors() {
		out[name] = floats(dense(one))
	}
	return out
}

func vectorsOut(v *qdrant.VectorsOutput) map[string][]float64 {
	if v == nil {
		return nil
	}
	if one := v.GetVector(); one != nil {
		d := one.GetDense().GetData()
		if d == nil {
			d = one.Data //nolint:staticcheck // the deprecated form
		}
		return map[string][]float64{"": floats(d)}
	}
	out := map[string][]float64{}
	for name, one := range v.GetVectors().GetVectors() {
		d := one.GetDense().GetData()
		if d == nil {
			d = one.Data //nolint:staticcheck // the deprecated form
		}
		out[name] = floats(d)
	}
	return out
}
