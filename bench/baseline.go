package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/qdrant/go-client/qdrant"
	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/embedded"
)

// The baseline is the pipeline the seeds describe, written against the same stores: it is
// what Lethe replaces. Each function erases one customer from one store the naive way and
// returns how many items it deleted. Its known gaps are kept on purpose (a scroll page caps
// what one erasure finds at 1000 per filter; the dataset's older versions stay; the index
// set stays), since the point is to time the approach, not to fix it.

// scrollPage is the page the seeds' scroll asks for, and the most it ever deletes per filter.
const scrollPage = 1000

// BaselineQdrant scrolls the chunks tagged with the customer id (one page of 1000, no
// payload) and deletes them by id; then, per session, scrolls the untagged chunks of that
// session and deletes them by id.
func BaselineQdrant(ctx context.Context, q *qdrant.Client, coll string, c Customer) (int, error) {
	deleted := 0
	scrollDelete := func(f *qdrant.Filter) error {
		pts, err := q.Scroll(ctx, &qdrant.ScrollPoints{CollectionName: coll, Filter: f, Limit: qdrant.PtrOf(uint32(scrollPage)), WithPayload: qdrant.NewWithPayload(false)})
		if err != nil {
			return fmt.Errorf("baseline qdrant scroll: %w", err)
		}
		if len(pts) == 0 {
			return nil
		}
		ids := make([]*qdrant.PointId, len(pts))
		for i, p := range pts {
			ids[i] = p.GetId()
		}
		if _, err := q.Delete(ctx, &qdrant.DeletePoints{CollectionName: coll, Wait: qdrant.PtrOf(true), Points: qdrant.NewPointsSelector(ids...)}); err != nil {
			return fmt.Errorf("baseline qdrant delete: %w", err)
		}
		deleted += len(ids)
		return nil
	}
	if err := scrollDelete(&qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatch("customer_id", c.ID)}}); err != nil {
		return deleted, err
	}
	for _, sid := range c.Sessions {
		f := &qdrant.Filter{
			Must: []*qdrant.Condition{
				qdrant.NewMatch("session_id", sid),
				qdrant.NewFilterAsCondition(&qdrant.Filter{MustNot: []*qdrant.Condition{qdrant.NewMatch("customer_id", c.ID)}}),
			},
		}
		if err := scrollDelete(f); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// BaselineRedis runs KEYS for each of the seeds' three patterns and DELs what it returns.
func BaselineRedis(ctx context.Context, rc redis.UniversalClient, c Customer) (int, error) {
	deleted := 0
	for _, p := range []string{"session:%s:%s:*", "graph:%s:%s:*", "cache:%s:%s:*"} {
		keys, err := rc.Keys(ctx, fmt.Sprintf(p, c.Tenant, c.ID)).Result()
		if err != nil {
			return deleted, fmt.Errorf("baseline redis keys: %w", err)
		}
		if len(keys) == 0 {
			continue
		}
		n, err := rc.Del(ctx, keys...).Result()
		if err != nil {
			return deleted, fmt.Errorf("baseline redis del: %w", err)
		}
		deleted += int(n)
	}
	return deleted, nil
}

// BaselineDataset downloads the whole evaluation set, drops the customer's rows and
// uploads the rebuilt dataset.
func BaselineDataset(ctx context.Context, s3c *s3.Client, c Customer) (int, error) {
	key := DatasetKey(c.Tenant)
	obj, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(embedded.DatasetBucket), Key: aws.String(key)})
	if err != nil {
		return 0, fmt.Errorf("baseline dataset get: %w", err)
	}
	body, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("baseline dataset read: %w", err)
	}
	rows, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil {
		return 0, fmt.Errorf("baseline dataset parse: %w", err)
	}
	kept := rows[:1]
	for _, r := range rows[1:] {
		if r[0] == c.ID || slices.Contains(c.Sessions, r[1]) {
			continue
		}
		kept = append(kept, r)
	}
	var out bytes.Buffer
	out.Grow(len(body))
	w := csv.NewWriter(&out)
	if err := w.WriteAll(kept); err != nil {
		return 0, fmt.Errorf("baseline dataset write: %w", err)
	}
	_, err = s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(embedded.DatasetBucket), Key: aws.String(key), Body: bytes.NewReader(out.Bytes())})
	if err != nil {
		return 0, fmt.Errorf("baseline dataset put: %w", err)
	}
	return len(rows) - len(kept), nil
}
