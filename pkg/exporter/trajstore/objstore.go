package trajstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/objstore"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// NewObjectStore is a Store over a JetStream object store: the mesh's
// agentmesh_trajectories (pkg/topology creates it, subject.Names
// TrajectoryStore names it). js is the JetStream context obs was opened
// from (Put publishes through it). Requests are made again through a leader
// election or a reconnect (pkg/service/jsretry) until ctx ends. NewObjectStore makes
// no request: the first Put asks obs for its bucket's stream.
//
// Get, Delete and Exists go through obs. Put writes the object itself, in
// the object store's stream format, so that every object store client
// (GetBytes, GetInfo, List, Watch, Delete) reads it as one of its own:
// the chunks (128 KiB each) on a fresh $O.<bucket>.C.<nuid>, each publish
// acknowledged before the next, then the meta message on
// $O.<bucket>.M.<name> as a subject rollup. jetstream.ObjectStore's own
// Put is not used: it replaces an existing object (purging chunks a
// reader may be reading), it has no create-only write, and in nats.go
// v1.55 some of its calls leak a goroutine (0.6% to 3% of small Puts here:
// its per-call JetStream context's reconnect watcher can miss the cleanup
// and block forever).
//
// This Store never replaces: Put reads the name's meta first and compares
// its SHA-256 digest with the bytes put, writing only when the name is
// absent (or deleted). The meta is published expecting the name's meta
// subject to still be at the sequence read, so of two Stores (two
// processes) racing to put one absent name, one writes the object and the
// other finds it, compares digests and purges its own chunks. Puts of one
// name through one Store are serialized. A Put that fails after storing
// chunks purges them, best effort, unless a meta naming them may still be
// stored (its publish went unanswered and the meta subject has not moved
// since): those chunks, and those of a failed purge, stay unreferenced in
// the stream.
func NewObjectStore(js jetstream.JetStream, obs jetstream.ObjectStore) Store {
	return &objectStore{js: js, obs: obs, locks: newNameLocks()}
}

type objectStore struct {
	js    jetstream.JetStream
	obs   jetstream.ObjectStore
	locks *nameLocks

	mu     sync.Mutex
	bucket *bucketStream // nil until a Put has asked obs
}

// bucketStream is an object store bucket's name and its stream.
type bucketStream struct {
	name   string
	stream jetstream.Stream
}

// chunkSize is the size of an object's chunks, jetstream's default (a
// reader takes the chunks as they are; the size is recorded in the meta's
// options as jetstream's Put records it).
const chunkSize = 128 << 10

// maxRounds bounds the rounds of one Put attempt: a round after the first
// happens only because the name's meta moved between our read and our
// write (a racing writer or delete, or a replica that answered from behind
// the leader).
const maxRounds = 10

// transferTimeout bounds one attempt that moves size bytes. jsretry.Do
// bounds an attempt by jsretry.AttemptTimeout, which suits a request; a
// large object needs longer, so attempts that move bytes take their own
// bound from the caller's context instead of the attempt's.
func transferTimeout(size uint64) time.Duration {
	return jsretry.AttemptTimeout + time.Duration(size>>20)*time.Second
}

// stream returns the bucket's name and stream, asking obs and js the first
// time. Concurrent first callers may each ask; any answer will do.
func (s *objectStore) stream(ctx context.Context) (*bucketStream, error) {
	s.mu.Lock()
	b := s.bucket
	s.mu.Unlock()
	if b != nil {
		return b, nil
	}
	status, err := s.obs.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("object store status: %w", err)
	}
	name := status.Bucket()
	st, err := s.js.Stream(ctx, "OBJ_"+name)
	if err != nil {
		return nil, fmt.Errorf("stream of bucket %s: %w", name, err)
	}
	b = &bucketStream{name: name, stream: st}
	s.mu.Lock()
	s.bucket = b
	s.mu.Unlock()
	return b, nil
}

// written is an object whose chunks are stored and whose meta is not known
// to be: what a Put attempt leaves for the next one.
type written struct {
	info   jetstream.ObjectInfo
	meta   []byte // info as the meta message's data
	expect uint64 // the meta subject's last sequence the meta is published against
	// maybeSent is set once a meta publish went unanswered: that meta may
	// still be stored, and only while the meta subject stays at expect.
	maybeSent bool
}

