package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/agentmesh/agentmesh/pkg/objstore"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// objects is one object store bucket, written in the object store's
// stream format (chunks on $O.<bucket>.C.<nuid>, then the meta on
// $O.<bucket>.M.<name> as a subject rollup) so every object store client
// reads what it writes, and read through jetstream.ObjectStore.
// jetstream.ObjectStore's own Put is not used: it has no conditional
// write, and in nats.go v1.55 it can leak a goroutine (see
// pkg/exporter/trajstore).
type objects struct {
	js     jetstream.JetStream
	obs    jetstream.ObjectStore
	stream jetstream.Stream
	bucket string
}

func openObjects(ctx context.Context, js jetstream.JetStream, bucket string) (*objects, error) {
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", bucket, err)
	}
	st, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("stream of object store %s: %w", bucket, err)
	}
	return &objects{js: js, obs: obs, stream: st, bucket: bucket}, nil
}

const chunkSize = 128 << 10

// lastMeta returns name's last meta (a deleted object's marker too) and its
// sequence; nil and 0 when name has none.
func (o *objects) lastMeta(ctx context.Context, name string) (*jetstream.ObjectInfo, uint64, error) {
	type got struct {
		info *jetstream.ObjectInfo
		seq  uint64
	}
	g, err := jsretry.Do(ctx, func(ctx context.Context) (got, error) {
		info, seq, err := objstore.LastMeta(ctx, o.stream, o.bucket, name)
		return got{info, seq}, err
	})
	return g.info, g.seq, err
}

// spooled is bytes read to a temporary file, within a limit, with their
// SHA-256 and length.
type spooled struct {
	f    *os.File
	sum  []byte
	size int64
}

func (s *spooled) hex() string { return hex.EncodeToString(s.sum) }

func (s *spooled) close() {
	_ = s.f.Close()
	_ = os.Remove(s.f.Name())
}

// spool copies r to a temporary file in dir, failing with a *TooLargeError
// as soon as more than limit bytes were read: nothing reaches the mesh
// before the bytes are known to be within their limit.
func spool(dir string, r io.Reader, limit int64, what string) (*spooled, error) {
	f, err := os.CreateTemp(dir, "agentmesh-artifact-*")
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", what, err)
	}
	s := &spooled{f: f}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, limit+1))
	if err == nil && n > limit {
		err = &TooLargeError{What: what, Limit: limit, Size: n}
	}
	if err != nil {
		s.close()
		if !errors.Is(err, ErrTooLarge) {
			err = fmt.Errorf("read %s: %w", what, err)
		}
		return nil, err
	}
	s.sum, s.size = h.Sum(nil), n
	return s, nil
}

// put stores the spooled bytes as name. An object already stored under
// name with the same digest is kept as it is, unless refresh is set: then
// it is written again and its old chunks purged (the object store's max
// age counts from the new write). Another digest under name is replaced
// only with refresh. The meta is published expecting name's meta subject
// where it was read, so of two writers racing one wins and the other finds
// its object.
func (o *objects) put(ctx context.Context, name string, s *spooled, refresh bool) error {
	for range 5 {
		last, seq, err := o.lastMeta(ctx, name)
		if err != nil {
			return fmt.Errorf("put %s: %w", name, err)
		}
		if last != nil && !last.Deleted && !refresh {
			if d, err := jetstream.DecodeObjectDigest(last.Digest); err == nil && bytes.Equal(d, s.sum) {
				return nil
			}
			return fmt.Errorf("put %s: %w: stored with another digest", name, ErrCorrupt)
		}
		id := nuid.Next()
		if err := o.writeChunks(ctx, id, s); err != nil {
			o.purge(ctx, id)
			return fmt.Errorf("put %s: %w", name, err)
		}
		err = o.publishMeta(ctx, name, id, s, seq)
		switch {
		case err == nil:
			if last != nil && !last.Deleted && last.NUID != "" {
				o.purge(ctx, last.NUID)
			}
			return nil
		case objstore.WrongLastSequence(err):
			o.purge(ctx, id) // another writer moved the meta: read again
			refresh = false
			continue
		default:
			// Unanswered, it may still be stored: keep the chunks if it is.
			if now, _, gerr := o.lastMeta(ctx, name); gerr == nil && now != nil && now.NUID == id {
				return nil
			}
			o.purge(ctx, id)
			return fmt.Errorf("put %s: publish meta: %w", name, err)
		}
	}
	return fmt.Errorf("put %s: its meta moved under 5 writes in a row", name)
}

func (o *objects) writeChunks(ctx context.Context, id string, s *spooled) error {
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	buf := make([]byte, chunkSize)
	subj := objstore.ChunkSubject(o.bucket, id)
	for i := 0; ; i++ {
		n, err := io.ReadFull(s.f, buf)
		if n > 0 {
			if _, perr := o.js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: buf[:n]}); perr != nil {
				return fmt.Errorf("publish chunk %d: %w", i+1, perr)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (o *objects) publishMeta(ctx context.Context, name, id string, s *spooled, expect uint64) error {
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize}},
		Bucket:     o.bucket,
		NUID:       id,
		Size:       uint64(s.size),
		Chunks:     uint32((s.size + chunkSize - 1) / chunkSize),
		Digest:     "SHA-256=" + base64.URLEncoding.EncodeToString(s.sum),
	}
	b, err := json.Marshal(&info)
	if err != nil {
		return err
	}
	return objstore.PublishMeta(ctx, o.js, o.bucket, name, b, expect)
}

// purge removes an object's chunks, best effort (objstore.Purge).
func (o *objects) purge(ctx context.Context, id string) { objstore.Purge(ctx, o.stream, o.bucket, id) }

// open returns a reader of name's bytes that fails with ErrCorrupt, at the
// end, unless they have sha256 sum (hex) and length size.
func (o *objects) open(ctx context.Context, name, sum string, size int64) (io.ReadCloser, error) {
	r, err := o.obs.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return &verified{r: r, h: sha256.New(), name: name, sum: sum, size: size}, nil
}

// Delete removes name's bytes; an absent name is success (objstore.Delete).
func (o *objects) Delete(ctx context.Context, name string) error {
	return objstore.Delete(ctx, o.obs, name)
}

// Exists reports whether name's bytes are stored.
func (o *objects) Exists(ctx context.Context, name string) (bool, error) {
	return objstore.Exists(ctx, o.obs, name)
}

// verified reads an object and checks, at its end, its SHA-256 and length
// against what its record says.
type verified struct {
	r    io.ReadCloser
	h    hash.Hash
	n    int64
	name string
	sum  string
	size int64
}

func (v *verified) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.n > v.size {
		return n, fmt.Errorf("%w: %s is longer than its %d bytes", ErrCorrupt, v.name, v.size)
	}
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); v.n != v.size || got != v.sum {
			return n, fmt.Errorf("%w: %s has %d bytes of sha256 %s, want %d of %s", ErrCorrupt, v.name, v.n, got, v.size, v.sum)
		}
	}
	return n, err
}

func (v *verified) Close() error { return v.r.Close() }
