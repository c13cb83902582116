package qdrantfake

import (
	"context"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// SetPayload merges the request's payload into the payload of the selected points (by ids
// or by filter), replacing only the keys it names, as Qdrant's set_payload does. With key
// set (a path of object keys, e.g. "metadata"), the payload is merged into the object at
// that path, which is created when missing; paths with array indexes answer
// Unimplemented. Points that do not exist are skipped.
func (ps *pointsService) SetPayload(_ context.Context, req *qdrant.SetPayloadPoints) (*qdrant.PointsOperationResponse, error) {
	var path []segment
	if req.Key != nil {
		segs, err := parsePath(req.GetKey())
		if err != nil {
			return nil, invalid(err)
		}
		for _, s := range segs {
			if len(s.idxs) > 0 {
				return nil, status.Error(codes.Unimplemented, "qdrantfake: set_payload with an array index in key is not implemented")
			}
		}
		path = segs
	}
	err := ps.writeEach(req.GetCollectionName(), req.GetPointsSelector(), func(c *collection, k pointKey) {
		if old, ok := c.points[k]; ok {
			c.upsert(k, &point{payload: mergeAt(old.payload, path, req.GetPayload()), vectors: old.vectors, deferred: old.deferred})
		}
	})
	if err != nil {
		return nil, err
	}
	return ps.ack(req.Wait), nil
}

// mergeAt returns a copy of payload with add merged into the object at path (the root
// when path is empty); payload itself is not modified.
func mergeAt(payload map[string]*qdrant.Value, path []segment, add map[string]*qdrant.Value) map[string]*qdrant.Value {
	out := make(map[string]*qdrant.Value, len(payload)+len(add))
	for k, v := range payload {
		out[k] = v
	}
	if len(path) == 0 {
		for k, v := range add {
			out[k] = proto.Clone(v).(*qdrant.Value)
		}
		return out
	}
	inner := map[string]*qdrant.Value{}
	if st := payload[path[0].key].GetStructValue(); st != nil {
		inner = st.GetFields()
	}
	merged := mergeAt(inner, path[1:], add)
	out[path[0].key] = &qdrant.Value{Kind: &qdrant.Value_StructValue{StructValue: &qdrant.Struct{Fields: merged}}}
	return out
}
