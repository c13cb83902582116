package dynamo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

var _ auditlog.ReportLog = (*Store)(nil)

// AppendReport stores d as an item of its own, (REQ#<request id>,
// REPORT#<store>#<seq, 20 digits>#<digest of the report>), beside the request's other
// reports: an unconditional write, in a BatchWriteItem call shared with concurrent writes
// (group commit). Reports and RequestState fold each store's items with
// auditlog.MergeReports in sort key order: a report written by PutReport or CreateReport
// first, then by seq, so the same report appended twice reads the same, and reports read
// as a writer merging them in seq order would have kept them.
func (s *Store) AppendReport(ctx context.Context, d event.StoreDone, seq int64) error {
	if d.RequestID == "" || d.Store == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: report needs a request id and a store"))
	}
	item, err := attemptRecord(reqPK(d.RequestID), "", d, d.Attempt)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(item["data"].(*types.AttributeValueMemberS).Value))
	item["sk"] = str(fmt.Sprintf("%s#%020d#%s", reportSK(d.Store), max(seq, 0), hex.EncodeToString(sum[:16])))
	return s.write(ctx, item)
}

// isReport reports whether sk is the sort key of a report: REPORT#<store>, written by
// PutReport and CreateReport, or REPORT#<store>#<seq>#<digest>, written by AppendReport.
func isReport(sk string) bool { return strings.HasPrefix(sk, reportPrefix) }

var _ auditlog.LinkedReceiptWriter = (*Store)(nil)

// PutLinkedReceipt stores r, which its tenant's head names or named: its index entry, then
// the receipt (as PutReceipt orders them), with unconditional writes shared with
// concurrent ones (group commit). Only r can be linked for its request, so a receipt
// stored already is the same one.
func (s *Store) PutLinkedReceipt(ctx context.Context, r event.Receipt) error {
	if r.RequestID == "" || r.TenantID == "" {
		return retry.Permanent(errors.New("auditlog/dynamo: receipt needs a request id and a tenant id"))
	}
	idx := key(tenPK(r.TenantID), indexSK(r.Seq, r.RequestID))
	idx["request_id"], idx["seq"] = str(r.RequestID), num(r.Seq)
	item, err := record(reqPK(r.RequestID), "RECEIPT", r)
	if err != nil {
		return err
	}
	item["seq"] = num(r.Seq)
	if err := s.write(ctx, idx); err != nil {
		return err
	}
	return s.write(ctx, item)
}
