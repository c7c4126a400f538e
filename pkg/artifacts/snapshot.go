package artifacts

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/subject"
)

// SnapshotPrefix begins every snapshot id: "sha256:<64 lowercase hex>".
const SnapshotPrefix = "sha256:"

// ValidSnapshotID checks that id is "sha256:" and 64 lowercase hex digits.
func ValidSnapshotID(id string) error {
	hexPart, ok := strings.CutPrefix(id, SnapshotPrefix)
	if !ok || len(hexPart) != 2*sha256.Size {
		return fmt.Errorf("%w: snapshot id %q is not %s and %d hex digits", ErrInvalidName, id, SnapshotPrefix, 2*sha256.Size)
	}
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("%w: snapshot id %q has %q; want lowercase hex", ErrInvalidName, id, c)
		}
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
	if err := errors.Join(subject.ValidToken("tenant", tenant), ValidSnapshotID(id)); err != nil {
		return nil, 0, err
	}
	name := snapshotObject(tenant, id)
	info, _, err := s.snapshots.lastMeta(ctx, name)
	if err != nil {
		return nil, 0, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	if info == nil || info.Deleted {
		return nil, 0, fmt.Errorf("%w: snapshot %s of tenant %s", ErrNotFound, id, tenant)
	}
	size := int64(info.Size)
	if size > s.cfg.SnapshotLimit {
		return nil, 0, &TooLargeError{What: "snapshot " + id, Limit: s.cfg.SnapshotLimit, Size: size}
	}
	rc, err := s.snapshots.open(ctx, name, strings.TrimPrefix(id, SnapshotPrefix), size)
	if err != nil {
		return nil, 0, err
	}
	return rc, size, nil
}
