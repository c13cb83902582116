package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Items of addenda and the schedule:
//
//	ADD#<addendum id>      ADDENDUM                       the addendum (seq)
//	TEN#<tenant>           ADDX#<seq, 20 digits>#<id>     tenant index entry of an addendum
//	REQ#<request id>       ADDX#<seq, 20 digits>#<id>     request index entry of an addendum
//	DUE#<hour, UTC>        <due, unix ms, 20 digits>#<id> a task, in the hour bucket of its due time
//	TASK#<task id>         TASK                           the task's current due time
//	SCHED                  CURSOR                         the earliest hour bucket that may hold tasks

func addPK(id string) string { return "ADD#" + esc(id) }

func addIdxSK(seq int64, id string) string { return fmt.Sprintf("ADDX#%020d#%s", seq, esc(id)) }

// PutAddendum creates a, or fails with auditlog.ErrExists: index entries first (tenant,
// request), then the addendum with attribute_not_exists. Entries without their addendum,
// or naming another seq, are skipped by the readers.
func (s *Store) PutAddendum(ctx context.Context, a auditlog.Addendum) error {
	if a.AddendumID == "" || a.TenantID == "" || a.RequestID == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: addendum needs an id, a request id and a tenant id"))
	}
	var existing auditlog.Addendum
	switch err := s.get(ctx, "put addendum", addPK(a.AddendumID), "ADDENDUM", &existing); {
	case err == nil:
		return auditlog.ErrExists
	case !errors.Is(err, auditlog.ErrNotFound):
		return err
	}
	for _, pk := range []string{tenPK(a.TenantID), reqPK(a.RequestID)} {
		idx := key(pk, addIdxSK(a.Seq, a.AddendumID))
		idx["addendum_id"], idx["seq"] = str(a.AddendumID), num(a.Seq)
		if err := s.put(ctx, "put addendum index", idx, "", nil); err != nil {
			return err
		}
	}
	item, err := record(addPK(a.AddendumID), "ADDENDUM", a)
	if err != nil {
		return err
	}
	err = s.put(ctx, "put addendum", item, "attribute_not_exists(pk)", nil)
	if isConditionFailed(err) {
		return auditlog.ErrExists
	}
	return err
}

// GetAddendum returns the addendum of id or auditlog.ErrNotFound.
func (s *Store) GetAddendum(ctx context.Context, id string) (auditlog.Addendum, error) {
	var a auditlog.Addendum
	err := s.get(ctx, "get addendum", addPK(id), "ADDENDUM", &a)
	if errors.Is(err, auditlog.ErrNotFound) {
		return auditlog.Addendum{}, fmt.Errorf("auditlog/dynamo: get addendum: %w", auditlog.ErrNotFound)
	}
	return a, err
}

// TenantAddenda returns the tenant's addenda ordered by Seq.
func (s *Store) TenantAddenda(ctx context.Context, tenant string) ([]auditlog.Addendum, error) {
	return s.addenda(ctx, tenPK(tenant), func(a auditlog.Addendum) bool { return a.TenantID == tenant })
}

// AddendaOf returns the request's addenda ordered by Seq.
func (s *Store) AddendaOf(ctx context.Context, requestID string) ([]auditlog.Addendum, error) {
	return s.addenda(ctx, reqPK(requestID), func(a auditlog.Addendum) bool { return a.RequestID == requestID })
}

func (s *Store) addenda(ctx context.Context, pk string, keep func(auditlog.Addendum) bool) ([]auditlog.Addendum, error) {
	items, err := s.query(ctx, "addenda", pk, "ADDX#")
	if err != nil {
		return nil, err
	}
	seqs := map[string]map[int64]bool{}
	var keys []map[string]types.AttributeValue
	for _, it := range items {
		id, seq, err := indexEntry(it, "addendum_id", "addendum")
		if err != nil {
			return nil, err
		}
		if seqs[id] == nil {
			seqs[id] = map[int64]bool{}
			keys = append(keys, key(addPK(id), "ADDENDUM"))
		}
		seqs[id][seq] = true
	}
	got, err := s.batchGet(ctx, "addenda", keys)
	if err != nil {
		return nil, err
	}
	var as []auditlog.Addendum
	for _, it := range got {
		var a auditlog.Addendum
		if err := decode(it, &a); err != nil {
			return nil, err
		}
		if keep(a) && seqs[a.AddendumID][a.Seq] {
			as = append(as, a)
		}
	}
	auditlog.SortAddenda(as)
	return as, nil
}

