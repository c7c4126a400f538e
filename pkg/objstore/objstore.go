// Package objstore provides what agentmesh's writers of JetStream object
// stores share (pkg/exporter/trajstore, pkg/artifacts): the subjects of the
// object store's stream format, the read of an object's last meta, the
// publish of a meta against the sequence read, a bounded purge of chunks,
// and an idempotent delete and exists. They write objects themselves, not
// through jetstream.ObjectStore's Put, which has no conditional write.
//
// Every function blocks until JetStream answered or ctx ended and is safe
// for concurrent use.
package objstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MetaSubject is where bucket's object name has its meta.
func MetaSubject(bucket, name string) string {
	return "$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// ChunkSubject is where the chunks of bucket's object nuid are.
func ChunkSubject(bucket, nuid string) string { return "$O." + bucket + ".C." + nuid }

// LastMeta returns the last meta of bucket's object name (a deleted
// object's marker too) from st, the bucket's stream, and its sequence; nil
// and 0 when name has none. It makes one request.
func LastMeta(ctx context.Context, st jetstream.Stream, bucket, name string) (*jetstream.ObjectInfo, uint64, error) {
	m, err := st.GetLastMsgForSubject(ctx, MetaSubject(bucket, name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read meta: %w", err)
	}
	var info jetstream.ObjectInfo
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return nil, 0, fmt.Errorf("meta at sequence %d: %w: %w", m.Sequence, jetstream.ErrBadObjectMeta, err)
	}
	return &info, m.Sequence, nil
}

// PublishMeta publishes meta, the JSON of an object's info, as the object
// store does (a rollup of the name's meta subject), provided the subject's
// last message is still at expect (none at all for 0). A subject moved
// on is an error for which WrongLastSequence is true.
func PublishMeta(ctx context.Context, js jetstream.JetStream, bucket, name string, meta []byte, expect uint64) error {
	m := nats.NewMsg(MetaSubject(bucket, name))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = meta
	_, err := js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expect))
	return err
}

// WrongLastSequence reports whether err is a publish refused because the
// subject moved on from the sequence expected.
func WrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Purge removes the chunks of bucket's object nuid from st, best effort:
// it is cleanup after an outcome is settled, bounded on its own so that it
// runs also when ctx has ended. Chunks a failed purge leaves stay
// unreferenced in the stream.
func Purge(ctx context.Context, st jetstream.Stream, bucket, nuid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jsretry.AttemptTimeout)
	defer cancel()
	_ = st.Purge(ctx, jetstream.WithPurgeSubject(ChunkSubject(bucket, nuid)))
}

// Delete removes name from obs through transient errors; an absent name is
// success. jetstream's Delete finds a deleted object's marker too, and
// then writes the marker and purges the chunks again: a delete whose purge
// failed after the marker was written is completed by the next one.
func Delete(ctx context.Context, obs jetstream.ObjectStore, name string) error {
	_, err := jsretry.Do(ctx, func(actx context.Context) (struct{}, error) {
		err := obs.Delete(actx, name)
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

// Exists reports whether name is stored in obs (a deleted object is not).
func Exists(ctx context.Context, obs jetstream.ObjectStore, name string) (bool, error) {
	ok, err := jsretry.Do(ctx, func(actx context.Context) (bool, error) {
		_, err := obs.GetInfo(actx, name) // a deleted object's marker is not found
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
