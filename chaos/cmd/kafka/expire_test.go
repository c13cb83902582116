package main

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func join(group, member string, session, rebalance int32) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Group, r.MemberID, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = group, member, session, rebalance
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	r.Protocols = append(r.Protocols, p)
	return r
}

func heartbeat(group, member string) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID = group, member
	return r
}

func TestMemberWatchFindsSilentMembers(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	now := start
	w := newMemberWatch()
	w.now = func() time.Time { return now }
	listed := map[string][]string{"g": {"m1", "m2", "restored"}}
	members := func(g string) []string { return listed[g] }

	w.observe(join("g", "", 10_000, 15_000)) // a first join has no member id yet
	w.observe(join("g", "m1", 10_000, 15_000))
	w.observe(join("g", "m2", 10_000, 15_000))
	w.observe(heartbeat("other", "x")) // a group never seen joining is not watched
	if got := w.silent(members); len(got) != 0 {
		t.Fatalf("silent right after joining: %v", got)
	}
	now = start.Add(20 * time.Second)
	w.observe(heartbeat("g", "m2"))
	now = start.Add(26 * time.Second) // m1: 26 s > 10 s + 15 s; m2 spoke 6 s ago
	if got := w.silent(members); !slices.Equal(got["g"], []string{"m1"}) || len(got) != 1 {
		t.Fatalf("silent at +26s = %v, want g:[m1]", got)
	}
	// "restored" was listed without ever speaking: its clock started at the first sweep
	// (+0 s) with the default limit.
	now = start.Add(unknownLimit + time.Second)
	w.observe(heartbeat("g", "m2"))
	if got := w.silent(members); !slices.Equal(got["g"], []string{"m1", "restored"}) {
		t.Fatalf("silent past the default limit = %v, want g:[m1 restored]", got)
	}
	// Members the broker no longer lists are forgotten.
	listed["g"] = []string{"m2"}
	w.silent(members)
	if n := len(w.groups["g"]); n != 1 {
		t.Fatalf("watch keeps %d members of g, want 1", n)
	}
	if _, ok := w.groups["other"]; ok {
		t.Fatal("a group that never joined is watched")
	}
}

// TestMemberWatchExpiresSilentMember runs the watch on a kfake broker: a member that joined
// and synced, then fell silent, is removed once the watch's clock is past its limit (the
// broker's own 60 s session timer is still far away).
func TestMemberWatchExpiresSilentMember(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var skew atomic.Int64
	w := newMemberWatch()
	w.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	c.Control(w.observe)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	resp, err := join("g", "", 60_000, 1_000).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.MemberID
	if resp, err = join("g", id, 60_000, 1_000).RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("join: %v (code %d)", err, resp.ErrorCode)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "g", id, resp.Generation
	if sresp, err := sync.RequestWith(ctx, cl); err != nil || sresp.ErrorCode != 0 {
		t.Fatalf("sync: %v", err)
	}
	if info := c.GroupInfo("g"); info == nil || len(info.Members) != 1 {
		t.Fatalf("group after join and sync: %+v", info)
	}

	go w.run(ctx, c, cl, 20*time.Millisecond, t.Logf)
	time.Sleep(200 * time.Millisecond)
	if info := c.GroupInfo("g"); len(info.Members) != 1 {
		t.Fatal("a member within its limit was expired")
	}
	skew.Store(int64(62 * time.Second)) // past 60 s session + 1 s rebalance
	for c.GroupInfo("g").State != "Empty" {
		if ctx.Err() != nil {
			t.Fatalf("the silent member was not expired: %+v", c.GroupInfo("g"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
