package main

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memberWatch expires classic consumer-group members that went silent, as Kafka does and
// kfake does not always do.
//
// The defect it works around: kfake starts a member's session timer when a group
// response reaches it. A member that dies while waiting in JoinGroup (a process killed
// during a rebalance) never receives the response, so it never gets a timer. It stays in
// the group for good, the leader keeps assigning it partitions, and those partitions are
// never consumed again. Kafka would expire it after its session timeout.
//
// memberWatch observes every group request the broker handles (without changing it) and
// remembers when each member last spoke. A member silent for longer than its session
// timeout plus its rebalance timeout is removed with a LeaveGroup sent on its behalf. A
// live member is never that silent: it heartbeats within its session timeout and waits
// in a join at most the rebalance timeout.
type memberWatch struct {
	mu     sync.Mutex
	groups map[string]map[string]*memberSeen // classic groups seen joining, by member id
	now    func() time.Time
}

type memberSeen struct {
	last  time.Time
	limit time.Duration // session plus rebalance timeout of the member's last join
}

// unknownLimit is the silence allowed to a member whose join was not observed (one
// restored by the broker): franz-go's default session and rebalance timeouts.
const unknownLimit = 105 * time.Second

func newMemberWatch() *memberWatch {
	return &memberWatch{groups: map[string]map[string]*memberSeen{}, now: time.Now}
}

// observe is a kfake control function: it records the request's member and lets the
// broker handle the request as usual.
func (w *memberWatch) observe(req kmsg.Request) (kmsg.Response, error, bool) {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		if r.MemberID != "" {
			limit := time.Duration(r.SessionTimeoutMillis+r.RebalanceTimeoutMillis) * time.Millisecond
			w.see(r.Group, r.MemberID, limit, true)
		}
	case *kmsg.SyncGroupRequest:
		w.see(r.Group, r.MemberID, 0, false)
	case *kmsg.HeartbeatRequest:
		w.see(r.Group, r.MemberID, 0, false)
	case *kmsg.OffsetCommitRequest:
		w.see(r.Group, r.MemberID, 0, false)
	}
	return nil, nil, false
}

// see records that member spoke; limit 0 keeps the member's known limit. Only a join
// makes a group watched.
func (w *memberWatch) see(group, member string, limit time.Duration, join bool) {
	if member == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ms := w.groups[group]
	if ms == nil {
		if !join {
			return
		}
		ms = map[string]*memberSeen{}
		w.groups[group] = ms
	}
	s := ms[member]
	if s == nil {
		s = &memberSeen{limit: unknownLimit}
		ms[member] = s
	}
	s.last = w.now()
	if limit > 0 {
		s.limit = limit
	}
}

// silent returns, per watched group, the members of the group (as the broker lists them)
// that have been silent past their limit, and forgets members no longer listed.
func (w *memberWatch) silent(members func(group string) []string) map[string][]string {
	w.mu.Lock()
	groups := make([]string, 0, len(w.groups))
	for g := range w.groups {
		groups = append(groups, g)
	}
	w.mu.Unlock()
	out := map[string][]string{}
	for _, g := range groups {
		listed := members(g) // outside the lock: the broker may be handling a request that calls observe
		w.mu.Lock()
		ms := w.groups[g]
		keep := make(map[string]*memberSeen, len(listed))
		for _, id := range listed {
			s := ms[id]
			if s == nil {
				s = &memberSeen{last: w.now(), limit: unknownLimit}
			}
			keep[id] = s
			if w.now().Sub(s.last) > s.limit {
				out[g] = append(out[g], id)
			}
		}
		w.groups[g] = keep
		w.mu.Unlock()
	}
	return out
}

// run sweeps every interval until ctx is done, removing silent members from c through cl.
func (w *memberWatch) run(ctx context.Context, c *kfake.Cluster, cl *kgo.Client, every time.Duration, logf func(string, ...any)) {
	members := func(group string) []string {
		info := c.GroupInfo(group)
		if info == nil {
			return nil
		}
		ids := make([]string, 0, len(info.Members))
		for _, m := range info.Members {
			ids = append(ids, m.MemberID)
		}
		return ids
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for group, ids := range w.silent(members) {
			for _, id := range ids {
				req := kmsg.NewPtrLeaveGroupRequest()
				req.Group, req.MemberID = group, id
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = id
				m.Reason = kmsg.StringPtr("silent past its session and rebalance timeouts")
				req.Members = append(req.Members, m)
				if _, err := req.RequestWith(ctx, cl); err != nil {
					logf("kafka: expiring silent member %s of group %s: %v", id, group, err)
					continue
				}
				logf("kafka: expired member %s of group %s: silent past its session and rebalance timeouts", id, group)
			}
		}
	}
}
