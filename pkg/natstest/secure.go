package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// SecureServerName is the only name in the certificate of a server
// RunSecure starts: a client dialing its 127.0.0.1 URL must set it as the
// TLS server name (AGENTMESH_NATS_TLS_SERVER_NAME).
const SecureServerName = "nats.agentmesh.test"

// Secure is what a server RunSecure started demands, and the files that
// meet it or fail it, all PEM or seed files in a temporary directory.
type Secure struct {
	// CA is the certificate of the CA that signed the server's and
	// ClientCert; ClientCert and ClientKey are a client's certificate.
	CA, ClientCert, ClientKey string
	// Seed is a file holding the nkey seed of the server's one user.
	Seed string
	// StrangerCert and StrangerKey are a client certificate of another
	// CA; StrangerSeed is a user seed the server does not know.
	StrangerCert, StrangerKey, StrangerSeed string
}

// TLSFiles are the PEM files of a test's TLS: a CA, a server certificate
// for one name signed by it, and a client certificate signed by it.
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// WriteTLS makes a new CA, a server certificate whose only name is
// serverName (a DNS name, no IP address) and a client certificate, all
// valid for a day, and writes them to a new temporary directory.
func WriteTLS(t testing.TB, serverName string) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	ca := newCA(t)
	server := ca.issue(t, serverName, x509.ExtKeyUsageServerAuth)
	client := ca.issue(t, "agentmesh-test-client", x509.ExtKeyUsageClientAuth)
	return TLSFiles{
		CA:         writeFile(t, dir, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})),
		ServerCert: writeFile(t, dir, "server.pem", server.certPEM),
		ServerKey:  writeFile(t, dir, "server-key.pem", server.keyPEM),
		ClientCert: writeFile(t, dir, "client.pem", client.certPEM),
		ClientKey:  writeFile(t, dir, "client-key.pem", client.keyPEM),
	}
}

// StrangerCert writes a client certificate and its key signed by a CA of
// its own, which no server of the test trusts.
func StrangerCert(t testing.TB) (cert, key string) {
	t.Helper()
	dir := t.TempDir()
	c := newCA(t).issue(t, "stranger", x509.ExtKeyUsageClientAuth)
	return writeFile(t, dir, "stranger.pem", c.certPEM), writeFile(t, dir, "stranger-key.pem", c.keyPEM)
}

// RunSecure starts a JetStream server as RunJetStream does that takes only
// TLS connections presenting a client certificate its CA signed, and then
// only the one nkey user whose seed is in Secure.Seed. It is shut down
// when the test ends.
func RunSecure(t testing.TB) (*server.Server, Secure) {
	t.Helper()
	opts, sec := secureOptions(t)
	dir := t.TempDir()
	user, seed := userKey(t)
	sec.Seed = writeFile(t, dir, "user.nk", seed)
	_, strangerSeed := userKey(t)
	sec.StrangerSeed = writeFile(t, dir, "stranger.nk", strangerSeed)
	opts.Nkeys = []*server.NkeyUser{{Nkey: user}}
	return startSecure(t, opts), sec
}

// Operator is what a server RunOperator started demands: TLS as in Secure
// (whose Seed and StrangerSeed are empty), and a user JWT of its one
// account.
type Operator struct {
	Secure
	// Creds is a .creds file of a user of the server's account, with
	// JetStream; StrangerCreds one of an account the server's operator
	// never signed.
	Creds, StrangerCreds string
}

// RunOperator starts a JetStream server in operator (JWT) mode: it trusts
// one operator, whose one account (JetStream enabled, no limits) has a
// user in Operator.Creds, and takes only TLS connections as RunSecure's
// does. The accounts' JWTs are in memory. It is shut down when the test
// ends.
func RunOperator(t testing.TB) (*server.Server, Operator) {
	t.Helper()
	opts, sec := secureOptions(t)
	op := Operator{Secure: sec}
	operator := key(t, nkeys.CreateOperator)
	opPub, _ := operator.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "agentmesh-test"
	opJWT, err := oc.Encode(operator)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	oc, err = jwt.DecodeOperatorClaims(opJWT)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	resolver := &server.MemAccResolver{}
	account := func(name string, js bool) (pub string, kp nkeys.KeyPair) {
		kp = key(t, nkeys.CreateAccount)
		pub, _ = kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		token, err := ac.Encode(operator)
		if err != nil {
			t.Fatalf("natstest: %v", err)
		}
		if err := resolver.Store(pub, token); err != nil {
			t.Fatalf("natstest: %v", err)
		}
		return pub, kp
	}
	sys, _ := account("SYS", false)
	_, mesh := account("AGENTMESH", true)
	dir := t.TempDir()
	op.Creds = writeFile(t, dir, "user.creds", userCreds(t, mesh))
	op.StrangerCreds = writeFile(t, dir, "stranger.creds", userCreds(t, key(t, nkeys.CreateAccount)))
	opts.TrustedOperators = []*jwt.OperatorClaims{oc}
	opts.AccountResolver = resolver
	opts.SystemAccount = sys
	return startSecure(t, opts), op
}

// userCreds is the .creds file of a new user of account.
func userCreds(t testing.TB, account nkeys.KeyPair) []byte {
	t.Helper()
	user := key(t, nkeys.CreateUser)
	pub, _ := user.PublicKey()
	token, err := jwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	seed, _ := user.Seed()
	b, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return b
}

// secureOptions are the options of a JetStream server on a random
// loopback port that takes only TLS connections with a client certificate
// of a new CA, and the files that meet it or fail it.
func secureOptions(t testing.TB) (*server.Options, Secure) {
	t.Helper()
	files := WriteTLS(t, SecureServerName)
	sec := Secure{CA: files.CA, ClientCert: files.ClientCert, ClientKey: files.ClientKey}
	sec.StrangerCert, sec.StrangerKey = StrangerCert(t)
	pair, err := tls.LoadX509KeyPair(files.ServerCert, files.ServerKey)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	ca, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		TLS: true, TLSVerify: true, TLSTimeout: 5,
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair},
			ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		},
	}, sec
}

// startSecure starts a server on opts, shut down when the test ends.
func startSecure(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("natstest: secure server not ready")
	}
	return s
}

func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return p
}

// userKey makes a user nkey: its public key and its seed.
func userKey(t testing.TB) (string, []byte) {
	t.Helper()
	kp := key(t, nkeys.CreateUser)
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return pub, seed
}

// key makes an nkey with create (nkeys.CreateUser, ...).
func key(t testing.TB, create func() (nkeys.KeyPair, error)) nkeys.KeyPair {
	t.Helper()
	kp, err := create()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return kp
}

// testCA is a self-signed CA of a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// issued is a certificate and its key, PEM-encoded.
type issued struct{ certPEM, keyPEM []byte }

func newCA(t testing.TB) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: "agentmesh test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return &testCA{cert: cert, key: key}
}

// issue signs a leaf certificate for name (its common name and, for a
// server, its one DNS name) with usage.
func (ca *testCA) issue(t testing.TB, name string, usage x509.ExtKeyUsage) issued {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return issued{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return n
}
