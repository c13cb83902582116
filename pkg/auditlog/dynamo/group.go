package dynamo

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// groupTimeout bounds one group's calls: the group outlives the context of the write that
// leads it, since other writes wait on it.
const groupTimeout = 30 * time.Second

// groupWriter shares BatchWriteItem calls among concurrent unconditional writes (group
// commit): a write made while no group is being applied is applied at once, alone; the
// writes made meanwhile wait and are applied together next, batchWriteMax items a call,
// by the first of them. So writes share calls as they overlap, and a write alone waits
// for nothing. Each write returns once all of its items were applied, or with the error
// of a call that held one of them.
type groupWriter struct {
	mu      sync.Mutex
	pending []*groupWrite
	leading bool // a group is being applied
}

type groupWrite struct {
	items []map[string]types.AttributeValue
	err   error
	done  chan struct{}
	lead  chan struct{} // this write applies the pending group
}

// write applies items (puts, no condition) through s's group and returns when they are
// applied. An item keyed like another in the same group replaces it (the later write wins).
// It waits for its group even when ctx ends, as other writes may wait on it.
func (g *groupWriter) write(ctx context.Context, s *Store, op string, items ...map[string]types.AttributeValue) error {
	if len(items) == 0 {
		return nil
	}
	w := &groupWrite{items: items, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, w)
	if !g.leading {
		g.leading = true
		w.lead <- struct{}{}
	}
	g.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-w.lead:
	}
	g.mu.Lock()
	group := g.pending
	g.pending = nil
	g.mu.Unlock()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
	g.flush(fctx, s, op, group)
	cancel()
	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].lead <- struct{}{} // the writes made meanwhile go next
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	<-w.done
	return w.err
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
