package qdrantfake

import (
	"context"
	"sort"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// UpdateAliases applies alias operations in order, all or none, as Qdrant does
// (toc/collection_meta_ops.rs, update_aliases): creating an alias needs an existing
// collection and a name that is not a collection's, and re-points an existing alias;
// deleting an alias that does not exist is not an error; renaming one that does not
// exist is NotFound.
func (cs *collectionsService) UpdateAliases(_ context.Context, req *qdrant.ChangeAliases) (*qdrant.CollectionOperationResponse, error) {
	s := cs.s
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]string, len(s.aliases))
	for a, c := range s.aliases {
		next[a] = c
	}
	for _, op := range req.GetActions() {
		switch a := op.GetAction().(type) {
		case *qdrant.AliasOperations_CreateAlias:
			coll, alias := a.CreateAlias.GetCollectionName(), a.CreateAlias.GetAliasName()
			if _, ok := s.collections[coll]; !ok {
				return nil, notFound(coll)
			}
			if _, ok := s.collections[alias]; ok {
				return nil, status.Errorf(codes.AlreadyExists, "Wrong input: Collection `%s` already exists!", alias)
			}
			next[alias] = coll
		case *qdrant.AliasOperations_DeleteAlias:
			delete(next, a.DeleteAlias.GetAliasName())
		case *qdrant.AliasOperations_RenameAlias:
			old := a.RenameAlias.GetOldAliasName()
			coll, ok := next[old]
			if !ok {
				return nil, status.Errorf(codes.NotFound, "Not found: Alias %s does not exists!", old)
			}
			delete(next, old)
			next[a.RenameAlias.GetNewAliasName()] = coll
		default:
			return nil, status.Error(codes.InvalidArgument, "Wrong input: malformed alias operation")
		}
	}
	s.aliases = next
	return &qdrant.CollectionOperationResponse{Result: true}, nil
}

// ListAliases lists every alias, sorted by name.
func (cs *collectionsService) ListAliases(context.Context, *qdrant.ListAliasesRequest) (*qdrant.ListAliasesResponse, error) {
	return &qdrant.ListAliasesResponse{Aliases: cs.s.aliasesOf(func(string) bool { return true })}, nil
}

// ListCollectionAliases lists the aliases naming one collection (none for a name that is
// no collection, as Qdrant's alias_mapping.rs collection_aliases answers).
func (cs *collectionsService) ListCollectionAliases(_ context.Context, req *qdrant.ListCollectionAliasesRequest) (*qdrant.ListAliasesResponse, error) {
	coll := req.GetCollectionName()
	return &qdrant.ListAliasesResponse{Aliases: cs.s.aliasesOf(func(c string) bool { return c == coll })}, nil
}

func (s *Server) aliasesOf(keep func(coll string) bool) []*qdrant.AliasDescription {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*qdrant.AliasDescription
	for a, c := range s.aliases {
		if keep(c) {
			out = append(out, &qdrant.AliasDescription{AliasName: a, CollectionName: c})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetAliasName() < out[j].GetAliasName() })
	return out
}
