package ledger

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Kind is what a job does.
type Kind byte

// Job kinds.
const (
	// Move takes a delivered copy to the Junk mailbox.
	Move Kind = 'm'
	// Undo moves back what a Move job moved.
	Undo Kind = 'u'
)

func (k Kind) String() string {
	switch k {
	case Move:
		return "move"
	case Undo:
		return "undo"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// MarshalText encodes the kind as its String.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a String.
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "move":
		*k = Move
	case "undo":
		*k = Undo
	default:
		return fmt.Errorf("ledger: unknown job kind %q", b)
	}
	return nil
}

// Status is where a job stands.
type Status string

// Job statuses.
const (
	Pending Status = "pending" // waiting for its turn or a retry
	Done    Status = "done"    // finished: Outcome says how
)

// Outcomes of a finished job.
const (
	Moved   = "moved"   // the message was moved
	Skipped = "skipped" // nothing to move (Reason: read, gone, not found, ambiguous, unpurgeable…)
	Failed  = "failed"  // the server refused, or the retries ran out
	Logged  = "logged"  // zap.mode: log: only logged
)

// JobID identifies a job: its kind, its entry and its mailbox user, so
// that the same job is never made twice.
type JobID [25]byte

// String is the id in hex.
func (id JobID) String() string { return fmt.Sprintf("%x", id[:]) }

