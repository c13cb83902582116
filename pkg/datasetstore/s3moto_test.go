package datasetstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/objectstore"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// S3 behaviour the stand-in lacked, on moto's server: Object Lock, stored checksums, and
// conditional writes on an object deleted meanwhile.

// TestLockedVersionIsReported: an older version that holds the subject's rows is under a
// legal hold, so S3 refuses to delete it. The erasure must not claim the dataset clean:
// Erase fails with a permanent error (retrying cannot lift a hold) or Verify counts the
// rows the held version keeps, and the status is FAILED.
func TestLockedVersionIsReported(t *testing.T) {
	testenv.SkipOnStandIns(t, "Object Lock")
	ctx := context.Background()
	c := testenv.S3With(t, testenv.S3Options{ObjectLock: true}, testBucket).Client
	w := s3World{c}
	victim := deletiontest.NewSubject("acme", "a")
	const key = "acme/qa.csv"
	held := w.putVersion(t, key, renderCSV(t, []row{{Customer: "a", Text: "held"}, {Customer: "b"}}))
	w.putVersion(t, key, renderCSV(t, []row{{Customer: "a", Text: "current"}, {Customer: "b"}}))
	_, err := c.PutObjectLegalHold(ctx, &s3.PutObjectLegalHoldInput{Bucket: aws.String(testBucket), Key: aws.String(key),
		VersionId: aws.String(held), LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn}})
	if err != nil {
		t.Fatal(err)
	}
	// A second dataset with an old version of the subject's, listed after the held one.
	const later = "acme/zz.jsonl"
	w.putVersion(t, later, renderJSONL(t, []row{{Customer: "a"}}))
	w.putVersion(t, later, renderJSONL(t, []row{{Customer: "b"}}))

	store := New(c, "")
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	res, eraseErr := store.Erase(ctx, st, victim)
	t.Logf("Erase: %+v, %v", res.Locations, eraseErr)
	if eraseErr != nil && !retry.IsPermanent(eraseErr) {
		t.Errorf("Erase: %v, want a permanent error (a legal hold stays until lifted)", eraseErr)
	}
	v, err := store.Verify(ctx, st, victim)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Verify: %+v", v)
	if eraseErr == nil && deletion.StatusOf(res, v) != event.StatusFailed {
		t.Errorf("status %s (verification %+v), want FAILED: the held version keeps a row", deletion.StatusOf(res, v), v)
	}
	if v.Remaining+int64(v.Unexamined) < 1 {
		t.Errorf("Verify = %+v: the held version's row is neither remaining nor unexamined", v)
	}
	if got := w.get(t, key, held); countRows(t, key, got, victim) != 1 {
		t.Errorf("the held version changed: %q", got)
	}
	if cur := w.get(t, key, ""); countRows(t, key, cur, victim) != 0 {
		t.Errorf("current version still holds the subject: %q", cur)
	}
}

// crc32Of is the base64 CRC32 (IEEE) of b, as S3 carries it in x-amz-checksum-crc32.
func crc32Of(b []byte) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE(b))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// TestChecksumsStoredAndReturned: an upload by a client with the SDK's default checksum
// behaviour (CRC32C, CRC64NVME and SHA-256 here) is stored with its checksum and returned
// with it; the rewrite of an erasure replaces it with the CRC32 of the bytes it wrote, so
// that a validating reader gets the object and not a checksum error.
func TestChecksumsStoredAndReturned(t *testing.T) {
	testenv.SkipOnStandIns(t, "stored checksums")
	ctx := context.Background()
	srv := testenv.S3(t, testBucket)
	c := defaultClient(srv.URL)
	victim := deletiontest.NewSubject("acme", "a")
	keep := renderCSV(t, []row{{Customer: "b", Text: trickyText}})
	for _, alg := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmCrc64nvme, types.ChecksumAlgorithmSha256} {
		t.Run(string(alg), func(t *testing.T) {
			key := "acme/" + strings.ToLower(string(alg)) + ".csv"
			body := renderCSV(t, []row{{Customer: "a"}, {Customer: "b", Text: trickyText}})
			put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key),
				Body: bytes.NewReader(body), ChecksumAlgorithm: alg})
			if err != nil {
				t.Fatal(err)
			}
			sent := map[types.ChecksumAlgorithm]*string{types.ChecksumAlgorithmCrc32c: put.ChecksumCRC32C,
				types.ChecksumAlgorithmCrc64nvme: put.ChecksumCRC64NVME, types.ChecksumAlgorithmSha256: put.ChecksumSHA256}[alg]
			head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
			if err != nil {
				t.Fatal(err)
			}
			stored := map[types.ChecksumAlgorithm]*string{types.ChecksumAlgorithmCrc32c: head.ChecksumCRC32C,
				types.ChecksumAlgorithmCrc64nvme: head.ChecksumCRC64NVME, types.ChecksumAlgorithmSha256: head.ChecksumSHA256}[alg]
			if aws.ToString(sent) == "" || aws.ToString(stored) != aws.ToString(sent) {
				t.Fatalf("checksum %s: the upload answered %q, the object carries %q", alg, aws.ToString(sent), aws.ToString(stored))
			}
		})
	}

	w := s3World{c}
	store := New(testenv.S3Client(srv.URL), "")
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	res, v := eraseAndVerify(t, store, st, victim)
	if got := deletion.StatusOf(res, v); got != event.StatusDeleted || res.Deleted() != 3 {
		t.Errorf("status %s, deleted %+v; want DELETED, 3 rows", got, res.Locations)
	}
	for _, name := range []string{"crc32c", "crc64nvme", "sha256"} {
		key := "acme/" + name + ".csv"
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		got, err := io.ReadAll(out.Body) // the SDK validates the checksum as it reads
		out.Body.Close()
		if err != nil {
			t.Fatalf("%s: a validating reader fails: %v", key, err)
		}
		if !bytes.Equal(got, keep) {
			t.Errorf("%s: content %q", key, got)
		}
		if aws.ToString(out.ChecksumCRC32) != crc32Of(got) {
			t.Errorf("%s: the rewrite carries CRC32 %q, the bytes have %q", key, aws.ToString(out.ChecksumCRC32), crc32Of(got))
		}
		if vs := w.list(t, key); len(vs) != 1 {
			t.Errorf("%s: %d versions left, want the rewritten one (the one it superseded held the row)", key, len(vs))
		}
	}
}

// TestRewriteOfObjectDeletedMeanwhile: the object a rewrite read is deleted before the
// conditional write (its current version is now a delete marker). S3 refuses If-Match on
// an object with no current version; the rewrite must not bring the object back, and the
// store says why.
func TestRewriteOfObjectDeletedMeanwhile(t *testing.T) {
	ctx := context.Background()
	c := newS3Client(t)
	w := s3World{c}
	const key = "acme/x.csv"
	w.putVersion(t, key, []byte("v1"))
	b := objectstore.NewS3(c, testBucket)
	stale, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Body.Close()
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	err = b.Put(ctx, key, stale, func(w io.Writer) error { _, err := io.WriteString(w, "resurrected"); return err })
	if !errors.Is(err, objectstore.ErrConflict) && !errors.Is(err, objectstore.ErrNotFound) {
		t.Errorf("Put over a deleted object: %v, want objectstore.ErrConflict or ErrNotFound", err)
	}
	t.Logf("Put over a deleted object: %v", err)
	if _, err := b.Get(ctx, key); !errors.Is(err, objectstore.ErrNotFound) {
		t.Errorf("Get after the refused rewrite: %v, want objectstore.ErrNotFound (nothing written)", err)
	}
}
