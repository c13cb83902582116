package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/qdrant/go-client/qdrant"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// Subject is one seeded data subject. Subjects with Erase set get an erasure request;
// the others are bystanders whose data must stay intact.
type Subject struct {
	Index    int // position in Population.Subjects
	Tenant   string
	ID       string
	Sessions []string // the last one is legacy: its chunks carry only the session id
	Erase    bool
	Keys     []string // the Redis keys seeded for it
}

// Population is the seeded subjects, grouped by tenant.
type Population struct {
	Subjects []*Subject
	Tenants  []string
	ByTenant map[string][]*Subject
}

// Seeded amounts per subject.
const (
	chunksCurrent = 4 // Qdrant points with customer_id and the current session
	chunksLegacy  = 2 // Qdrant points with only the legacy session id
	keysPerTmpl   = 2 // Redis keys per key template and session
)

// NewPopulation makes n subjects to erase, perTenant to a tenant, and two bystanders per
// tenant chosen to trip careless matching: one whose id has an erased id as its prefix,
// and one with glob metacharacters in its id.
func NewPopulation(n, perTenant int) *Population {
	p := &Population{ByTenant: map[string][]*Subject{}}
	add := func(tenant, id string, erase bool) {
		s := &Subject{Index: len(p.Subjects), Tenant: tenant, ID: id, Erase: erase,
			Sessions: []string{"sess-" + id + "-now", "sess-" + id + "-legacy"}}
		p.Subjects = append(p.Subjects, s)
		p.ByTenant[tenant] = append(p.ByTenant[tenant], s)
	}
	for i := 0; i < n; i++ {
		tenant := fmt.Sprintf("tenant-%03d", i/perTenant)
		if i%perTenant == 0 {
			p.Tenants = append(p.Tenants, tenant)
		}
		id := fmt.Sprintf("cust-%05d@example.com", i)
		add(tenant, id, true)
		if i%perTenant == 0 {
			add(tenant, id+".x", false)
			add(tenant, fmt.Sprintf("cust-*-%d?", i), false)
		}
	}
	return p
}

// Erased returns the subjects to erase.
func (p *Population) Erased() []*Subject {
	var out []*Subject
	for _, s := range p.Subjects {
		if s.Erase {
			out = append(out, s)
		}
	}
	return out
}

func (s *Subject) subject(hash string) deletion.Subject {
	return deletion.Subject{Tenant: s.Tenant, ID: s.ID, Hash: hash, Sessions: s.Sessions, Scope: event.ScopeSubject}
}

// Seed writes every subject's data into the five stores as the RAG application would,
// through the harness's own clients, tenant by tenant in parallel.
func (s *System) Seed(ctx context.Context, p *Population) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, t := range p.Tenants {
		g.Go(func() error { return s.seedTenant(gctx, t, p.ByTenant[t]) })
	}
	return g.Wait()
}