func (s *objectStore) Put(ctx context.Context, name string, data []byte) error {
	if _, _, _, err := ParseName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	unlock, err := s.locks.lock(ctx, name)
	if err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	defer unlock()
	sum := sha256.Sum256(data)
	p := &objectPut{s: s, ctx: ctx, name: name, data: data, sum: sum[:]}
	_, err = jsretry.Do(ctx, func(actx context.Context) (struct{}, error) {
		return struct{}{}, p.attempt(actx)
	})
	if p.w != nil {
		p.abandon()
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	return nil
}

// objectPut is one Put's state across its attempts.
type objectPut struct {
	s    *objectStore
	ctx  context.Context // the caller's
	name string
	data []byte
	sum  []byte
	b    *bucketStream
	w    *written // chunks stored by an earlier round or attempt, meta not known stored
}

// errMoved is a round that lost its meta publish to another write of the
// name's meta: the next round reads again.
var errMoved = errors.New("meta moved")

// attempt makes the object stored, or finds it stored: its first round
// under actx, and each later one under a bound of its own from p.ctx.
func (p *objectPut) attempt(actx context.Context) error {
	if p.b == nil {
		b, err := p.s.stream(actx)
		if err != nil {
			return err
		}
		p.b = b
	}
	err := p.round(actx)
	var backoff jsretry.Backoff
	for rounds := 1; errors.Is(err, errMoved); rounds++ {
		if rounds == maxRounds {
			return fmt.Errorf("the meta of %s moved under %d writes in a row", p.name, maxRounds)
		}
		if werr := backoff.Wait(p.ctx); werr != nil {
			return werr
		}
		rctx, cancel := context.WithTimeout(p.ctx, jsretry.AttemptTimeout)
		err = p.round(rctx)
		cancel()
	}
	return err
}

// round reads the name's meta under rctx and, when the name is absent,
// writes the object (or publishes again a meta an earlier round wrote the
// chunks of). It is errMoved when the meta publish found the meta subject
// moved on from the sequence read.
func (p *objectPut) round(rctx context.Context) error {
	last, seq, err := p.lastMeta(rctx)
	if err != nil {
		return err
	}
	if p.w != nil {
		switch {
		case last != nil && last.NUID == p.w.info.NUID:
			// An earlier meta publish was stored though unanswered.
			// (Deleted since, it was still put.)
			p.w = nil
			return nil
		case seq > p.w.expect:
			// Someone else wrote the meta: ours can no longer be stored,
			// and its chunks are no one's.
			p.purge(p.w.info.NUID)
			p.w = nil
		}
		// Otherwise the meta is where ours expects it (or a replica
		// answered from behind the leader): publish ours again, and the
		// leader decides.
	}
	if p.w == nil {
		if last != nil && !last.Deleted {
			return sameDigest(p.name, last, p.sum)
		}
		if err := p.writeChunks(seq); err != nil {
			return err
		}
	}
	err = p.publishMeta()
	switch {
	case err == nil:
		p.w = nil
		return nil
	case objstore.WrongLastSequence(err):
		return errMoved
	default:
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) && !errors.Is(err, jetstream.ErrNoStreamResponse) {
			p.w.maybeSent = true // unanswered, not refused
		}
		return fmt.Errorf("publish meta: %w", err)
	}
}

// lastMeta returns the name's last meta (a deleted object's marker too)
// and its sequence in the stream; nil and 0 when the name has none.
func (p *objectPut) lastMeta(ctx context.Context) (*jetstream.ObjectInfo, uint64, error) {
	return objstore.LastMeta(ctx, p.b.stream, p.b.name, p.name)
}