const bucketLayout = "2006-01-02T15"

func bucketOf(t time.Time) string { return t.UTC().Format(bucketLayout) }

func duePK(bucket string) string { return "DUE#" + bucket }

func dueSK(t auditlog.Task) string { return fmt.Sprintf("%020d#%s", t.Due.UnixMilli(), esc(t.ID)) }

type taskDue struct {
	Due time.Time `json:"due"`
}

// Schedule stores each task in the hour bucket of its due time and removes the entry of
// an earlier due time of the same id, then lowers the schedule's cursor to the earliest of
// their buckets if it is later. The tasks of one call go together, in batches: it reads
// their due records, writes their bucket entries, removes the entries of changed dues,
// then writes the due records, each step finished before the next, so a crash in between
// leaves a due record naming the old due and the call's retry removes that entry; then
// the cursor. A task id given twice keeps the last of its tasks.
func (s *Store) Schedule(ctx context.Context, tasks ...auditlog.Task) error {
	byID := map[string]auditlog.Task{}
	var ids []string
	first := ""
	for _, t := range tasks {
		if t.ID == "" || t.RequestID == "" || t.Due.IsZero() {
			return retry.Permanent(errors.New("auditlog/dynamo: task needs an id, a request id and a due time"))
		}
		t.Due = t.Due.UTC().Truncate(time.Millisecond)
		if _, ok := byID[t.ID]; !ok {
			ids = append(ids, t.ID)
		}
		byID[t.ID] = t
		if b := bucketOf(t.Due); first == "" || b < first {
			first = b
		}
	}
	if len(ids) == 0 {
		return nil
	}
	keys := make([][2]string, len(ids))
	for i, id := range ids {
		keys[i] = [2]string{taskPK(id), "TASK"}
	}
	got, err := s.read(ctx, keys...)
	if err != nil {
		return err
	}
	old := map[string]time.Time{} // by due record pk
	for _, it := range got {
		if it == nil {
			continue
		}
		pk, _ := it["pk"].(*types.AttributeValueMemberS)
		var d taskDue
		if pk == nil {
			return retry.Permanent(errors.New("auditlog/dynamo: task due record without a key"))
		}
		if err := decode(it, &d); err != nil {
			return err
		}
		old[pk.Value] = d.Due
	}
	var entries, dues []map[string]types.AttributeValue
	var stale []types.WriteRequest
	for _, id := range ids {
		t := byID[id]
		item, err := record(duePK(bucketOf(t.Due)), dueSK(t), t)
		if err != nil {
			return err
		}
		entries = append(entries, item)
		if o, ok := old[taskPK(id)]; ok && !o.IsZero() && !o.Equal(t.Due) {
			stale = append(stale, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
				Key: key(duePK(bucketOf(o)), dueSK(auditlog.Task{ID: id, Due: o}))}})
		}
		cur, err := record(taskPK(id), "TASK", taskDue{Due: t.Due})
		if err != nil {
			return err
		}
		dues = append(dues, cur)
	}
	// in this order, each step shared with concurrent writes (group commit)
	if err := s.write(ctx, entries...); err != nil {
		return err
	}
	if err := s.batchWrite(ctx, "schedule", stale); err != nil {
		return err
	}
	if err := s.write(ctx, dues...); err != nil {
		return err
	}
	if s.cursorAtOrBefore(first) {
		return nil
	}
	c := key("SCHED", "CURSOR")
	c["cursor_hour"] = str(first)
	err = s.put(ctx, "schedule cursor", c, "attribute_not_exists(pk) OR cursor_hour > :b",
		map[string]types.AttributeValue{":b": str(first)})
	if err != nil && !isConditionFailed(err) { // failed condition: the cursor is at that bucket or before it already
		return err
	}
	s.cursor.Lock()
	if s.cursor.atMost == "" || first < s.cursor.atMost {
		s.cursor.atMost = first
	}
	s.cursor.Unlock()
	return nil
}

