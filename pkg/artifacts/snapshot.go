package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// SnapshotPrefix begins every snapshot id: "sha256:<64 lowercase hex>".
const SnapshotPrefix = wire.SnapshotPrefix

// ValidSnapshotID checks that id is "sha256:" and 64 lowercase hex digits
// (wire.CheckSnapshotID); a bad one matches ErrInvalidName.
func ValidSnapshotID(id string) error {
	if err := wire.CheckSnapshotID(id); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidName, err)
	}
	return nil
}

func snapshotObject(tenant, id string) string { return tenant + "/" + id }

// PushSnapshot stores r as one of the tenant's workspace snapshots and
// returns its content address, "sha256:<hex>" of its bytes. The bytes are
// read to a temporary file within the snapshot limit first: over it,
// PushSnapshot fails with a *TooLargeError having written nothing.
// Pushing the same bytes again stores them again, so the snapshot is kept
// for the artifact retention from its last push; it is idempotent.
func (s *Store) PushSnapshot(ctx context.Context, tenant string, r io.Reader) (string, error) {
	if err := subject.ValidToken("tenant", tenant); err != nil {
		return "", err
	}
	sp, err := spool(s.cfg.TempDir, r, s.cfg.SnapshotLimit, "snapshot")
	if err != nil {
		return "", err
	}
	defer sp.close()
	id := SnapshotPrefix + sp.hex()
	if err := s.snapshots.put(ctx, snapshotObject(tenant, id), sp, true); err != nil {
		return "", err
	}
	return id, nil
}

// OpenSnapshot returns a reader of the tenant's snapshot id and its length.
// The reader fails with ErrCorrupt at the end of bytes whose SHA-256 is not
// id's; the caller closes it, and ctx must last while it reads. A snapshot
// not stored (or expired) is ErrNotFound; one over this store's snapshot
// limit is a *TooLargeError.
func (s *Store) OpenSnapshot(ctx context.Context, tenant, id string) (io.ReadCloser, int64, error) {
	size, err := s.StatSnapshot(ctx, tenant, id)
	if err != nil {
		return nil, 0, err
	}
	rc, err := s.snapshots.open(ctx, snapshotObject(tenant, id), strings.TrimPrefix(id, SnapshotPrefix), size)
	if err != nil {
		return nil, 0, err
	}
	return rc, size, nil
}

// StatSnapshot returns the length of the tenant's snapshot id, as
// OpenSnapshot would open it: a snapshot not stored (never pushed by the
// tenant, or expired) is ErrNotFound, one over this store's snapshot
// limit a *TooLargeError, a malformed id ErrInvalidName.
func (s *Store) StatSnapshot(ctx context.Context, tenant, id string) (int64, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), ValidSnapshotID(id)); err != nil {
		return 0, err
	}
	info, _, err := s.snapshots.lastMeta(ctx, snapshotObject(tenant, id))
	if err != nil {
		return 0, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	if info == nil || info.Deleted {
		return 0, fmt.Errorf("%w: snapshot %s of tenant %s (never pushed by the tenant, or expired)", ErrNotFound, id, tenant)
	}
	size := int64(info.Size)
	if size > s.cfg.SnapshotLimit {
		return 0, &TooLargeError{What: "snapshot " + id, Limit: s.cfg.SnapshotLimit, Size: size}
	}
	return size, nil
}
