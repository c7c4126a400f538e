package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// KeyPrefix starts every API key, so a leaked one is recognisable.
const KeyPrefix = "amk_"

// keyBytes is the random part of a key: 256 bits, so its SHA-256 alone
// (unsalted, unstretched) keeps it safe.
const keyBytes = 32

// ErrKeyNotFound is returned by Keys.Revoke for an id no key has.
var ErrKeyNotFound = errors.New("api key not found")

// ErrBadKey is returned by Keys.Lookup for a key that is malformed, unknown
// or revoked. Its message never holds the key.
var ErrBadKey = errors.New("invalid api key")

// Key is what the mesh keeps of an API key: never the key itself. It is
// stored as JSON ({"v": 1, ...}, decoded strictly): only the gateway and
// the agentmesh command read it, never a service on the run path.
type Key struct {
	V int `json:"v"`
	// ID is the first 12 hex digits of the key's SHA-256: it names the key
	// in list and revoke without revealing it.
	ID        string `json:"id"`
	Tenant    string `json:"tenant"`
	Principal string `json:"principal"`
	Created   int64  `json:"created"` // unix ms
}

// Keys is the API key store over the agentmesh_apikeys bucket. It is safe
// for concurrent use.
type Keys struct {
	kv jetstream.KeyValue
}

// OpenKeys opens the key store; the bucket is created by topology.Ensure.
func OpenKeys(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Keys, error) {
	kv, err := js.KeyValue(ctx, names.APIKeysBucket())
	if err != nil {
		return nil, fmt.Errorf("open api keys bucket %s: %w", names.APIKeysBucket(), err)
	}
	return &Keys{kv: kv}, nil
}

// hashKey is the hex SHA-256 of key, its name in the bucket.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Create makes a new key for tenant and principal and returns it with its
// record. The key is returned only here: the store keeps its hash.
func (k *Keys) Create(ctx context.Context, tenant, principal string) (string, Key, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("principal", principal)); err != nil {
		return "", Key{}, err
	}
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", Key{}, err
	}
	key := KeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	h := hashKey(key)
	rec := Key{V: wire.Version, ID: h[:12], Tenant: tenant, Principal: principal, Created: time.Now().UnixMilli()}
	val, err := json.Marshal(rec)
	if err != nil {
		return "", Key{}, err
	}
	if _, err := k.kv.Create(ctx, h, val); err != nil {
		return "", Key{}, fmt.Errorf("store api key %s: %w", rec.ID, err)
	}
	return key, rec, nil
}

// Lookup returns the record of key, or ErrBadKey for a key the store does
// not hold. It blocks for one read of the bucket.
func (k *Keys) Lookup(ctx context.Context, key string) (Key, error) {
	if !strings.HasPrefix(key, KeyPrefix) || len(key) > 128 {
		return Key{}, ErrBadKey
	}
	e, err := k.kv.Get(ctx, hashKey(key))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return Key{}, ErrBadKey
	case err != nil:
		return Key{}, fmt.Errorf("read api key: %w", err)
	}
	rec, err := decodeKey(e.Value())
	if err != nil {
		return Key{}, fmt.Errorf("api key %s: %w", hashKey(key)[:12], err)
	}
	return rec, nil
}

// List returns every key's record, of tenant only unless tenant is "",
// sorted by tenant, principal and creation.
func (k *Keys) List(ctx context.Context, tenant string) ([]Key, error) {
	lister, err := k.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	var out []Key
	for h := range lister.Keys() {
		e, err := k.kv.Get(ctx, h)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // revoked meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read api key %s: %w", h[:min(12, len(h))], err)
		}
		rec, err := decodeKey(e.Value())
		if err != nil {
			return nil, fmt.Errorf("api key %s: %w", h[:min(12, len(h))], err)
		}
		if tenant == "" || rec.Tenant == tenant {
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.Principal != b.Principal {
			return a.Principal < b.Principal
		}
		return a.Created < b.Created
	})
	return out, nil
}

// Revoke deletes the key whose id (Key.ID, or a longer prefix of its hash)
// is id; the next request with it is refused. An id matching no key, or
// more than one, is an error.
func (k *Keys) Revoke(ctx context.Context, id string) (Key, error) {
	if len(id) < 12 {
		return Key{}, fmt.Errorf("%w: id %q is shorter than 12 hex digits", ErrKeyNotFound, id)
	}
	lister, err := k.kv.ListKeys(ctx)
	if err != nil {
		return Key{}, fmt.Errorf("list api keys: %w", err)
	}
	var match []string
	for h := range lister.Keys() {
		if strings.HasPrefix(h, id) {
			match = append(match, h)
		}
	}
	switch len(match) {
	case 0:
		return Key{}, fmt.Errorf("%w: %s", ErrKeyNotFound, id)
	case 1:
	default:
		return Key{}, fmt.Errorf("api key id %s is ambiguous: %d keys", id, len(match))
	}
	e, err := k.kv.Get(ctx, match[0])
	if err != nil {
		return Key{}, fmt.Errorf("read api key %s: %w", id, err)
	}
	rec, err := decodeKey(e.Value())
	if err != nil {
		return Key{}, fmt.Errorf("api key %s: %w", id, err)
	}
	if err := k.kv.Delete(ctx, match[0], jetstream.LastRevision(e.Revision())); err != nil {
		return Key{}, fmt.Errorf("revoke api key %s: %w", id, err)
	}
	return rec, nil
}

// decodeKey strictly decodes a stored key record.
func decodeKey(b []byte) (Key, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var k Key
	if err := d.Decode(&k); err != nil {
		return Key{}, fmt.Errorf("decode api key record: %w", err)
	}
	if k.V != wire.Version {
		return Key{}, fmt.Errorf("%w: api key record v=%d, want %d", wire.ErrVersion, k.V, wire.Version)
	}
	return k, nil
}