func (s *System) seedTenant(ctx context.Context, tenant string, subs []*Subject) error {
	for _, st := range s.Inventory.Stores {
		var err error
		switch st.Kind {
		case qdrantstore.Kind:
			err = s.seedQdrant(ctx, st, tenant, subs)
		case redisstore.Kind:
			err = s.seedRedis(ctx, st, subs)
		case datasetstore.Kind:
			err = s.seedDatasets(ctx, tenant, subs)
		case auditlog.Kind:
			w := auditlog.NewWriter(s.Audit, s.Key)
			for _, sub := range subs {
				if err = w.Query(ctx, tenant, sub.ID, sub.Sessions[0], "where is my order?", []string{"chunk-1"}, "gpt-4o-mini", "/v1/chat"); err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("seed %s: %w", st.Name, err)
		}
	}
	return nil
}

func collection(st inventory.Entry, tenant string) string {
	l, err := qdrantstore.LocatorsOf(st)
	if err != nil {
		panic(err) // the chaos inventory is the reference one, valid by its tests
	}
	return inventory.Expand(l.Collections[0], inventory.Vars{Tenant: tenant}, nil)
}

func (s *System) seedQdrant(ctx context.Context, st inventory.Entry, tenant string, subs []*Subject) error {
	coll := collection(st, tenant)
	err := s.Qdrant.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: coll,
		VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: chunkDim, Distance: qdrant.Distance_Cosine})})
	if err != nil {
		return err
	}
	if err := qdrantstore.New(s.Qdrant).EnsureIndexes(ctx, st, tenant); err != nil {
		return err
	}
	var points []*qdrant.PointStruct
	for _, sub := range subs {
		for i := 0; i < chunksCurrent+chunksLegacy; i++ {
			payload := map[string]any{"text": fmt.Sprintf("chunk %d", i), "session_id": sub.Sessions[1]}
			if i < chunksCurrent {
				payload["customer_id"], payload["session_id"] = sub.ID, sub.Sessions[0]
			}
			points = append(points, &qdrant.PointStruct{Id: qdrant.NewIDNum(uint64(len(points) + 1)),
				Vectors: qdrant.NewVectorsDense(chunkVector(uint64(len(points) + 1))), Payload: qdrant.NewValueMap(payload)})
		}
	}
	_, err = s.Qdrant.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Points: points, Wait: aws.Bool(true)})
	return err
}

// seedRedis writes keysPerTmpl keys per template and session of each subject, listing
// every key in the subject's index (the stores are index_only).
func (s *System) seedRedis(ctx context.Context, st inventory.Entry, subs []*Subject) error {
	l, err := redisstore.LocatorsOf(st)
	if err != nil {
		return err
	}
	for _, sub := range subs {
		ds := sub.subject(s.Key.Pseudonym(sub.Tenant, sub.ID))
		pipe := s.Redis.Pipeline()
		var indexed []string
		for _, sess := range sub.Sessions {
			for _, tmpl := range l.Keys {
				for i := 0; i < keysPerTmpl; i++ {
					k := redisstore.Key(tmpl, ds.Vars(sess), fmt.Sprintf("%s:%d", redisstore.KeyPart(sess), i))
					pipe.Set(ctx, k, "turn", 0)
					sub.Keys = append(sub.Keys, k)
					indexed = append(indexed, k)
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		if err := redisstore.Index(ctx, s.Redis, st, ds, indexed...); err != nil {
			return err
		}
	}
	return nil
}

// Dataset objects of a tenant.
func datasetKeys(tenant string) []string {
	return []string{tenant + "/ragas_eval.csv", tenant + "/intent_labels.jsonl"}
}

// seedDatasets writes the tenant's CSV and JSONL datasets twice, so an older version
// holds every subject's rows too. Each subject has one row per session in each.
func (s *System) seedDatasets(ctx context.Context, tenant string, subs []*Subject) error {
	for version := 1; version <= 2; version++ {
		var csv, jsonl strings.Builder
		csv.WriteString("customer_id,session_id,question,ground_truth\n")
		for _, sub := range subs {
			fmt.Fprintf(&csv, "%q,%q,\"is this kurta, in blue, available?\",\"yes\"\n", sub.ID, sub.Sessions[0])
			fmt.Fprintf(&csv, ",%q,\"legacy question\",\"legacy answer v%d\"\n", sub.Sessions[1], version)
			line, _ := json.Marshal(map[string]any{"customer_id": sub.ID, "session_id": sub.Sessions[0], "label": "order_status", "v": version})
			jsonl.Write(append(line, '\n'))
		}
		keys := datasetKeys(tenant)
		for i, body := range []string{csv.String(), jsonl.String()} {
			if _, err := s.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(keys[i]), Body: strings.NewReader(body)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// chunkDim is the dimension of the seeded chunks' vectors.
const chunkDim = 16

// chunkVector is point id's vector: Gaussian and seeded by id, so unrelated chunks are as
// far apart as real embeddings of unrelated text (cosine near 0), and the semantic
// read-back finds no near-duplicates that were never seeded.
func chunkVector(id uint64) []float32 {
	r := rand.New(rand.NewPCG(id, 0x6c65746865))
	v := make([]float32, chunkDim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}
