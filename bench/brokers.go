package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// The brokers the end-to-end phases run on; each names its figures (kfake/e2e/…,
// kafka/e2e/…).
const (
	// BrokerKfake is the embedded stack as make run starts it: kfake and gofakes3 in
	// process.
	BrokerKfake = "kfake"
	// BrokerKafka is the embedded stack's services on Apache Kafka (one KRaft node, a
	// process) and S3 on moto's server, as production has them apart from Lethe.
	BrokerKafka = "kafka"
)

// externals starts what broker needs outside the embedded stack: for BrokerKafka a fresh
// Kafka node with Lethe's topics, and moto's server emptied, with the dataset bucket. stop
// ends them.
func externals(ctx context.Context, brokerName string) (ext embedded.External, stop func(), err error) {
	if brokerName == BrokerKfake {
		return embedded.External{}, func() {}, nil
	}
	if brokerName != BrokerKafka {
		return ext, nil, fmt.Errorf("bench: unknown broker %q (kfake or kafka)", brokerName)
	}
	c, err := testenv.StartKafka(testenv.KafkaOptions{Nodes: 1})
	if err != nil {
		return ext, nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...))
	if err != nil {
		return ext, nil, err
	}
	defer cl.Close()
	if err := broker.EnsureTopics(ctx, cl, embedded.Partitions, service.Topics...); err != nil {
		return ext, nil, err
	}
	url, err := testenv.MotoServer()
	if err != nil {
		return ext, nil, err
	}
	if err := resetMoto(ctx, url); err != nil {
		return ext, nil, err
	}
	s3c := testenv.S3Client(url)
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(embedded.DatasetBucket)}); err != nil {
		return ext, nil, err
	}
	if _, err := s3c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(embedded.DatasetBucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		return ext, nil, err
	}
	return embedded.External{Kafka: c.Brokers(), S3: s3c, S3Endpoint: url}, c.Stop, nil
}

// resetMoto empties moto's server (its reset API), so a phase starts on no earlier data.
func resetMoto(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("bench: moto reset: " + resp.Status)
	}
	return nil
}
