// Package qdrantfake is an in-process Qdrant for tests and the standalone mode: a gRPC
// server implementing the parts of Qdrant's API that Lethe's deleter and demo seeder use,
// for the unmodified official client (github.com/qdrant/go-client) over a real TCP
// listener.
//
// It follows Qdrant's semantics where it implements them: filters with must / should /
// must_not / min_should, nested filters, keyword / integer / bool / any / except / text /
// text_any / phrase matches, numeric ranges, has_id, is_empty, is_null and nested
// conditions, with a condition on an array payload passing when any element does and an
// empty Condition dropped as Qdrant drops it; payload paths in Qdrant's grammar; payload
// indexes that change answers as Qdrant's do (except sees only indexed values, a uuid
// index matches any spelling of a UUID, a text index tokenises, every index makes is_null
// true on [null], an integer index holds integral doubles); aliases; scroll in ascending
// id order (every numeric id before every UUID) with next_page_offset; exact counts;
// deletes by ids or by filter; set_payload; exact nearest-neighbour Search, SearchBatch,
// Query and QueryBatch by a dense vector with Qdrant's scores for cosine (vectors
// normalised at upsert), dot, euclid and manhattan, a strict score_threshold and the same
// filters (search.go); codes.NotFound with Qdrant's message for a missing collection.
// Everything else — recommend, fusion and other queries, sparse vectors, geo,
// values_count, snapshots — answers codes.Unimplemented. docs/qdrant-emulator.md lists each behaviour with the
// Qdrant source it follows and the test that pins it.
//
// Where Qdrant releases differ, SetRelease chooses whose semantics filters follow: 1.17 to
// 1.19 (the default) or 1.20 (the engine of Qdrant Edge, which pkg/qdrantfake/edgediff
// checks the emulator against).
//
// Writes are applied before the call returns, so wait=true and wait=false differ only in
// the reported status, unless SetDeferredVisibility is on: then new points are deleted by
// filter but not counted until Reveal, as Qdrant's deferred points are. InjectFault makes
// calls fail with a status (e.g. FailedPrecondition) or answer a write with WaitTimeout.
//
// Keyword, integer and uuid payload indexes created with CreateFieldIndex are kept as
// value -> ids maps, so a count, scroll or delete whose filter matches an indexed value
// costs in proportion to the matches, not to the collection; any other filter scans. Data
// lives in memory only. A Server is safe for concurrent use.
package qdrantfake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// Version is the Qdrant version the emulator reports in its health check.
const Version = "1.17.1"

// Server is the emulator. Create it with New (then Serve) or Start.
type Server struct {
	grpc        *grpc.Server
	examined    atomic.Uint64
	opID        atomic.Uint64
	deferWrites atomic.Bool
	release     atomic.Int32
	faults      faults

	mu          sync.RWMutex
	collections map[string]*collection
	aliases     map[string]string // alias -> collection
	lis         net.Listener
}

// New returns a server that is not yet listening.
func New() *Server {
	s := &Server{collections: map[string]*collection{}, aliases: map[string]string{}}
	s.grpc = grpc.NewServer(
		grpc.UnaryInterceptor(s.faults.intercept),
		grpc.MaxRecvMsgSize(64<<20),
		// The official client pings every 10 s even when idle.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
	qdrant.RegisterQdrantServer(s.grpc, healthService{})
	qdrant.RegisterCollectionsServer(s.grpc, &collectionsService{s: s})
	qdrant.RegisterPointsServer(s.grpc, &pointsService{s: s})
	// Server reflection, so grpcurl and other generic gRPC clients can list and call it.
	reflection.Register(s.grpc)
	return s
}

// Start listens on a free port of 127.0.0.1 and serves in the background until Close is
// called or ctx is done.
func Start(ctx context.Context) (*Server, error) { return StartAt(ctx, "127.0.0.1:0") }

// StartAt is Start listening on addr (host:port).
func StartAt(ctx context.Context, addr string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("qdrantfake: listen: %w", err)
	}
	s := New()
	s.setListener(l)
	go func() { _ = s.grpc.Serve(l) }()
	context.AfterFunc(ctx, s.Close)
	return s, nil
}

// Serve serves on l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	s.setListener(l)
	if err := s.grpc.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("qdrantfake: serve: %w", err)
	}
	return nil
}

func (s *Server) setListener(l net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lis = l
}

// Addr is the listening address ("127.0.0.1:port"), or "" before Serve.
func (s *Server) Addr() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// Host is the listening host, for qdrant.Config.Host.
func (s *Server) Host() string {
	h, _, _ := net.SplitHostPort(s.Addr())
	return h
}

