package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3 is one S3 bucket. Rewrites are staged (spool: in memory up to 4 MiB, in a temporary
// file beyond) so that objects of any size stream and the upload has a known length; they
// replace the object only if its ETag is unchanged (If-Match).
type S3 struct {
	client *s3.Client
	name   string
}

var _ Versioned = (*S3)(nil)

// NewS3 returns the bucket named name behind client. It lists versions, so it serves
// versioned and unversioned buckets alike (an unversioned bucket has only current objects).
// It is safe for concurrent use.
func NewS3(client *s3.Client, name string) *S3 {
	return &S3{client: client, name: name}
}

// Name is the bucket's name.
func (b *S3) Name() string { return b.name }

// List calls fn with the key of every current object under prefix, in key order.
func (b *S3) List(ctx context.Context, prefix string, fn func(string) error) error {
	return b.ListTokens(ctx, prefix, func(key, _ string) error { return fn(key) })
}

// ListTokens is List that also passes each object's ETag.
func (b *S3) ListTokens(ctx context.Context, prefix string, fn func(key, token string) error) error {
	p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{Bucket: &b.name, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return b.wrap("list", err)
		}
		for _, o := range page.Contents {
			if err := fn(aws.ToString(o.Key), aws.ToString(o.ETag)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Get opens the current version of key.
func (b *S3) Get(ctx context.Context, key string) (*Object, error) {
	return b.get(ctx, key, "")
}

// GetVersion opens version id of key.
func (b *S3) GetVersion(ctx context.Context, key, id string) (*Object, error) {
	return b.get(ctx, key, id)
}

func (b *S3) get(ctx context.Context, key, id string) (*Object, error) {
	in := &s3.GetObjectInput{Bucket: &b.name, Key: &key}
	if id != "" {
		in.VersionId = &id
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		return nil, b.wrap("get object", err)
	}
	return &Object{
		Body:               out.Body,
		Token:              aws.ToString(out.ETag),
		VersionID:          aws.ToString(out.VersionId),
		ContentType:        aws.ToString(out.ContentType),
		ContentEncoding:    aws.ToString(out.ContentEncoding),
		CacheControl:       aws.ToString(out.CacheControl),
		ContentDisposition: aws.ToString(out.ContentDisposition),
		ContentLanguage:    aws.ToString(out.ContentLanguage),
		Metadata:           out.Metadata,
	}, nil
}

// Put writes key from write; with prev, only if the object is still prev (If-Match).
func (b *S3) Put(ctx context.Context, key string, prev *Object, write func(io.Writer) error) error {
	_, err := b.Write(ctx, key, prev, write)
	return err
}

// Write is Put that also returns the ETag and version id of what it wrote.
func (b *S3) Write(ctx context.Context, key string, prev *Object, write func(io.Writer) error) (Written, error) {
	sp := newSpool()
	defer sp.close()
	bw := newWriter(sp)
	defer releaseWriter(bw)
	if err := write(bw); err != nil {
		return Written{}, err
	}
	if err := bw.Flush(); err != nil {
		return Written{}, fmt.Errorf("stage rewrite: %w", err)
	}
	body, err := sp.body()
	if err != nil {
		return Written{}, fmt.Errorf("stage rewrite: %w", err)
	}
	in := &s3.PutObjectInput{
		Bucket: &b.name,
		Key:    &key,
		Body:   body,
		// A checksum whatever the client's setting: the server stores it with the new
		// version (a server that kept the old one would fail every validating reader).
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
	}
	if prev != nil {
		if prev.Token != "" {
			in.IfMatch = aws.String(prev.Token)
		}
		in.ContentType = nonEmpty(prev.ContentType)
		in.ContentEncoding = nonEmpty(prev.ContentEncoding)
		in.CacheControl = nonEmpty(prev.CacheControl)
		in.ContentDisposition = nonEmpty(prev.ContentDisposition)
		in.ContentLanguage = nonEmpty(prev.ContentLanguage)
		in.Metadata = prev.Metadata
	}
	out, err := b.client.PutObject(ctx, in)
	if err != nil {
		return Written{}, b.wrap("put object", err)
	}
	return Written{Token: aws.ToString(out.ETag), VersionID: aws.ToString(out.VersionId)}, nil
}

// Delete deletes key without a version id: in a versioned bucket, a delete marker.
func (b *S3) Delete(ctx context.Context, key string) error {
	if _, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.name, Key: &key}); err != nil {
		return b.wrap("delete object", err)
	}
	return nil
}

// nonEmpty is nil for "", a pointer to s otherwise.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// DeleteVersion always passes the version id: a plain DELETE in a versioned bucket would
// only add a delete marker, hiding the current object and keeping the version.
func (b *S3) DeleteVersion(ctx context.Context, key, id string) error {
	if id == "" {
		id = "null" // the version written while versioning was never enabled or suspended
	}
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.name, Key: &key, VersionId: &id})
	if err != nil {
		return b.wrap("delete object version", err)
	}
	return nil
}

// ListVersions returns every version and delete marker of every key under prefix;
// ErrNoVersions when the server lists no versions.
func (b *S3) ListVersions(ctx context.Context, prefix string) ([]Version, error) {
	in := &s3.ListObjectVersionsInput{Bucket: &b.name, Prefix: &prefix}
	var out []Version
	for {
		page, err := b.client.ListObjectVersions(ctx, in)
		if err != nil {
			var api smithy.APIError
			if errors.As(err, &api) && api.ErrorCode() == "NotImplemented" {
				return nil, ErrNoVersions
			}
			return nil, b.wrap("list versions", err)
		}
		for _, v := range page.Versions {
			out = append(out, Version{Key: aws.ToString(v.Key), ID: aws.ToString(v.VersionId), Latest: aws.ToBool(v.IsLatest), Token: aws.ToString(v.ETag)})
		}
		for _, d := range page.DeleteMarkers {
			out = append(out, Version{Key: aws.ToString(d.Key), ID: aws.ToString(d.VersionId), Latest: aws.ToBool(d.IsLatest), DeleteMarker: true})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		if page.NextKeyMarker == nil && page.NextVersionIdMarker == nil {
			return nil, fmt.Errorf("list versions of bucket %s: truncated page without a next marker", b.name)
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// wrap classifies err, an error of op on the bucket (Classify).
func (b *S3) wrap(op string, err error) error { return Classify(b.name, op, err) }
