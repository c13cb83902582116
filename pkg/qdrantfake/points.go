package qdrantfake

import (
	"context"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type pointsService struct {
	qdrant.UnimplementedPointsServer
	s *Server
}

// ack is the answer to an applied write: Completed when the caller waited, else
// Acknowledged, as Qdrant reports it.
func (ps *pointsService) ack(wait *bool) *qdrant.PointsOperationResponse {
	op := ps.s.opID.Add(1)
	st := qdrant.UpdateStatus_Acknowledged
	if wait != nil && *wait {
		st = qdrant.UpdateStatus_Completed
	}
	return &qdrant.PointsOperationResponse{Result: &qdrant.UpdateResult{OperationId: &op, Status: st}}
}

func invalid(err error) error { return status.Error(codes.InvalidArgument, err.Error()) }

func (ps *pointsService) Upsert(_ context.Context, req *qdrant.UpsertPoints) (*qdrant.PointsOperationResponse, error) {
	if req.UpdateFilter != nil {
		return nil, status.Error(codes.Unimplemented, "qdrantfake: conditional upsert (update_filter) is not implemented")
	}
	mode := req.GetUpdateMode()
	keys := make([]pointKey, len(req.GetPoints()))
	for i, pt := range req.GetPoints() {
		k, err := keyOf(pt.GetId())
		if err != nil {
			return nil, invalid(err)
		}
		keys[i] = k
	}
	err := ps.s.write(req.GetCollectionName(), func(c *collection) error {
		for _, pt := range req.GetPoints() {
			if err := checkVectors(c.params, pt.GetVectors()); err != nil {
				return err
			}
		}
		for i, pt := range req.GetPoints() {
			_, exists := c.points[keys[i]]
			if (mode == qdrant.UpdateMode_InsertOnly && exists) || (mode == qdrant.UpdateMode_UpdateOnly && !exists) {
				continue
			}
			payload := pt.GetPayload()
			if payload == nil {
				payload = map[string]*qdrant.Value{}
			}
			c.upsert(keys[i], &point{payload: payload, vectors: normalizeVectors(c.params, pt.GetVectors()), deferred: ps.s.deferWrites.Load()})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ps.ack(req.Wait), nil
}

// Delete removes the points selected by ids or by filter, all of them, before it returns.
func (ps *pointsService) Delete(_ context.Context, req *qdrant.DeletePoints) (*qdrant.PointsOperationResponse, error) {
	err := ps.writeEach(req.GetCollectionName(), req.GetPoints(), func(c *collection, k pointKey) { c.remove(k) })
	if err != nil {
		return nil, err
	}
	return ps.ack(req.Wait), nil
}

// writeEach runs fn, under the write lock of the collection name, for every point sel
// selects (by ids, or by filter with deferred points included).
func (ps *pointsService) writeEach(name string, sel *qdrant.PointsSelector, fn func(c *collection, k pointKey)) error {
	s, err := selectionOf(sel)
	if err != nil {
		return err
	}
	return ps.s.write(name, func(c *collection) error {
		ids, err := s.keys(c)
		if err != nil {
			return err
		}
		for _, k := range ids {
			fn(c, k)
		}
		return nil
	})
}

// Count counts the visible points passing the filter; deferred points are not counted.
func (ps *pointsService) Count(_ context.Context, req *qdrant.CountPoints) (*qdrant.CountResponse, error) {
	if _, err := compile(req.GetFilter(), scope{}); err != nil {
		return nil, err
	}
	var n int
	err := ps.s.read(req.GetCollectionName(), func(c *collection) error {
		if req.GetFilter() == nil || isEmptyFilter(req.GetFilter()) {
			n = c.visible()
			return nil
		}
		p, err := compile(req.GetFilter(), c.scope())
		if err != nil {
			return err
		}
		n = len(c.matching(req.GetFilter(), p, false))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &qdrant.CountResponse{Result: &qdrant.CountResult{Count: uint64(n)}}, nil
}

// selection is a points selector: ids, or a filter.
type selection struct {
	ids    []pointKey
	filter *qdrant.Filter
}

// selectionOf checks sel: ids must parse, a filter must compile.
func selectionOf(sel *qdrant.PointsSelector) (selection, error) {
	var out selection
	switch s := sel.GetPointsSelectorOneOf().(type) {
	case *qdrant.PointsSelector_Points:
		for _, id := range s.Points.GetIds() {
			k, err := keyOf(id)
			if err != nil {
				return out, invalid(err)
			}
			out.ids = append(out.ids, k)
		}
	case *qdrant.PointsSelector_Filter:
		out.filter = s.Filter
		if _, err := compile(out.filter, scope{}); err != nil {
			return out, err
		}
	default:
		return out, status.Error(codes.InvalidArgument, "Wrong input: No PointSelector provided")
	}
	return out, nil
}

// keys are the selected ids, deferred points included, for a write on c. Callers hold
// c.mu for writing.
func (sel selection) keys(c *collection) ([]pointKey, error) {
	if sel.filter == nil {
		return sel.ids, nil
	}
	p, err := compile(sel.filter, c.scope())
	if err != nil {
		return nil, err
	}
	return c.matching(sel.filter, p, true), nil
}

func isEmptyFilter(f *qdrant.Filter) bool {
	return len(f.GetMust()) == 0 && len(f.GetShould()) == 0 && len(f.GetMustNot()) == 0 && f.GetMinShould() == nil
}

func (ps *pointsService) Scroll(_ context.Context, req *qdrant.ScrollPoints) (*qdrant.ScrollResponse, error) {
	if req.OrderBy != nil {
		return nil, status.Error(codes.Unimplemented, "qdrantfake: scroll with order_by is not implemented")
	}
	limit := 10
	if req.Limit != nil {
		if *req.Limit == 0 {
			return nil, status.Error(codes.InvalidArgument, "Bad request: Limit cannot be 0")
		}
		limit = int(*req.Limit)
	}
	var offset *pointKey
	if req.Offset != nil {
		k, err := keyOf(req.Offset)
		if err != nil {
			return nil, invalid(err)
		}
		offset = &k
	}
	if _, err := compile(req.GetFilter(), scope{}); err != nil {
		return nil, err
	}
	out := &qdrant.ScrollResponse{}
	err := ps.s.read(req.GetCollectionName(), func(c *collection) error {
		p, err := compile(req.GetFilter(), c.scope())
		if err != nil {
			return err
		}
		keys, next := c.scroll(req.GetFilter(), p, offset, limit)
		recs, err := records(c, keys, req.GetWithPayload(), true, req.GetWithVectors())
		if err != nil {
			return err
		}
		out.Result = recs
		if next != nil {
			out.NextPageOffset = next.id()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (ps *pointsService) Get(_ context.Context, req *qdrant.GetPoints) (*qdrant.GetResponse, error) {
	keys := make([]pointKey, 0, len(req.GetIds()))
	seen := map[pointKey]bool{}
	for _, id := range req.GetIds() {
		k, err := keyOf(id)
		if err != nil {
			return nil, invalid(err)
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	out := &qdrant.GetResponse{}
	err := ps.s.read(req.GetCollectionName(), func(c *collection) error {
		found := keys[:0:0]
		for _, k := range keys {
			if pt, ok := c.points[k]; ok && !pt.deferred {
				found = append(found, k)
			}
		}
		var err error
		out.Result, err = records(c, found, req.GetWithPayload(), false, req.GetWithVectors())
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CreateFieldIndex records a payload index, replacing one of another type on the same
// key as Qdrant does. Keyword, integer and uuid indexes serve filtered reads and deletes;
// every index changes how conditions on its key are answered (see filter.go). A text
// index is emulated with the word or whitespace tokenizer, lowercase or not, and
// phrase_matching; other text options answer Unimplemented. Re-creating an index is
// harmless.
func (ps *pointsService) CreateFieldIndex(_ context.Context, req *qdrant.CreateFieldIndexCollection) (*qdrant.PointsOperationResponse, error) {
	path, err := parsePath(req.GetFieldName())
	if err != nil {
		return nil, invalid(err)
	}
	if req.FieldType == nil {
		return nil, status.Error(codes.InvalidArgument, "Wrong input: field_type is required")
	}
	text := req.GetFieldIndexParams().GetTextIndexParams()
	if text != nil {
		switch text.GetTokenizer() {
		case qdrant.TokenizerType_Unknown, qdrant.TokenizerType_Word, qdrant.TokenizerType_Whitespace:
		default:
			return nil, status.Error(codes.Unimplemented, "qdrantfake: only the word and whitespace tokenizers are implemented")
		}
		if text.MinTokenLen != nil || text.MaxTokenLen != nil || text.Stopwords != nil || text.Stemmer != nil || text.GetAsciiFolding() {
			return nil, status.Error(codes.Unimplemented, "qdrantfake: token length, stopwords, stemmer and ascii folding are not implemented")
		}
	}
	err = ps.s.write(req.GetCollectionName(), func(c *collection) error {
		c.addIndex(req.GetFieldName(), path, req.GetFieldType(), text)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ps.ack(req.Wait), nil
}

func (ps *pointsService) DeleteFieldIndex(_ context.Context, req *qdrant.DeleteFieldIndexCollection) (*qdrant.PointsOperationResponse, error) {
	path, err := parsePath(req.GetFieldName())
	if err != nil {
		return nil, invalid(err)
	}
	err = ps.s.write(req.GetCollectionName(), func(c *collection) error {
		c.dropIndex(path)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ps.ack(req.Wait), nil
}

// records renders points. A nil payload selector means payloadDefault (true for scroll,
// false for get, as in Qdrant).
func records(c *collection, keys []pointKey, sel *qdrant.WithPayloadSelector, payloadDefault bool, vsel *qdrant.WithVectorsSelector) ([]*qdrant.RetrievedPoint, error) {
	out := make([]*qdrant.RetrievedPoint, 0, len(keys))
	for _, k := range keys {
		pt := c.points[k]
		rp := &qdrant.RetrievedPoint{Id: k.id()}
		var err error
		if rp.Payload, err = selectPayload(sel, payloadDefault, pt.payload); err != nil {
			return nil, err
		}
		if rp.Vectors, err = selectVectors(vsel, pt.vectors); err != nil {
			return nil, err
		}
		out = append(out, rp)
	}
	return out, nil
}

func selectPayload(sel *qdrant.WithPayloadSelector, def bool, p map[string]*qdrant.Value) (map[string]*qdrant.Value, error) {
	switch s := sel.GetSelectorOptions().(type) {
	case nil:
		if def {
			return p, nil
		}
		return nil, nil
	case *qdrant.WithPayloadSelector_Enable:
		if s.Enable {
			return p, nil
		}
		return nil, nil
	case *qdrant.WithPayloadSelector_Include:
		out := map[string]*qdrant.Value{}
		for _, f := range s.Include.GetFields() {
			key, err := topLevel(f)
			if err != nil {
				return nil, err
			}
			if v, ok := p[key]; ok {
				out[key] = v
			}
		}
		return out, nil
	case *qdrant.WithPayloadSelector_Exclude:
		drop := map[string]bool{}
		for _, f := range s.Exclude.GetFields() {
			key, err := topLevel(f)
			if err != nil {
				return nil, err
			}
			drop[key] = true
		}
		out := map[string]*qdrant.Value{}
		for k, v := range p {
			if !drop[k] {
				out[k] = v
			}
		}
		return out, nil
	}
	return nil, status.Error(codes.InvalidArgument, "Wrong input: malformed with_payload selector")
}

// topLevel returns the payload key f names, refusing nested paths.
func topLevel(f string) (string, error) {
	segs, err := parsePath(f)
	if err != nil {
		return "", invalid(err)
	}
	if len(segs) != 1 || len(segs[0].idxs) != 0 {
		return "", status.Error(codes.Unimplemented, "qdrantfake: nested payload selectors are not implemented")
	}
	return segs[0].key, nil
}