// cursorAtOrBefore reports whether the schedule's cursor is known to be at bucket b or
// before it, so that Schedule need not move it: this process saw it at or before a bucket
// no later than b, and b is after now's. Due moves the cursor forward to now's bucket at
// most, and Schedule only moves it back, so the cursor is still at or before b.
func (s *Store) cursorAtOrBefore(b string) bool {
	s.cursor.Lock()
	defer s.cursor.Unlock()
	return s.cursor.atMost != "" && s.cursor.atMost <= b && b > bucketOf(time.Now())
}

func taskPK(id string) string { return "TASK#" + esc(id) }

// Due returns up to limit tasks due at or before now, earliest first: it queries the hour
// buckets from the cursor to now's, reading only due tasks (and one query per empty hour
// bucket since the cursor). Buckets older than an hour before now's that hold nothing
// move the cursor past them, so later ticks do not query them again.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]auditlog.Task, error) {
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: key("SCHED", "CURSOR"), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, classify("due", err)
	}
	b, ok := out.Item["cursor_hour"].(*types.AttributeValueMemberS)
	if !ok {
		return nil, nil // nothing was ever scheduled
	}
	start, err := time.Parse(bucketLayout, b.Value)
	if err != nil {
		return nil, retry.Permanent(fmt.Errorf("auditlog/dynamo: malformed schedule cursor: %w", err))
	}
	now = now.UTC()
	last := now.Truncate(time.Hour)
	advance := true // every bucket so far was empty
	var tasks []auditlog.Task
	for h := start; !h.After(last); h = h.Add(time.Hour) {
		items, err := s.queryUpTo(ctx, duePK(bucketOf(h)), fmt.Sprintf("%020d~", now.UnixMilli()), limit-len(tasks))
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			var t auditlog.Task
			if err := decode(it, &t); err != nil {
				return nil, err
			}
			tasks = append(tasks, t)
		}
		if len(items) > 0 {
			advance = false
		}
		if advance && h.Before(last.Add(-time.Hour)) {
			c := key("SCHED", "CURSOR")
			c["cursor_hour"] = str(bucketOf(h.Add(time.Hour)))
			err := s.put(ctx, "due cursor", c, "cursor_hour = :b", map[string]types.AttributeValue{":b": str(bucketOf(h))})
			if err != nil && !isConditionFailed(err) {
				return nil, err
			}
		}
		if limit > 0 && len(tasks) >= limit {
			break
		}
	}
	return tasks, nil
}

// Unschedule deletes the task's bucket entry and its due record.
func (s *Store) Unschedule(ctx context.Context, t auditlog.Task) error {
	if err := s.del(ctx, "unschedule", duePK(bucketOf(t.Due)), dueSK(auditlog.Task{ID: t.ID, Due: t.Due.UTC().Truncate(time.Millisecond)})); err != nil {
		return err
	}
	return s.del(ctx, "unschedule", taskPK(t.ID), "TASK")
}

// queryUpTo returns up to limit (0: every) items of pk with sk <= max, in sk order.
func (s *Store) queryUpTo(ctx context.Context, pk, max string, limit int) ([]map[string]types.AttributeValue, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk AND sk <= :m"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":m": str(max)},
		ConsistentRead:            aws.Bool(true),
	}
	var items []map[string]types.AttributeValue
	for {
		if limit > 0 {
			in.Limit = aws.Int32(int32(limit - len(items)))
		}
		out, err := s.c.Query(ctx, in)
		if err != nil {
			return nil, classify("due", err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 || (limit > 0 && len(items) >= limit) {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func (s *Store) del(ctx context.Context, op, pk, sk string) error {
	_, err := s.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk)})
	return classify(op, err)
}
