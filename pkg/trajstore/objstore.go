package trajstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/jsretry"
	"github.com/nats-io/nats.go/jetstream"
)

// NewObjectStore is a Store over a JetStream object store: the mesh's
// agentmesh_trajectories (pkg/topology creates it, subject.Names
// TrajectoryStore names it). Requests are made again through a leader
// election or a reconnect (pkg/jsretry) until ctx ends.
//
// jetstream.ObjectStore's own Put replaces an existing object and purges
// the old chunks, which a reader of the old version may still be reading.
// This Store never replaces: Put first reads the object's info and compares
// its SHA-256 digest with the bytes put, writing only when the name is
// absent. Puts of one name through one Store are serialized. Two Stores
// (two processes) racing to put one absent name both write; the object
// holds the same bytes either way, but the loser's chunks may stay in the
// stream unreferenced until the bucket is purged (the object store API
// gives no create-only write).
func NewObjectStore(os jetstream.ObjectStore) Store {
	return &objectStore{obs: os, locks: newNameLocks()}
}

type objectStore struct {
	obs   jetstream.ObjectStore
	locks *nameLocks
}

// transferTimeout bounds one attempt that moves size bytes. jsretry.Do
// bounds an attempt by jsretry.AttemptTimeout, which suits a request; a
// large object needs longer, so attempts that move bytes take their own
// bound from the caller's context instead of the attempt's.
func transferTimeout(size uint64) time.Duration {
	return jsretry.AttemptTimeout + time.Duration(size>>20)*time.Second
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
	_, err = jsretry.Do(ctx, func(actx context.Context) (struct{}, error) {
		// An earlier attempt may have stored the object before it failed:
		// each attempt looks first.
		stored, err := s.obs.GetInfo(actx, name)
		switch {
		case err == nil:
			return struct{}{}, sameDigest(name, stored, sum[:])
		case !errors.Is(err, jetstream.ErrObjectNotFound):
			return struct{}{}, err
		}
		tctx, cancel := context.WithTimeout(ctx, transferTimeout(uint64(len(data))))
		defer cancel()
		if _, err := s.obs.PutBytes(tctx, name, data); err != nil {
			return struct{}{}, err
		}
		// Another process may have put the name at the same time; the
		// last meta written is the object, and it must hold our bytes.
		cctx, cancel := context.WithTimeout(ctx, jsretry.AttemptTimeout)
		defer cancel()
		stored, err = s.obs.GetInfo(cctx, name)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, sameDigest(name, stored, sum[:])
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	return nil
}

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
	// jetstream's Delete finds a deleted object's marker too, and then
	// writes the marker and purges the chunks again: a delete whose purge
	// failed after the marker was written is completed by the next one.
	_, err = jsretry.Do(ctx, func(actx context.Context) (struct{}, error) {
		err := s.obs.Delete(actx, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return struct{}{}, nil
		}
		return struct{}{}, err
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

func (s *objectStore) Exists(ctx context.Context, name string) (bool, error) {
	if _, _, _, err := ParseName(name); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("exists %s: %w", name, err)
	}
	ok, err := jsretry.Do(ctx, func(actx context.Context) (bool, error) {
		_, err := s.obs.GetInfo(actx, name) // a deleted object's marker is not found
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return false, fmt.Errorf("exists %s: %w", name, err)
	}
	return ok, nil
}
