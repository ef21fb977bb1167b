package fleet

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nddmilter/nddmilter/internal/store"
)

// snapshotName is the object holding the latest snapshot.
const snapshotName = "state"

// Snapshot stores a backup of the local store in the snapshot bucket and
// then purges the stream's events before the previous snapshot (a node
// behind that must start from a snapshot). It returns the snapshot's
// applied sequence and size.
func (n *Node) Snapshot(ctx context.Context) (seq uint64, size uint64, err error) {
	obs, err := n.js.ObjectStore(ctx, n.opts.snapshotBucket())
	if err != nil {
		return 0, 0, fmt.Errorf("fleet: snapshot bucket: %w", err)
	}
	prev := uint64(0)
	if info, err := obs.GetInfo(ctx, snapshotName); err == nil {
		prev, _ = strconv.ParseUint(info.Metadata["seq"], 10, 64)
	}
	// The backup holds at least this sequence (read before it starts);
	// the restored store's own applied sequence is the exact one.
	seq, err = n.st.Applied(ctx)
	if err != nil {
		return 0, 0, err
	}
	if seq == 0 || seq <= prev {
		return prev, 0, nil
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := n.st.Backup(ctx, pw)
		pw.CloseWithError(err)
	}()
	meta := map[string]string{
		"seq":  strconv.FormatUint(seq, 10),
		"node": n.opts.Node,
		"time": time.Now().UTC().Format(time.RFC3339),
	}
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: snapshotName, Metadata: meta}, pr)
	pr.CloseWithError(err)
	if err != nil {
		return 0, 0, fmt.Errorf("fleet: store snapshot: %w", err)
	}
	// Signed over the digest the object store computed of what it stored
	// (and checks again when the object is read): a new node restores
	// only a snapshot a snapshot node of fleet.nodes signed (Bootstrap).
	sig, err := n.sign.kp.Sign(snapshotSigned(meta["seq"], n.opts.Node, info.Digest))
	if err != nil {
		return 0, 0, fmt.Errorf("fleet: sign snapshot: %w", err)
	}
	meta["key"], meta["sig"] = n.sign.pub, base64.RawURLEncoding.EncodeToString(sig)
	// A clustered bucket may answer the update from a replica that has
	// not seen the Put yet ("cannot update meta for a deleted object"):
	// try again, a few times.
	for try := 0; ; try++ {
		err = obs.UpdateMeta(ctx, snapshotName, jetstream.ObjectMeta{Name: snapshotName, Metadata: meta})
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrUpdateMetaDeleted) || try == 20 {
			return 0, 0, fmt.Errorf("fleet: sign snapshot: %w", err)
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("fleet: sign snapshot: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	n.mu.Lock()
	n.snapSeq = seq
	n.mu.Unlock()
	if prev > 1 {
		s, err := n.js.Stream(ctx, n.opts.Stream)
		if err == nil {
			err = s.Purge(ctx, jetstream.WithPurgeSequence(prev))
		}
		if err != nil {
			n.log.Warn("fleet: purge stream", "before", prev, "err", err)
		}
	}
	n.log.Info("fleet: snapshot stored", "seq", seq, "bytes", info.Size)
	return seq, info.Size, nil
}

// snapshotDue reports whether the last snapshot is older than
// SnapshotEvery.
func (n *Node) snapshotDue(ctx context.Context) bool {
	if n.opts.SnapshotEvery < 0 {
		return false
	}
	obs, err := n.js.ObjectStore(ctx, n.opts.snapshotBucket())
	if err != nil {
		return false
	}
	info, err := obs.GetInfo(ctx, snapshotName)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return true
	}
	if err != nil {
		return false
	}
	return time.Since(info.ModTime) >= n.opts.SnapshotEvery
}

// bootstrapTry bounds one look for the snapshot bucket.
const bootstrapTry = 2 * time.Second

// snapshotBucket opens the snapshot bucket, trying again until ctx ends:
// a request made before the JetStream cluster has a meta leader (servers
// starting together, a fresh fleet) gets no answer at all, and waiting
// for one would hold the daemon's start for the whole of ctx.
func snapshotBucket(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.ObjectStore, error) {
	for {
		tctx, cancel := context.WithTimeout(ctx, bootstrapTry)
		obs, err := js.ObjectStore(tctx, bucket)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) || ctx.Err() != nil {
			return obs, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Bootstrap fills an empty store directory dir from the fleet's latest
// snapshot (store.Restore with storeOpts); the node then starts from the
// snapshot's applied sequence. restored is false when there is no
// snapshot (the node applies the stream from its start).
func Bootstrap(ctx context.Context, dir string, storeOpts store.Options, opts Options) (restored bool, err error) {
	opts = opts.withDefaults()
	tr, err := newTrust(opts.Nodes, opts.Unsigned)
	if err != nil {
		return false, err
	}
	nc, err := connect(opts, opts.Logger)
	if err != nil {
		return false, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false, fmt.Errorf("fleet: jetstream: %w", err)
	}
	obs, err := snapshotBucket(ctx, js, opts.snapshotBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fleet: snapshot bucket: %w", err)
	}
	obj, err := obs.Get(ctx, snapshotName)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fleet: snapshot: %w", err)
	}
	defer obj.Close()
	// The signature covers the digest the object store checks the
	// content against as it is read: a snapshot replaced or changed by
	// anyone but a snapshot node fails here or while restoring.
	info, err := obj.Info()
	if err != nil || info == nil {
		return false, fmt.Errorf("%w: no object information: %v", ErrSnapshotUntrusted, err)
	}
	if err := tr.verifySnapshot(info.Metadata, info.Digest); err != nil {
		return false, err
	}
	if _, err := store.Restore(ctx, dir, obj, storeOpts); err != nil {
		return false, fmt.Errorf("fleet: restore snapshot: %w", err)
	}
	st, err := store.Open(dir, storeOpts)
	if err != nil {
		return false, fmt.Errorf("fleet: restored snapshot: %w", err)
	}
	err = st.DropOutbox() // the snapshot node's, not this one's
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err == nil, err
}
