package dynamo

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// groupLinger is how long the first of concurrent unconditional writes waits for others
// to join its BatchWriteItem calls.
const groupLinger = 2 * time.Millisecond

// groupTimeout bounds one group's calls: the group outlives the context of the write that
// started it, since other writes wait on it.
const groupTimeout = 30 * time.Second

// groupWriter shares BatchWriteItem calls among concurrent unconditional writes (group
// commit): the first write of a group waits groupLinger, then applies every write queued
// by then, batchWriteMax items a call. Each write returns once all of its items were
// applied, or with the error of a call that held one of them.
type groupWriter struct {
	mu      sync.Mutex
	pending []*groupWrite
	leading bool
}

type groupWrite struct {
	items []map[string]types.AttributeValue
	err   error
	done  chan struct{}
}

// write applies items (puts, no condition) through s's group and returns when they are
// applied. An item keyed like another in the same group replaces it (the later write wins).
func (g *groupWriter) write(ctx context.Context, s *Store, op string, items ...map[string]types.AttributeValue) error {
	if len(items) == 0 {
		return nil
	}
	w := &groupWrite{items: items, done: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, w)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if lead {
		time.Sleep(groupLinger)
		g.mu.Lock()
		group := g.pending
		g.pending, g.leading = nil, false
		g.mu.Unlock()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
		g.flush(fctx, s, op, group)
		cancel()
	}
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush applies the group's items, batchWriteMax a call and the calls side by side, and
// settles each write.
func (g *groupWriter) flush(ctx context.Context, s *Store, op string, group []*groupWrite) {
	type slot struct{ writes []*groupWrite }
	var reqs []types.WriteRequest
	var owners []*slot
	at := map[[2]string]int{} // (pk, sk) -> index in reqs
	for _, w := range group {
		for _, it := range w.items {
			k := [2]string{it["pk"].(*types.AttributeValueMemberS).Value, it["sk"].(*types.AttributeValueMemberS).Value}
			if i, ok := at[k]; ok {
				reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
				owners[i].writes = append(owners[i].writes, w)
				continue
			}
			at[k] = len(reqs)
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
			owners = append(owners, &slot{writes: []*groupWrite{w}})
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for start := 0; start < len(reqs); start += batchWriteMax {
		end := min(start+batchWriteMax, len(reqs))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.batchWrite(ctx, op, reqs[start:end]); err != nil {
				mu.Lock()
				for _, o := range owners[start:end] {
					for _, w := range o.writes {
						w.err = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, w := range group {
		close(w.done)
	}
}
