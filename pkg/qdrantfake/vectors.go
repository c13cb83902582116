package qdrantfake

import (
	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// checkVectors rejects a dense vector whose length differs from the size of the
// collection's single unnamed vector, as Qdrant does. Other layouts are stored unchecked.
func checkVectors(params *qdrant.CollectionParams, v *qdrant.Vectors) error {
	vp := params.GetVectorsConfig().GetParams()
	if vp == nil || vp.GetSize() == 0 || v.GetVector() == nil {
		return nil
	}
	if d := dense(v.GetVector()); d != nil && uint64(len(d)) != vp.GetSize() {
		return status.Errorf(codes.InvalidArgument, "Wrong input: Vector dimension error: expected dim: %d, got %d", vp.GetSize(), len(d))
	}
	return nil
}

// dense returns the data of a dense vector, given in either of its wire forms, or nil.
func dense(v *qdrant.Vector) []float32 {
	if d := v.GetDense(); d != nil {
		return d.GetData()
	}
	if v.GetVector() == nil && v.Indices == nil && v.VectorsCount == nil {
		return v.Data //nolint:staticcheck // the deprecated form older clients send
	}
	return nil
}

// selectVectors renders the stored vectors when the selector asks for them. Only dense
// vectors can be returned; asking for any other kind answers Unimplemented.
func selectVectors(sel *qdrant.WithVectorsSelector, v *qdrant.Vectors) (*qdrant.VectorsOutput, error) {
	var names map[string]bool
	switch s := sel.GetSelectorOptions().(type) {
	case nil:
		return nil, nil
	case *qdrant.WithVectorsSelector_Enable:
		if !s.Enable {
			return nil, nil
		}
	case *qdrant.WithVectorsSelector_Include:
		names = setOf(s.Include.GetNames())
	}
	if v == nil {
		return nil, nil
	}
	if one := v.GetVector(); one != nil {
		if names != nil && !names[""] {
			return nil, nil
		}
		o, err := vectorOut(one)
		if err != nil {
			return nil, err
		}
		return &qdrant.VectorsOutput{VectorsOptions: &qdrant.VectorsOutput_Vector{Vector: o}}, nil
	}
	out := map[string]*qdrant.VectorOutput{}
	for name, one := range v.GetVectors().GetVectors() {
		if names != nil && !names[name] {
			continue
		}
		o, err := vectorOut(one)
		if err != nil {
			return nil, err
		}
		out[name] = o
	}
	return &qdrant.VectorsOutput{VectorsOptions: &qdrant.VectorsOutput_Vectors{Vectors: &qdrant.NamedVectorsOutput{Vectors: out}}}, nil
}

func vectorOut(v *qdrant.Vector) (*qdrant.VectorOutput, error) {
	d := dense(v)
	if d == nil {
		return nil, status.Error(codes.Unimplemented, "qdrantfake: only dense vectors can be returned")
	}
	return &qdrant.VectorOutput{Vector: &qdrant.VectorOutput_Dense{Dense: &qdrant.DenseVector{Data: d}}}, nil
}
