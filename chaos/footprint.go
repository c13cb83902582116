package chaos

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/qdrant/go-client/qdrant"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
)

// Footprint is what the stores hold of one subject, read back directly by the harness.
type Footprint struct {
	Qdrant         int // points whose customer_id is the subject or session_id one of its sessions
	Redis          int // seeded keys that exist, plus the subject's index set in each redis store
	DatasetCurrent int // rows of the subject in the current dataset objects
	DatasetAll     int // rows of the subject in every object version (current included)
}

// Footprints reads every store back and returns each subject's footprint by Subject.Index.
func (s *System) Footprints(ctx context.Context, p *Population) ([]Footprint, error) {
	fps := make([]Footprint, len(p.Subjects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, t := range p.Tenants {
		g.Go(func() error { return s.tenantFootprints(gctx, t, p.ByTenant[t], fps) })
	}
	return fps, g.Wait()
}

// owner maps identifiers of a tenant's subjects to the subject.
type owner struct {
	byID, bySession map[string]*Subject
}

func owners(subs []*Subject) owner {
	o := owner{byID: map[string]*Subject{}, bySession: map[string]*Subject{}}
	for _, s := range subs {
		o.byID[s.ID] = s
		for _, sess := range s.Sessions {
			o.bySession[sess] = s
		}
	}
	return o
}

func (o owner) of(id, session string) *Subject {
	if s := o.byID[id]; s != nil {
		return s
	}
	return o.bySession[session]
}

func (s *System) tenantFootprints(ctx context.Context, tenant string, subs []*Subject, fps []Footprint) error {
	o := owners(subs)
	for _, st := range s.Inventory.OfKinds(qdrantstore.Kind) {
		var offset *qdrant.PointId
		for {
			res, err := s.Qdrant.GetPointsClient().Scroll(ctx, &qdrant.ScrollPoints{CollectionName: collection(st, tenant),
				Limit: qdrant.PtrOf(uint32(1000)), Offset: offset, WithPayload: qdrant.NewWithPayload(true)})
			if err != nil {
				return fmt.Errorf("qdrant scroll: %w", err)
			}
			for _, pt := range res.GetResult() {
				pl := pt.GetPayload()
				if sub := o.of(pl["customer_id"].GetStringValue(), pl["session_id"].GetStringValue()); sub != nil {
					fps[sub.Index].Qdrant++
				}
			}
			if offset = res.GetNextPageOffset(); offset == nil {
				break
			}
		}
	}
	for _, sub := range subs {
		keys := append([]string{}, sub.Keys...)
		for _, st := range s.Inventory.OfKinds(redisstore.Kind) {
			l, err := redisstore.LocatorsOf(st)
			if err != nil {
				return err
			}
			keys = append(keys, inventory.Expand(l.Index, inventory.Vars{Tenant: tenant, Subject: sub.ID}, nil))
		}
		pipe := s.Redis.Pipeline()
		for _, k := range keys {
			pipe.Exists(ctx, k)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			return fmt.Errorf("redis exists: %w", err)
		}
		for _, c := range cmds {
			fps[sub.Index].Redis += int(c.(interface{ Val() int64 }).Val())
		}
	}
	return s.datasetFootprints(ctx, tenant, o, fps)
}

func (s *System) datasetFootprints(ctx context.Context, tenant string, o owner, fps []Footprint) error {
	var keyMarker, versionMarker *string
	for {
		out, err := s.S3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(tenant + "/"),
			KeyMarker: keyMarker, VersionIdMarker: versionMarker})
		if err != nil {
			return fmt.Errorf("s3 list versions: %w", err)
		}
		for _, v := range out.Versions {
			obj, err := s.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: v.Key, VersionId: v.VersionId})
			if err != nil {
				return fmt.Errorf("s3 get: %w", err)
			}
			b, err := io.ReadAll(obj.Body)
			obj.Body.Close()
			if err != nil {
				return err
			}
			rows, err := parseRows(*v.Key, b)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if sub := o.of(r[0], r[1]); sub != nil {
					fps[sub.Index].DatasetAll++
					if aws.ToBool(v.IsLatest) {
						fps[sub.Index].DatasetCurrent++
					}
				}
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil
		}
		keyMarker, versionMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}

// parseRows returns (customer_id, session_id) of every row of a CSV or JSONL dataset.
func parseRows(key string, b []byte) ([][2]string, error) {
	var out [][2]string
	if strings.HasSuffix(key, ".csv") {
		rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil {
			return nil, fmt.Errorf("dataset csv: %w", err)
		}
		for _, r := range rows[min(1, len(rows)):] {
			out = append(out, [2]string{r[0], r[1]})
		}
		return out, nil
	}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("dataset jsonl: %w", err)
		}
		id, _ := m["customer_id"].(string)
		sess, _ := m["session_id"].(string)
		out = append(out, [2]string{id, sess})
	}
	return out, nil
}