// Port is the listening port, for qdrant.Config.Port (0 before Serve).
func (s *Server) Port() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.lis == nil {
		return 0
	}
	if t, ok := s.lis.Addr().(*net.TCPAddr); ok {
		return t.Port
	}
	return 0
}

// Config returns a client configuration for this server.
func (s *Server) Config() *qdrant.Config {
	return &qdrant.Config{Host: s.Host(), Port: s.Port(), SkipCompatibilityCheck: true}
}

// Close stops the server at once, failing calls in flight. It is idempotent.
func (s *Server) Close() { s.grpc.Stop() }

// PointsExamined is how many points all calls so far checked against a filter: a measure
// of whether payload indexes were used.
func (s *Server) PointsExamined() uint64 { return s.examined.Load() }

// SetDeferredVisibility turns the deferred mode on or off. While it is on, every point
// upserted is stored deferred: a delete by filter or by id removes it, but count, scroll
// and get do not see it until Reveal. This is what Qdrant 1.18+ does with points not yet
// optimized under optimizers.prevent_unoptimized (count uses DeferredBehavior::VisibleOnly,
// delete WithDeferred), and what a count racing a wait=false upsert sees.
func (s *Server) SetDeferredVisibility(on bool) { s.deferWrites.Store(on) }

// Reveal makes every deferred point of every collection visible, as an optimizer run
// does.
func (s *Server) Reveal() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, c := range s.collections {
		c.mu.Lock()
		c.reveal()
		c.mu.Unlock()
	}
}

// get returns the live collection name names, directly or through an alias (an alias
// wins, as in Qdrant's TableOfContent::resolve_name), or a NotFound status.
func (s *Server) get(name string) (*collection, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if target, ok := s.aliases[name]; ok {
		name = target
	}
	c, ok := s.collections[name]
	if !ok {
		return nil, notFound(name)
	}
	return c, nil
}

// read runs fn on the collection name under its read lock.
func (s *Server) read(name string, fn func(c *collection) error) error {
	c, err := s.get(name)
	if err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.dropped {
		return notFound(name)
	}
	return fn(c)
}

// write runs fn on the collection name under its write lock.
func (s *Server) write(name string, fn func(c *collection) error) error {
	c, err := s.get(name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return notFound(name)
	}
	return fn(c)
}

type healthService struct {
	qdrant.UnimplementedQdrantServer
}

func (healthService) HealthCheck(context.Context, *qdrant.HealthCheckRequest) (*qdrant.HealthCheckReply, error) {
	return &qdrant.HealthCheckReply{Title: "qdrant - vector search engine", Version: Version}, nil
}

type collectionsService struct {
	qdrant.UnimplementedCollectionsServer
	s *Server
}

func validName(name string) error {
	if name == "" || len(name) > 255 || strings.ContainsAny(name, "<>:\"/\\|?*\x00") {
		return status.Errorf(codes.InvalidArgument, "Validation error in body: [collection_name: value %q is invalid]", name)
	}
	return nil
}

func (cs *collectionsService) Create(_ context.Context, req *qdrant.CreateCollection) (*qdrant.CollectionOperationResponse, error) {
	name := req.GetCollectionName()
	if err := validName(name); err != nil {
		return nil, err
	}
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.collections[name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "Wrong input: Collection `%s` already exists!", name)
	}
	params := &qdrant.CollectionParams{ShardNumber: 1, VectorsConfig: req.GetVectorsConfig(), SparseVectorsConfig: req.GetSparseVectorsConfig()}
	s.collections[name] = newCollection(name, params, &s.examined, &s.release)
	return &qdrant.CollectionOperationResponse{Result: true}, nil
}

// Delete drops a collection and every alias of it; like Qdrant it answers false, not an
// error, when there is none. An alias is not resolved: deleting one answers false and
// leaves the alias and its collection (toc/collection_meta_ops.rs, delete_collection).
func (cs *collectionsService) Delete(_ context.Context, req *qdrant.DeleteCollection) (*qdrant.CollectionOperationResponse, error) {
	s := cs.s
	name := req.GetCollectionName()
	s.mu.Lock()
	c, ok := s.collections[name]
	delete(s.collections, name)
	for a, target := range s.aliases {
		if target == name {
			delete(s.aliases, a)
		}
	}
	s.mu.Unlock()
	if !ok {
		return &qdrant.CollectionOperationResponse{Result: false}, nil
	}
	c.mu.Lock()
	c.dropped = true
	c.mu.Unlock()
	return &qdrant.CollectionOperationResponse{Result: true}, nil
}

