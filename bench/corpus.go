package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/qdrant/go-client/qdrant"
	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Footprint of one subject, as in the seeds' story: 50 chunks (17 of them legacy chunks
// that carry only the older session id), 11 Redis keys (session history, query cache,
// agent graph state) and one labelled dataset row.
const (
	TaggedChunks = 33
	LegacyChunks = 17
	KeysPerSub   = 11
	// otherChunks is how many chunks each unrelated customer has in the corpus.
	otherChunks = 20
	// otherKeys is how many keys each unrelated customer has (10 keys and its index set).
	otherKeys = 11
)

// Customer is a data subject of the benchmark corpus.
type Customer struct {
	Tenant   string
	ID       string
	Sessions []string // current, then legacy
}

// NewCustomer names customer n of tenant; kind ("sub" or "other") keeps targets and
// unrelated customers apart.
func NewCustomer(tenant, kind string, n int) Customer {
	id := fmt.Sprintf("%s-%07d@example.test", kind, n)
	return Customer{Tenant: tenant, ID: id, Sessions: []string{fmt.Sprintf("s-%s-%07d-cur", kind, n), fmt.Sprintf("s-%s-%07d-old", kind, n)}}
}

// Subject is c as the deleters see it.
func (c Customer) Subject(k subject.Key) deletion.Subject {
	return deletion.Subject{Tenant: c.Tenant, ID: c.ID, Hash: k.Pseudonym(c.Tenant, c.ID), Sessions: c.Sessions, Scope: event.ScopeSubject}
}

// Collection is the Qdrant collection of tenant in inv.
func Collection(inv *inventory.Inventory, tenant string) string {
	return inventory.Expand(qdrantLocators(inv).Collections[0], inventory.Vars{Tenant: tenant}, nil)
}

// CreateCollection creates tenant's collection with keyword indexes on the subject fields.
func CreateCollection(ctx context.Context, q *qdrant.Client, inv *inventory.Inventory, tenant string) error {
	err := q.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: Collection(inv, tenant),
		VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: chunkDim, Distance: qdrant.Distance_Cosine})})
	if err != nil {
		return fmt.Errorf("qdrant create collection: %w", err)
	}
	return qdrantstore.New(q).EnsureIndexes(ctx, inv.OfKinds(qdrantstore.Kind)[0], tenant)
}

// qdrantBatch is how many points one seeding upsert carries.
const qdrantBatch = 5000

// SeedQdrant upserts the chunks of customers: the targets' 50 each (hash-tagged, with the
// legacy ones carrying only a session), and otherChunks per unrelated customer, starting at
// point id firstID. It returns the next free id.
func SeedQdrant(ctx context.Context, q *qdrant.Client, k subject.Key, coll string, targets, others []Customer, firstID uint64) (uint64, error) {
	id := firstID
	var batch []*qdrant.PointStruct
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := q.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Points: batch, Wait: aws.Bool(true)})
		batch = batch[:0]
		if err != nil {
			return fmt.Errorf("qdrant upsert: %w", err)
		}
		return nil
	}
	add := func(payload map[string]*qdrant.Value) error {
		batch = append(batch, &qdrant.PointStruct{Id: qdrant.NewIDNum(id), Vectors: qdrant.NewVectorsDense(chunkVector(id)), Payload: payload})
		id++
		if len(batch) == qdrantBatch {
			return flush()
		}
		return nil
	}
	for _, c := range targets {
		hash := k.Pseudonym(c.Tenant, c.ID)
		for i := range TaggedChunks + LegacyChunks {
			p := map[string]*qdrant.Value{"chunk": qdrant.NewValueInt(int64(i))}
			if i < TaggedChunks {
				p["customer_id"] = qdrant.NewValueString(c.ID)
				p["customer_hash"] = qdrant.NewValueString(hash)
				p["session_id"] = qdrant.NewValueString(c.Sessions[0])
			} else {
				p["session_id"] = qdrant.NewValueString(c.Sessions[1])
			}
			if err := add(p); err != nil {
				return id, err
			}
		}
	}
	for _, c := range others {
		for i := range otherChunks {
			p := map[string]*qdrant.Value{
				"chunk":       qdrant.NewValueInt(int64(i)),
				"customer_id": qdrant.NewValueString(c.ID),
				"session_id":  qdrant.NewValueString(c.Sessions[0]),
			}
			if err := add(p); err != nil {
				return id, err
			}
		}
	}
	return id, flush()
}

