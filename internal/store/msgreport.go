package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Message reports: what one reporter last said about one message
// (ReportInput.Digest), so that the same user's COPY and FLAG of a
// message, an APPEND of it by a mail client, or a repeated move count
// once, and so that moving a message back out of Junk withdraws the
// spam vote it had cast.
//
// Key: pfxMsgReport + reporter hash (8 bytes BE) + digest. Value: kind (1
// byte) + campaign id (8 bytes BE). The entries live as long as a
// campaign without reports (Options.Expiry): Badger drops them by TTL.
const pfxMsgReport = 'p'

// MaxDigestLen is the longest ReportInput.Digest accepted.
const MaxDigestLen = 64

// ErrDigestTooLong is returned for a ReportInput.Digest over MaxDigestLen.
var ErrDigestTooLong = errors.New("message digest too long")

// msgReportKey is the key of reporter rh's report of a message.
func msgReportKey(rh uint64, digest []byte) []byte {
	k := make([]byte, 0, 9+len(digest))
	k = append(k, pfxMsgReport)
	k = binary.BigEndian.AppendUint64(k, rh)
	return append(k, digest...)
}

// msgReport is a reporter's earlier report of a message.
type msgReport struct {
	found    bool
	kind     Kind
	campaign CampaignID
}

func validateDigest(in *ReportInput) error {
	if len(in.Digest) > MaxDigestLen {
		return fmt.Errorf("report: digest of %d bytes, at most %d: %w", len(in.Digest), MaxDigestLen, ErrDigestTooLong)
	}
	return nil
}

// priorMsgReport reads the reporter's earlier report of in.Digest (none
// when the report carries no digest).
func priorMsgReport(txn *badger.Txn, in *ReportInput) (msgReport, error) {
	if len(in.Digest) == 0 {
		return msgReport{}, nil
	}
	item, err := txn.Get(msgReportKey(in.reporterKey(), in.Digest))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return msgReport{}, nil
	}
	if err != nil {
		return msgReport{}, fmt.Errorf("read message report: %w", err)
	}
	var p msgReport
	err = item.Value(func(v []byte) error {
		if len(v) == 9 {
			p = msgReport{found: true, kind: Kind(v[0]), campaign: CampaignID(binary.BigEndian.Uint64(v[1:]))}
		}
		return nil // a malformed entry counts as none: it is rewritten
	})
	return p, err
}

// duplicateOf tells whether the report repeats prior (same kind) on a
// campaign that still exists (or on none): it then changes nothing.
func duplicateOf(txn *badger.Txn, in *ReportInput, prior msgReport) (bool, error) {
	if !prior.found || prior.kind != in.Kind {
		return false, nil
	}
	if prior.campaign == 0 {
		return true, nil
	}
	_, err := getRecord(txn, prior.campaign)
	if errors.Is(err, ErrNotFound) {
		return false, nil // deleted or expired since: a new report
	}
	return err == nil, err
}

// withdraw takes the vote of the other kind that the reporter cast with
// prior off dst (the campaign this report reached, which is where that
// vote lives unless the campaign was split off since): its reporter entry
// goes, and the campaign's reporter and report counts drop by one.
func withdraw(w *wtx, dst *record, in *ReportInput, prior msgReport) (bool, error) {
	if !prior.found || prior.kind == in.Kind {
		return false, nil
	}
	rk := reporterKey(dst.ID, prior.kind, in.reporterKey())
	_, err := w.txn.Get(rk)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read reporter: %w", err)
	}
	if err := w.del(rk); err != nil {
		return false, err
	}
	if err := w.del(reporterCampKey(in.reporterKey(), dst.ID, prior.kind)); err != nil {
		return false, err
	}
	dec := func(n *int64) {
		if *n > 0 {
			*n--
		}
	}
	if prior.kind == KindSpam {
		dec(&dst.SpamReporters)
		dec(&dst.SpamReports)
	} else {
		dec(&dst.HamReporters)
		dec(&dst.HamReports)
	}
	return true, nil
}

// putMsgReport records that the reporter reported in.Digest with in.Kind
// on campaign id, for ttl (0: for ever).
func putMsgReport(w *wtx, in *ReportInput, id CampaignID, ttl time.Duration) error {
	if len(in.Digest) == 0 {
		return nil
	}
	k := msgReportKey(in.reporterKey(), in.Digest)
	v := binary.BigEndian.AppendUint64([]byte{byte(in.Kind)}, uint64(id))
	e := badger.NewEntry(k, v)
	if ttl > 0 {
		e = e.WithTTL(ttl)
	}
	w.entries++
	w.bytes += len(k) + len(v) + 12
	if err := w.txn.SetEntry(e); err != nil {
		return fmt.Errorf("set message report: %w", err)
	}
	return nil
}
