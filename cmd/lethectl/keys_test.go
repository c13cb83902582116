package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/envelope/dynamokeys"
	"github.com/lethe-erasure/lethe/pkg/envelope/kmskek"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// kekPair is a KEK and its base64 form, as LETHE_KEK takes it.
type kekPair struct {
	id  string
	raw []byte
	b64 string
}

func newKEK(t *testing.T, id string) kekPair {
	t.Helper()
	raw := make([]byte, envelope.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	return kekPair{id: id, raw: raw, b64: base64.StdEncoding.EncodeToString(raw)}
}

// rotation seals keys under kek1 in keys, shreds some, and returns the sealed payloads
// and the ids shredded.
type rotation struct {
	kek1, kek2 kekPair
	sealed     map[string]envelope.Sealed
	shredded   map[string]bool
}

func seedRotation(t *testing.T, keys envelope.KeyStore, n int) *rotation {
	t.Helper()
	r := &rotation{kek1: newKEK(t, "kek1"), kek2: newKEK(t, "kek2"), sealed: map[string]envelope.Sealed{}, shredded: map[string]bool{}}
	s := r.sealer(t, keys, r.kek1)
	for i := range n {
		id := fmt.Sprintf("er_rot_%03d", i)
		b, err := s.Seal(t.Context(), id, []byte("subject of "+id))
		if err != nil {
			t.Fatal(err)
		}
		r.sealed[id] = b
	}
	for _, id := range []string{"er_rot_000", "er_rot_001"} {
		if err := s.Shred(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		r.shredded[id] = true
	}
	return r
}

func (r *rotation) sealer(t *testing.T, keys envelope.KeyStore, current kekPair, old ...kekPair) *envelope.Sealer {
	t.Helper()
	ring := map[string][]byte{current.id: current.raw}
	for _, o := range old {
		ring[o.id] = o.raw
	}
	kek, err := envelope.NewKEK(current.id, ring)
	if err != nil {
		t.Fatal(err)
	}
	return &envelope.Sealer{KEK: kek, Keys: keys}
}

// rotate sets the environment of a rotation: kek2 current, kek1 in LETHE_KEK_OLD.
func (r *rotation) rotate(t *testing.T) {
	t.Setenv("LETHE_KEK", r.kek2.b64)
	t.Setenv("LETHE_KEK_ID", r.kek2.id)
	t.Setenv("LETHE_KEK_OLD", r.kek1.id+":"+r.kek1.b64)
	t.Setenv("LETHE_KEK_FILE", "")
}

// checkDropped opens every sealed payload with kek2 alone: live keys open, shredded ones
// stay shredded.
func (r *rotation) checkDropped(t *testing.T, keys envelope.KeyStore) {
	t.Helper()
	s := r.sealer(t, keys, r.kek2)
	for id, b := range r.sealed {
		pt, err := s.Open(t.Context(), id, b)
		switch {
		case r.shredded[id]:
			if !errors.Is(err, envelope.ErrShredded) {
				t.Errorf("Open(%s) of a shredded key with kek1 dropped = %q, %v; want ErrShredded", id, pt, err)
			}
		case err != nil || string(pt) != "subject of "+id:
			t.Errorf("Open(%s) with kek1 dropped = %q, %v", id, pt, err)
		}
	}
}

// noSecrets fails if r's output holds an id or a KEK.
func (r *rotation) noSecrets(t *testing.T, res result) {
	t.Helper()
	ids := []string{r.kek1.b64, r.kek2.b64}
	for id := range r.sealed {
		ids = append(ids, id)
	}
	noRawIDs(t, res, ids...)
}

func TestKeysRewrapDirStore(t *testing.T) {
	dir := t.TempDir()
	keys, err := envelope.NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := seedRotation(t, keys, 25)
	orphan := newKEK(t, "kek0")
	if _, err := r.sealer(t, keys, orphan).Seal(t.Context(), "er_orphan", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := keys.Close(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LETHE_KEYS_TABLE", "")
	t.Setenv("LETHE_KEYS_DIR", dir)
	r.rotate(t)

	var dry rewrapReport
	res := lethectl(t, "keys", "rewrap", "--dry-run", "-o", "json")
	wantCode(t, res, exitOK)
	decode(t, res, &dry)
	if dry.Rewrap != nil || dry.Census.ByKEK["kek1"] != 23 || dry.Census.ByKEK["kek0"] != 1 || dry.OtherKEK != 24 || dry.OldKEKDroppable {
		t.Fatalf("dry run = %+v; want 23 keys under kek1, 1 under kek0, nothing rewrapped", dry)
	}
	r.noSecrets(t, res)

	// The key under kek0, which the ring lacks, fails (exit 4) and is named as not openable.
	res = lethectl(t, "keys", "rewrap", "--rate", "0")
	wantCode(t, res, exitProblem)
	out := strings.Join(strings.Fields(res.stdout), " ")
	for _, want := range []string{"rewrapped 23", "failed 1 (unknown_kek 1)", "live keys wrapped by kek0 1 (not in the key ring", "live keys wrapped by kek2 23 (current)", "1 live keys are still wrapped"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, res)
		}
	}
	r.noSecrets(t, res)

	// Shred the orphan (its request is done); a rerun changes nothing and says kek1 can go.
	keys, err = envelope.NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Destroy(t.Context(), "er_orphan"); err != nil {
		t.Fatal(err)
	}
	keys.Close()
	var again rewrapReport
	res = lethectl(t, "keys", "rewrap", "-o", "json", "--workers", "2")
	wantCode(t, res, exitOK)
	decode(t, res, &again)
	if again.Rewrap == nil || again.Rewrap.Rewrapped != 0 || again.Rewrap.AlreadyCurrent != 23 || again.Rewrap.Failed != 0 ||
		!again.OldKEKDroppable || again.OtherKEK != 0 {
		t.Fatalf("second run = %+v; want nothing rewrapped, 23 already current, old KEK droppable", again)
	}

	keys, err = envelope.NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	r.checkDropped(t, keys)
}

func TestKeysRewrapNoStore(t *testing.T) {
	t.Setenv("LETHE_KEYS_TABLE", "")
	t.Setenv("LETHE_KEYS_DIR", t.TempDir())
	(&rotation{kek1: newKEK(t, "kek1"), kek2: newKEK(t, "kek2")}).rotate(t)
	res := lethectl(t, "keys", "rewrap")
	wantCode(t, res, exitNotFound)
	if !strings.Contains(res.stderr, "holds no key store") {
		t.Fatalf("want the reason, got %s", res)
	}
	t.Setenv("LETHE_KEK", "")
	wantCode(t, lethectl(t, "keys", "rewrap"), exitError)
	wantCode(t, lethectl(t, "keys", "rewrap", "--workers", "0"), exitUsage)
}

func TestKeysRewrapDynamoDB(t *testing.T) {
	url := testenv.DynamoDB(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("LETHE_DYNAMODB_ENDPOINT", url)
	table := testenv.DynamoTable(t, "rewrap-keys")
	t.Setenv("LETHE_KEYS_TABLE", table)
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(url),
	})
	keys := dynamokeys.New(client, table)
	if err := keys.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := seedRotation(t, keys, 60)
	r.rotate(t)

	// Another process shreds keys while the rewrap runs: they stay shredded.
	var wg sync.WaitGroup
	shredder := r.sealer(t, keys, r.kek2, r.kek1)
	start := make(chan struct{})
	for i := 50; i < 60; i++ {
		id := fmt.Sprintf("er_rot_%03d", i)
		r.shredded[id] = true
		wg.Go(func() {
			<-start
			time.Sleep(time.Duration(i-50) * 10 * time.Millisecond) // spread over the first 100 ms of the run
			if err := shredder.Shred(t.Context(), id); err != nil {
				t.Error(err)
			}
		})
	}
	progressEvery = 0 // a progress line per key
	t.Cleanup(func() { progressEvery = 2 * time.Second })
	close(start)
	var rep rewrapReport
	res := lethectl(t, "keys", "rewrap", "-o", "json", "--rate", "200") // 60 keys: 300 ms each pass
	wg.Wait()
	wantCode(t, res, exitOK)
	decode(t, res, &rep)
	c := rep.Rewrap
	if c == nil || c.Failed != 0 || c.Rewrapped+c.Shredded+c.AlreadyCurrent < 48 || c.Rewrapped+c.Shredded+c.AlreadyCurrent > 58 ||
		rep.Census.ByKEK["kek2"] < 48 || rep.Census.ByKEK["kek2"] > 58 || !rep.OldKEKDroppable || rep.Store != "dynamodb:rewrap-keys" {
		t.Fatalf("rewrap = %+v (%+v); want 48-58 keys handled, no failure, 48-58 live keys under kek2 and none under kek1", rep, c)
	}
	t.Logf("rewrap counts %+v, census %+v", *c, rep.Census)
	if !strings.Contains(res.stderr, "rewrap: ") || !strings.Contains(res.stderr, "shredded meanwhile") {
		t.Errorf("no progress on stderr:\n%s", res)
	}
	r.noSecrets(t, res)
	r.checkDropped(t, keys)

	// A table that does not exist stops the run with the store's error (exit 1).
	t.Setenv("LETHE_KEYS_TABLE", "no-such-table")
	res = lethectl(t, "keys", "rewrap")
	wantCode(t, res, exitError)
	if !strings.Contains(res.stderr, "stopped") || !strings.Contains(res.stdout, "rewrapped") {
		t.Fatalf("want the counts so far and the reason it stopped, got %s", res)
	}
}

// TestKeysKMSGenerate: kms-generate prints the settings of a KMS-wrapped key-encryption
// key, and a process given them decrypts it with KMS into a ring that seals and opens.
func TestKeysKMSGenerate(t *testing.T) {
	ctx := context.Background()
	endpoint := testenv.Moto(t)
	creds := map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
	for k, v := range creds {
		t.Setenv(k, v)
	}
	cl, err := kmskek.Client(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	k, err := cl.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	res := runCLIEnv(map[string]string{"LETHE_KMS_ENDPOINT": endpoint}, "keys", "kms-generate", "--kms-key", *k.KeyMetadata.KeyId, "--id", "kek7")
	if res.code != exitOK {
		t.Fatalf("kms-generate: %s", res)
	}
	settings := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		name, value, _ := strings.Cut(line, "=")
		settings[name] = value
	}
	if settings["LETHE_KEK_ID"] != "kek7" || settings["LETHE_KEK_KMS_CIPHERTEXT"] == "" {
		t.Fatalf("kms-generate printed %q", res.stdout)
	}
	s := envelope.KEKSettings{ID: "kek7", KMS: envelope.KMSSettings{Ciphertext: settings["LETHE_KEK_KMS_CIPHERTEXT"], Endpoint: endpoint}}
	ring, err := kmskek.Ring(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if ring.CurrentID() != "kek7" {
		t.Errorf("ring's current key %q, want kek7", ring.CurrentID())
	}
	if r := runCLIEnv(nil, "keys", "kms-generate", "--id", "kek8"); r.code != exitUsage {
		t.Errorf("kms-generate without --kms-key: %s", r)
	}
}