// redisKeys lists the keys of c per the application's convention (redisstore.Key), grouped
// by inventory store: n keys in all, spread over session history, cache and graph state,
// current session first.
func redisKeys(inv *inventory.Inventory, c Customer, n int) map[string][]string {
	out := map[string][]string{}
	type slot struct{ store, tmpl string }
	var slots []slot
	for _, st := range inv.OfKinds(redisstore.Kind) {
		for _, t := range redisLocators(st).Keys {
			slots = append(slots, slot{st.Name, t})
		}
	}
	v := inventory.Vars{Tenant: c.Tenant, Subject: c.ID}
	for i := range n {
		s := slots[i%len(slots)]
		sess := c.Sessions[(i/len(slots))%2]
		out[s.store] = append(out[s.store], redisstore.Key(s.tmpl, v, fmt.Sprintf("%s:%d", redisstore.KeyPart(sess), i)))
	}
	return out
}

// SeedRedisTargets writes each target's 11 keys and lists them in its index with
// redisstore.Index, as the application does.
func SeedRedisTargets(ctx context.Context, rc redis.UniversalClient, inv *inventory.Inventory, k subject.Key, targets []Customer) error {
	stores := map[string]inventory.Entry{}
	for _, st := range inv.OfKinds(redisstore.Kind) {
		stores[st.Name] = st
	}
	for _, c := range targets {
		byStore := redisKeys(inv, c, KeysPerSub)
		pipe := rc.Pipeline()
		for _, keys := range byStore {
			for _, key := range keys {
				pipe.Set(ctx, key, "turn of the conversation", 0)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("redis seed: %w", err)
		}
		for name, keys := range byStore {
			if err := redisstore.Index(ctx, rc, stores[name], c.Subject(k), keys...); err != nil {
				return fmt.Errorf("redis index: %w", err)
			}
		}
	}
	return nil
}

// redisPipeline is how many commands one seeding round trip carries.
const redisPipeline = 10000

// SeedRedisOthers writes n unrelated keys: customers of otherKeys keys each (their own
// index set included), in pipelined batches. Customers are numbered from first.
func SeedRedisOthers(ctx context.Context, rc redis.UniversalClient, inv *inventory.Inventory, tenant string, first, n int) error {
	idxTmpl := redisLocators(inv.OfKinds(redisstore.Kind)[0]).Index
	pipe := rc.Pipeline()
	queued := 0
	for c := first; queued < n || pipe.Len() > 0; c++ {
		if queued < n {
			cust := NewCustomer(tenant, "other", c)
			var all []any
			for _, keys := range redisKeys(inv, cust, otherKeys-1) {
				for _, key := range keys {
					pipe.Set(ctx, key, "turn of the conversation", 0)
					all = append(all, key)
				}
			}
			pipe.SAdd(ctx, redisstore.Key(idxTmpl, inventory.Vars{Tenant: tenant, Subject: cust.ID}, ""), all...)
			queued += otherKeys
		}
		if pipe.Len() >= redisPipeline || queued >= n {
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("redis seed: %w", err)
			}
		}
	}
	return nil
}

// DatasetKey is the object that holds tenant's labelled evaluation set.
func DatasetKey(tenant string) string { return tenant + "/ragas_eval.csv" }

// SeedDataset writes tenant's evaluation set as one CSV object, DatasetCSV.
func SeedDataset(ctx context.Context, s3c *s3.Client, tenant string, targets []Customer, rows int) error {
	_, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(embedded.DatasetBucket), Key: aws.String(DatasetKey(tenant)), Body: bytes.NewReader(DatasetCSV(tenant, targets, rows))})
	if err != nil {
		return fmt.Errorf("s3 put: %w", err)
	}
	return nil
}

// DatasetCSV is tenant's evaluation set: a header, then rows unrelated rows with one row
// per target (its current session) spread evenly through them.
func DatasetCSV(tenant string, targets []Customer, rows int) []byte {
	var b bytes.Buffer
	b.Grow((rows + len(targets) + 1) * 96)
	b.WriteString("customer_id,session_id,question,ground_truth,faithfulness\n")
	row := func(c Customer) {
		fmt.Fprintf(&b, "%s,%s,\"is this kurta, in blue, available?\",\"yes, sizes S-XL\",0.9\n", c.ID, c.Sessions[0])
	}
	for i := range rows {
		row(NewCustomer(tenant, "other", i))
		if len(targets) > 0 && i%(rows/len(targets)+1) == 0 {
			row(targets[0])
			targets = targets[1:]
		}
	}
	for _, c := range targets {
		row(c)
	}
	return b.Bytes()
}

// qdrantLocators are the locators of the first qdrant store of inv, a reference inventory.
func qdrantLocators(inv *inventory.Inventory) qdrantstore.Locators {
	l, err := qdrantstore.LocatorsOf(inv.OfKinds(qdrantstore.Kind)[0])
	if err != nil {
		panic(err)
	}
	return l
}

// redisLocators are the locators of st, a store of a reference inventory.
func redisLocators(st inventory.Entry) redisstore.Locators {
	l, err := redisstore.LocatorsOf(st)
	if err != nil {
		panic(err)
	}
	return l
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