// MarshalText encodes the id in hex.
func (id JobID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes the hex of String.
func (id *JobID) UnmarshalText(b []byte) error {
	out, err := hex.DecodeString(string(b))
	if err != nil || len(out) != len(id) {
		return fmt.Errorf("ledger: job id %q", b)
	}
	copy(id[:], out)
	return nil
}

// MakeJobID is the id of the job of kind k for entry e and user.
func MakeJobID(k Kind, e Key, user string) JobID {
	var id JobID
	id[0] = byte(k)
	copy(id[1:17], e[:])
	h := userHash(user)
	copy(id[17:], h[:])
	return id
}

// Location is where a moved message is: its mailbox, the mailbox's
// identity (IMAP UIDVALIDITY or Dovecot's mailbox GUID) and its UID.
type Location struct {
	Mailbox  string `json:"mailbox"`
	Validity string `json:"validity,omitempty"`
	UID      uint32 `json:"uid,omitempty"`
}

// Job is one move (or move back) of one delivered copy in one user's
// mailboxes.
type Job struct {
	ID        JobID     `json:"id"`
	Kind      Kind      `json:"kind"`
	Entry     Key       `json:"-"`
	Campaign  uint64    `json:"campaign"`
	User      string    `json:"user"`
	Rcpt      string    `json:"rcpt"`
	MessageID string    `json:"message_id"`
	Delivered time.Time `json:"delivered"`
	Created   time.Time `json:"created"`
	Status    Status    `json:"status"`
	Attempts  int       `json:"attempts"`
	Next      time.Time `json:"next"`
	Outcome   string    `json:"outcome,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	// From is the mailbox the message was found in (Move) or is moved
	// back to (Undo); To where it went: Junk, or From for an undo.
	From     string    `json:"from,omitempty"`
	To       Location  `json:"to"`
	Finished time.Time `json:"finished,omitzero"`
	// Undo of a Move job: the Move job's id (set on Undo jobs).
	Of JobID `json:"of,omitzero"`
}

type jobJSON struct {
	Job
	EntryHex string `json:"entry"`
}

func encodeJob(j Job) ([]byte, error) {
	return json.Marshal(jobJSON{Job: j, EntryHex: j.Entry.String()})
}

func decodeJob(b []byte) (Job, error) {
	var jj jobJSON
	if err := json.Unmarshal(b, &jj); err != nil {
		return Job{}, fmt.Errorf("ledger: job: %w", err)
	}
	raw, err := hex.DecodeString(jj.EntryHex)
	if err != nil || len(raw) != 16 {
		return Job{}, fmt.Errorf("ledger: job entry %q", jj.EntryHex)
	}
	copy(jj.Job.Entry[:], raw)
	return jj.Job, nil
}

func jobKey(id JobID) []byte { return append([]byte{'j'}, id[:]...) }

func queueKey(due time.Time, id JobID) []byte {
	b := make([]byte, 0, 34)
	b = append(b, 'q')
	b = binary.BigEndian.AppendUint64(b, uint64(max(due.UnixNano(), 0)))
	return append(b, id[:]...)
}

func campaignJobKey(c uint64, id JobID) []byte {
	b := make([]byte, 0, 34)
	b = append(b, 'k')
	b = binary.BigEndian.AppendUint64(b, c)
	return append(b, id[:]...)
}

// ErrJobExists is returned by AddJob for a job made before.
var ErrJobExists = errors.New("ledger: job exists")

// AddJob stores a new pending job, due at j.Next. A job of the same id
// made before (done or not) is left alone: AddJob returns ErrJobExists.
func (l *Ledger) AddJob(j Job) error {
	if l.closed.Load() {
		return ErrClosed
	}
	l.jobMu.Lock()
	defer l.jobMu.Unlock()
	return l.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(jobKey(j.ID)); err == nil {
			return ErrJobExists
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("ledger: add job: %w", err)
		}
		j.Status = Pending
		v, err := encodeJob(j)
		if err != nil {
			return err
		}
		for _, kv := range [][2][]byte{{jobKey(j.ID), v}, {queueKey(j.Next, j.ID), nil}, {campaignJobKey(j.Campaign, j.ID), nil}} {
			if err := txn.Set(kv[0], kv[1]); err != nil {
				return fmt.Errorf("ledger: add job: %w", err)
			}
		}
		return nil
	})
}

// UpdateJob stores j's new state: a pending job is queued at j.Next, a
// done one leaves the queue. A job done before is never changed again
// (the first outcome stands): UpdateJob then returns ErrJobDone.
func (l *Ledger) UpdateJob(j Job) error {
	if l.closed.Load() {
		return ErrClosed
	}
	l.jobMu.Lock()
	defer l.jobMu.Unlock()
	return l.db.Update(func(txn *badger.Txn) error {
		old, err := getJob(txn, j.ID)
		if err != nil {
			return err
		}
		if old.Status == Done {
			return ErrJobDone
		}
		if err := txn.Delete(queueKey(old.Next, j.ID)); err != nil {
			return fmt.Errorf("ledger: update job: %w", err)
		}
		v, err := encodeJob(j)
		if err != nil {
			return err
		}
		if err := txn.Set(jobKey(j.ID), v); err != nil {
			return fmt.Errorf("ledger: update job: %w", err)
		}
		if j.Status == Pending {
			if err := txn.Set(queueKey(j.Next, j.ID), nil); err != nil {
				return fmt.Errorf("ledger: update job: %w", err)
			}
		}
		return nil
	})
}

// ErrJobDone is returned by UpdateJob for a job already done.
var ErrJobDone = errors.New("ledger: job already done")

func getJob(txn *badger.Txn, id JobID) (Job, error) {
	item, err := txn.Get(jobKey(id))
	if err != nil {
		return Job{}, fmt.Errorf("ledger: job %s: %w", id, err)
	}
	var j Job
	err = item.Value(func(v []byte) error {
		var err error
		j, err = decodeJob(v)
		return err
	})
	return j, err
}

// GetJob returns job id.
func (l *Ledger) GetJob(id JobID) (Job, error) {
	var j Job
	err := l.db.View(func(txn *badger.Txn) error {
		var err error
		j, err = getJob(txn, id)
		return err
	})
	return j, err
}

// DueJobs returns up to limit pending jobs due at or before now, the
// earliest first.
func (l *Ledger) DueJobs(now time.Time, limit int) ([]Job, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	var jobs []Job
	end := queueKey(now, JobID{0xff})
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.PrefetchValues = false
		io.Prefix = []byte{'q'}
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid() && len(jobs) < limit; it.Next() {
			k := it.Item().Key()
			if string(k) > string(end) {
				break
			}
			var id JobID
			copy(id[:], k[9:])
			j, err := getJob(txn, id)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: due jobs: %w", err)
	}
	return jobs, nil
}

// PendingJobs counts the jobs waiting (due or not).
func (l *Ledger) PendingJobs() (int, error) {
	n := 0
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.PrefetchValues = false
		io.Prefix = []byte{'q'}
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// CampaignJobs returns the jobs of campaign c.
func (l *Ledger) CampaignJobs(c uint64) ([]Job, error) {
	var jobs []Job
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.PrefetchValues = false
		io.Prefix = binary.BigEndian.AppendUint64([]byte{'k'}, c)
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var id JobID
			copy(id[:], it.Item().Key()[9:])
			j, err := getJob(txn, id)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: jobs of campaign %d: %w", c, err)
	}
	return jobs, nil
}

// Mark is a campaign's purge state.
type Mark struct {
	// Triggered is when the campaign's verdict reached the trigger ("":
	// not now), Undone when it was last allowed, revoked or dropped
	// below it after a trigger.
	Triggered time.Time `json:"triggered,omitzero"`
	Undone    time.Time `json:"undone,omitzero"`
	Action    string    `json:"action,omitempty"` // the verdict for its copies at the last change
	// HeldBy names the administrator who undid the campaign's purge by
	// hand ("" when nobody did): its copies are not purged again until
	// it leaves the trigger and reaches it anew.
	HeldBy string `json:"held_by,omitempty"`
}

// Held reports whether an administrator undid the campaign's purge.
func (m Mark) Held() bool { return m.HeldBy != "" }

func markKey(c uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'c'}, c) }

// SetMark stores campaign c's purge state.
func (l *Ledger) SetMark(c uint64, m Mark) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := l.db.Update(func(txn *badger.Txn) error { return txn.Set(markKey(c), v) }); err != nil {
		return fmt.Errorf("ledger: mark campaign %d: %w", c, err)
	}
	return nil
}

// GetMark returns campaign c's purge state (zero without one).
func (l *Ledger) GetMark(c uint64) (Mark, error) {
	var m Mark
	err := l.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(markKey(c))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &m) })
	})
	if err != nil {
		return Mark{}, fmt.Errorf("ledger: mark of campaign %d: %w", c, err)
	}
	return m, nil
}

// Marks returns the purge state of every campaign that has one.
func (l *Ledger) Marks() (map[uint64]Mark, error) {
	out := map[uint64]Mark{}
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix = []byte{'c'}
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			c := binary.BigEndian.Uint64(item.Key()[1:])
			var m Mark
			if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &m) }); err != nil {
				return fmt.Errorf("campaign %d: %w", c, err)
			}
			out[c] = m
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: marks: %w", err)
	}
	return out, nil
}

// Cursor and SetCursor keep the last entry re-matched (internal/zap).
func (l *Ledger) Cursor() (Key, error) {
	var k Key
	err := l.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("zcursor"))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { copy(k[:], v); return nil })
	})
	return k, err
}

// SetCursor stores the last entry re-matched.
func (l *Ledger) SetCursor(k Key) error {
	return l.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("zcursor"), k[:]) })
}

// pruneJobs deletes the jobs done longer than JobRetention ago.
func (l *Ledger) pruneJobs() (int, error) {
	cutoff := l.opts.Clock().Add(-l.opts.JobRetention)
	var old []Job
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix = []byte{'j'}
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(v []byte) error {
				j, err := decodeJob(v)
				if err == nil && j.Status == Done && j.Finished.Before(cutoff) {
					old = append(old, j)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || len(old) == 0 {
		return 0, err
	}
	l.jobMu.Lock()
	defer l.jobMu.Unlock()
	wb := l.db.NewWriteBatch()
	defer wb.Cancel()
	for _, j := range old {
		for _, k := range [][]byte{jobKey(j.ID), campaignJobKey(j.Campaign, j.ID)} {
			if err := wb.Delete(k); err != nil {
				return 0, err
			}
		}
	}
	return len(old), wb.Flush()
}