func (cs *collectionsService) List(context.Context, *qdrant.ListCollectionsRequest) (*qdrant.ListCollectionsResponse, error) {
	s := cs.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := &qdrant.ListCollectionsResponse{}
	for name := range s.collections {
		out.Collections = append(out.Collections, &qdrant.CollectionDescription{Name: name})
	}
	return out, nil
}

func (cs *collectionsService) CollectionExists(_ context.Context, req *qdrant.CollectionExistsRequest) (*qdrant.CollectionExistsResponse, error) {
	_, err := cs.s.get(req.GetCollectionName())
	return &qdrant.CollectionExistsResponse{Result: &qdrant.CollectionExists{Exists: err == nil}}, nil
}

func (cs *collectionsService) Get(_ context.Context, req *qdrant.GetCollectionInfoRequest) (*qdrant.GetCollectionInfoResponse, error) {
	var info *qdrant.CollectionInfo
	err := cs.s.read(req.GetCollectionName(), func(c *collection) error {
		n := uint64(len(c.points))
		schema := map[string]*qdrant.PayloadSchemaInfo{}
		for key, idx := range c.indexes {
			si := &qdrant.PayloadSchemaInfo{DataType: schemaType(idx.typ)}
			if idx.text != nil {
				si.Params = &qdrant.PayloadIndexParams{IndexParams: &qdrant.PayloadIndexParams_TextIndexParams{TextIndexParams: idx.text}}
			}
			if idx.byValue != nil {
				seen := idSet{}
				for _, set := range idx.byValue {
					for k := range set {
						seen[k] = struct{}{}
					}
				}
				n := uint64(len(seen))
				si.Points = &n
			}
			schema[c.names[key]] = si
		}
		info = &qdrant.CollectionInfo{
			Status:          qdrant.CollectionStatus_Green,
			OptimizerStatus: &qdrant.OptimizerStatus{Ok: true},
			SegmentsCount:   1,
			Config: &qdrant.CollectionConfig{
				Params:          c.params,
				HnswConfig:      defaultHnsw(),
				OptimizerConfig: defaultOptimizers(),
				WalConfig:       defaultWal(),
			},
			PayloadSchema:       schema,
			PointsCount:         &n,
			IndexedVectorsCount: new(uint64),
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &qdrant.GetCollectionInfoResponse{Result: info}, nil
}

// defaultHnsw, defaultOptimizers and defaultWal are the configuration a collection created
// without one reports: Qdrant's defaults (config/config.yaml, storage.hnsw_index,
// storage.optimizers, storage.wal). Clients such as the Python client's gRPC conversion
// read them as required fields.
func defaultHnsw() *qdrant.HnswConfigDiff {
	return &qdrant.HnswConfigDiff{M: qdrant.PtrOf(uint64(16)), EfConstruct: qdrant.PtrOf(uint64(100)),
		FullScanThreshold: qdrant.PtrOf(uint64(10000)), MaxIndexingThreads: qdrant.PtrOf(uint64(0)), OnDisk: qdrant.PtrOf(false)}
}

func defaultOptimizers() *qdrant.OptimizersConfigDiff {
	return &qdrant.OptimizersConfigDiff{DeletedThreshold: qdrant.PtrOf(0.2), VacuumMinVectorNumber: qdrant.PtrOf(uint64(1000)),
		DefaultSegmentNumber: qdrant.PtrOf(uint64(0)), IndexingThreshold: qdrant.PtrOf(uint64(10000)), FlushIntervalSec: qdrant.PtrOf(uint64(5))}
}

func defaultWal() *qdrant.WalConfigDiff {
	return &qdrant.WalConfigDiff{WalCapacityMb: qdrant.PtrOf(uint64(32)), WalSegmentsAhead: qdrant.PtrOf(uint64(0))}
}

func schemaType(t qdrant.FieldType) qdrant.PayloadSchemaType {
	switch t {
	case qdrant.FieldType_FieldTypeKeyword:
		return qdrant.PayloadSchemaType_Keyword
	case qdrant.FieldType_FieldTypeInteger:
		return qdrant.PayloadSchemaType_Integer
	case qdrant.FieldType_FieldTypeFloat:
		return qdrant.PayloadSchemaType_Float
	case qdrant.FieldType_FieldTypeGeo:
		return qdrant.PayloadSchemaType_Geo
	case qdrant.FieldType_FieldTypeText:
		return qdrant.PayloadSchemaType_Text
	case qdrant.FieldType_FieldTypeBool:
		return qdrant.PayloadSchemaType_Bool
	case qdrant.FieldType_FieldTypeDatetime:
		return qdrant.PayloadSchemaType_Datetime
	case qdrant.FieldType_FieldTypeUuid:
		return qdrant.PayloadSchemaType_Uuid
	}
	return qdrant.PayloadSchemaType_UnknownType
}
