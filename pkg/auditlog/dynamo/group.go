package dynamo

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/coalesce"
)

// groupWrites is how many writes one shared call applies at most (each of one or a few
// items, batchWriteMax items a BatchWriteItem call, those calls side by side).
const groupWrites = 100

// initGroup sets up s.group: the unconditional writes of concurrent callers (reports,
// linked receipts, publication marks, schedules) applied together (coalesce.Calls), one
// call in flight at a time, so a write alone starts at once and the writes made
// meanwhile go together next.
func (s *Store) initGroup() {
	s.group = coalesce.Calls[[]map[string]types.AttributeValue, error]{Do: s.applyGroup, Max: groupWrites}
}

// write applies items (puts, no condition) in a call shared with concurrent writes and
// returns once they are applied. An item keyed like another in the same call replaces it.
func (s *Store) write(ctx context.Context, items ...map[string]types.AttributeValue) error {
	if len(items) == 0 {
		return nil
	}
	err, cerr := s.group.Submit(ctx, items)
	if cerr != nil {
		return cerr
	}
	return err
}

// applyGroup applies the items of writes, batchWriteMax a BatchWriteItem call and the
// calls side by side, and returns each write's error: that of a call holding one of its
// items.
func (s *Store) applyGroup(ctx context.Context, writes [][]map[string]types.AttributeValue) ([]error, error) {
	var reqs []types.WriteRequest
	var owners [][]int        // by index in reqs: the writes holding that item
	at := map[[2]string]int{} // (pk, sk) -> index in reqs
	for w, items := range writes {
		for _, it := range items {
			k := [2]string{it["pk"].(*types.AttributeValueMemberS).Value, it["sk"].(*types.AttributeValueMemberS).Value}
			put := types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
			if i, ok := at[k]; ok {
				reqs[i] = put
				owners[i] = append(owners[i], w)
				continue
			}
			at[k] = len(reqs)
			reqs = append(reqs, put)
			owners = append(owners, []int{w})
		}
	}
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for start := 0; start < len(reqs); start += batchWriteMax {
		end := min(start+batchWriteMax, len(reqs))
		wg.Go(func() {
			if err := s.batchWrite(ctx, "write", reqs[start:end]); err != nil {
				mu.Lock()
				for _, ws := range owners[start:end] {
					for _, w := range ws {
						errs[w] = err
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs, nil
}

// initItemReads sets up s.reads: the item reads of concurrent callers (receipts,
// schedules) in shared strongly consistent BatchGetItem calls, each started after every
// read it carries was asked for.
func (s *Store) initItemReads() {
	s.reads = coalesce.Calls[[][2]string, []map[string]types.AttributeValue]{Do: s.readItems, Max: batchGetMax}
}

// read returns the items of keys (pk, sk), in order, nil where one is not stored, read in
// a call shared with concurrent reads.
func (s *Store) read(ctx context.Context, keys ...[2]string) ([]map[string]types.AttributeValue, error) {
	return s.reads.Submit(ctx, keys)
}

// readItems reads the items of every read's keys, each key once, and returns each read's
// items in the order of its keys.
func (s *Store) readItems(ctx context.Context, reads [][][2]string) ([][]map[string]types.AttributeValue, error) {
	seen := map[[2]string]bool{}
	var keys []map[string]types.AttributeValue
	for _, r := range reads {
		for _, k := range r {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, key(k[0], k[1]))
			}
		}
	}
	got, err := s.batchGet(ctx, "read", keys)
	if err != nil {
		return nil, err
	}
	byKey := make(map[[2]string]map[string]types.AttributeValue, len(got))
	for _, it := range got {
		pk, ok1 := it["pk"].(*types.AttributeValueMemberS)
		sk, ok2 := it["sk"].(*types.AttributeValueMemberS)
		if ok1 && ok2 {
			byKey[[2]string{pk.Value, sk.Value}] = it
		}
	}
	out := make([][]map[string]types.AttributeValue, len(reads))
	for i, r := range reads {
		out[i] = make([]map[string]types.AttributeValue, len(r))
		for j, k := range r {
			out[i][j] = byKey[k]
		}
	}
	return out, nil
}