// writeChunks publishes p.data as the chunks of a new object, one publish
// acknowledged before the next so they are stored in order, and sets p.w
// to it, to be published against the meta subject's sequence expect. On
// an error it purges what it published.
func (p *objectPut) writeChunks(expect uint64) error {
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: p.name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize}},
		Bucket:     p.b.name,
		NUID:       nuid.Next(),
		Size:       uint64(len(p.data)),
		Chunks:     uint32((len(p.data) + chunkSize - 1) / chunkSize),
		Digest:     "SHA-256=" + base64.URLEncoding.EncodeToString(p.sum),
	}
	meta, err := json.Marshal(&info)
	if err != nil {
		return fmt.Errorf("encode meta: %w", err)
	}
	tctx, cancel := context.WithTimeout(p.ctx, transferTimeout(info.Size))
	defer cancel()
	subj := objstore.ChunkSubject(p.b.name, info.NUID)
	for i, off := 0, 0; off < len(p.data); i, off = i+1, off+chunkSize {
		m := &nats.Msg{Subject: subj, Data: p.data[off:min(off+chunkSize, len(p.data))]}
		if _, err := p.s.js.PublishMsg(tctx, m); err != nil {
			// No meta names these chunks: they are no one's.
			p.purge(info.NUID)
			return fmt.Errorf("publish chunk %d of %d: %w", i+1, info.Chunks, err)
		}
	}
	p.w = &written{info: info, meta: meta, expect: expect}
	return nil
}

// publishMeta publishes p.w's meta as jetstream's object store does (a
// rollup of the name's meta subject), provided the subject's last message
// is still at p.w.expect (none at all for 0).
func (p *objectPut) publishMeta() error {
	mctx, cancel := context.WithTimeout(p.ctx, jsretry.AttemptTimeout)
	defer cancel()
	return objstore.PublishMeta(mctx, p.s.js, p.b.name, p.name, p.w.meta, p.w.expect)
}

// abandon is a failed Put's cleanup of chunks it stored: they are purged
// when no meta of ours can name them. A meta publish that went unanswered
// may yet be stored while the name's meta subject stays where it expects,
// so then the chunks stay (to be found by the next Put as the object, or
// to stay unreferenced in the stream).
func (p *objectPut) abandon() {
	w := p.w
	p.w = nil
	if !w.maybeSent {
		p.purge(w.info.NUID)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), jsretry.AttemptTimeout)
	defer cancel()
	last, seq, err := p.lastMeta(ctx)
	if err != nil || (last != nil && last.NUID == w.info.NUID) || seq <= w.expect {
		return
	}
	p.purge(w.info.NUID)
}

// purge removes an object's chunks, best effort (objstore.Purge).
func (p *objectPut) purge(objNUID string) { objstore.Purge(p.ctx, p.b.stream, p.b.name, objNUID) }

// sameDigest is nil when info's digest is sum, and a *ConflictError
// otherwise.
func sameDigest(name string, info *jetstream.ObjectInfo, sum []byte) error {
	d, err := jetstream.DecodeObjectDigest(info.Digest)
	if err != nil {
		return fmt.Errorf("stored digest %q: %w", info.Digest, err)
	}
	if !bytes.Equal(d, sum) {
		return &ConflictError{Name: name, StoredSHA256: hex.EncodeToString(d), PutSHA256: hex.EncodeToString(sum)}
	}
	return nil
}

func (s *objectStore) Get(ctx context.Context, name string) ([]byte, error) {
	if _, _, _, err := ParseName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", name, err)
	}
	data, err := jsretry.Do(ctx, func(actx context.Context) ([]byte, error) {
		info, err := s.obs.GetInfo(actx, name)
		if err != nil {
			return nil, notFound(err)
		}
		tctx, cancel := context.WithTimeout(ctx, transferTimeout(info.Size))
		defer cancel()
		// GetBytes checks the bytes against the stored digest
		// (jetstream.ErrDigestMismatch). A Delete during the read purges
		// the chunks: the read then times out, and the next attempt finds
		// the object gone.
		data, err := s.obs.GetBytes(tctx, name)
		if err != nil {
			return nil, notFound(err)
		}
		return data, nil
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", name, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

func notFound(err error) error {
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return ErrNotFound
	}
	return err
}

func (s *objectStore) Delete(ctx context.Context, name string) error {
	if _, _, _, err := ParseName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	unlock, err := s.locks.lock(ctx, name)
	if err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	defer unlock()
	return objstore.Delete(ctx, s.obs, name)
}

func (s *objectStore) Exists(ctx context.Context, name string) (bool, error) {
	if _, _, _, err := ParseName(name); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("exists %s: %w", name, err)
	}
	return objstore.Exists(ctx, s.obs, name)
}
