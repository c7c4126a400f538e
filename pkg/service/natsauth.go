package service

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	natsjwt "github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// NATSAuth names the files that authenticate a connection to NATS beyond
// a password or token in AGENTMESH_NATS_URL: a .creds file or an nkey
// seed, and TLS (a CA bundle, a client certificate and its key, and the
// name the server's certificate must carry). It holds paths only; the
// secrets are read by Options, at start-up. Every field is optional.
type NATSAuth struct {
	// NatsCreds is a .creds file as nsc writes it: a user JWT and the
	// user's nkey seed (AGENTMESH_NATS_CREDS).
	NatsCreds string `split_words:"true" desc:"file holding a user JWT and its nkey seed (.creds)"`
	// NatsNkey is a file holding a user's nkey seed, "SU…"
	// (AGENTMESH_NATS_NKEY).
	NatsNkey string `split_words:"true" desc:"file holding a user nkey seed (SU...)"`
	// NatsTLSCa is a PEM bundle of the CAs that verify the server's
	// certificate (AGENTMESH_NATS_TLS_CA); unset, the system's roots. The
	// name is spelt Ca so that the variable splits as TLS_CA.
	NatsTLSCa string `split_words:"true" desc:"PEM CA bundle verifying the server (default: the system roots)"`
	// NatsTLSCert and NatsTLSKey are the PEM client certificate and its
	// key, for a server that verifies clients (AGENTMESH_NATS_TLS_CERT,
	// AGENTMESH_NATS_TLS_KEY); both or neither.
	NatsTLSCert string `split_words:"true" desc:"PEM client certificate (with AGENTMESH_NATS_TLS_KEY)"`
	NatsTLSKey  string `split_words:"true" desc:"PEM key of the client certificate"`
	// NatsTLSServerName is the name the server's certificate must hold,
	// when it is not the host of the URL (AGENTMESH_NATS_TLS_SERVER_NAME).
	NatsTLSServerName string `split_words:"true" desc:"name the server certificate must hold (default: the URL's host)"`
}

// NATSAuthVariables are the variables that set NATSAuth's fields, each
// in the field it sets: the names Options reports.
var NATSAuthVariables = NATSAuth{
	NatsCreds:         "AGENTMESH_NATS_CREDS",
	NatsNkey:          "AGENTMESH_NATS_NKEY",
	NatsTLSCa:         "AGENTMESH_NATS_TLS_CA",
	NatsTLSCert:       "AGENTMESH_NATS_TLS_CERT",
	NatsTLSKey:        "AGENTMESH_NATS_TLS_KEY",
	NatsTLSServerName: "AGENTMESH_NATS_TLS_SERVER_NAME",
}

// TLS reports whether a names any TLS setting, so that the connection
// must be TLS.
func (a NATSAuth) TLS() bool {
	return a.NatsTLSCa != "" || a.NatsTLSCert != "" || a.NatsTLSKey != "" || a.NatsTLSServerName != ""
}

// Options reads the files a names and returns the nats.Connect options
// that present them: the .creds file's JWT and seed or the nkey seed, and
// a TLS configuration (TLS 1.2 at least) when any TLS field is set. Every
// problem, all at once, is an ErrConfig naming the field's name in names
// (NATSAuthVariables for the environment; the agentmesh command passes
// its flags' names): a missing or unreadable file, a .creds file without
// a JWT or seed, a seed that is not a user's, both a .creds file and a
// seed, a CA file without a certificate, a certificate without its key or
// a key that does not match it. Nothing secret is in an error. It reads
// each file once; the options hold what was read.
func (a NATSAuth) Options(names NATSAuth) ([]nats.Option, error) {
	var bad Problems
	var opts []nats.Option
	if a.NatsCreds != "" && a.NatsNkey != "" {
		bad.Add(names.NatsCreds, "set together with %s; a .creds file holds its own seed: set one of them", names.NatsNkey)
	}
	if a.NatsCreds != "" {
		if opt, err := credsOption(a.NatsCreds); err != nil {
			bad.Add(names.NatsCreds, "%v", err)
		} else {
			opts = append(opts, opt)
		}
	}
	if a.NatsNkey != "" {
		if opt, err := nkeyOption(a.NatsNkey); err != nil {
			bad.Add(names.NatsNkey, "%v", err)
		} else {
			opts = append(opts, opt)
		}
	}
	if a.TLS() {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.NatsTLSServerName}
		if a.NatsTLSCa != "" {
			pool, err := caPool(a.NatsTLSCa)
			if err != nil {
				bad.Add(names.NatsTLSCa, "%v", err)
			}
			tc.RootCAs = pool
		}
		switch {
		case (a.NatsTLSCert == "") != (a.NatsTLSKey == ""):
			set, unset := names.NatsTLSCert, names.NatsTLSKey
			if a.NatsTLSCert == "" {
				set, unset = unset, set
			}
			bad.Add(unset, "must be set with %s (a client certificate and its key go together)", set)
		case a.NatsTLSCert != "":
			if cert, err := keyPair(a.NatsTLSCert, a.NatsTLSKey); err != nil {
				bad.Add(names.NatsTLSCert, "%v", err)
			} else {
				tc.Certificates = []tls.Certificate{cert}
			}
		}
		opts = append(opts, nats.Secure(tc))
	}
	if err := bad.Err(); err != nil {
		return nil, err
	}
	return opts, nil
}

// credsOption reads a .creds file: the user JWT and the seed that signs
// the server's nonce.
func credsOption(path string) (nats.Option, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	token, err := nkeys.ParseDecoratedJWT(b)
	if err != nil || !strings.HasPrefix(token, "eyJ") {
		return nil, fmt.Errorf("%s holds no user JWT (a .creds file has a -----BEGIN NATS USER JWT----- block)", path)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s holds no user nkey seed (a .creds file has a -----BEGIN USER NKEY SEED----- block)", path)
	}
	claims, err := natsjwt.DecodeUserClaims(token)
	if err != nil {
		return nil, fmt.Errorf("%s: the user JWT does not decode: %v", path, err)
	}
	if pub, err := kp.PublicKey(); err != nil || pub != claims.Subject {
		return nil, fmt.Errorf("%s: the seed is not the key of the JWT's user %s", path, claims.Subject)
	}
	if claims.Expires != 0 && time.Unix(claims.Expires, 0).Before(time.Now()) {
		return nil, fmt.Errorf("%s: the user JWT expired at %s", path, time.Unix(claims.Expires, 0).UTC().Format(time.RFC3339))
	}
	return nats.UserJWT(func() (string, error) { return token, nil }, kp.Sign), nil
}

// nkeyOption reads a file holding a user's nkey seed.
func nkeyOption(path string) (nats.Option, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	// The seed alone, as nk -gen user writes it (any line ending), or
	// decorated as in a .creds file.
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		kp, err = nkeys.ParseDecoratedNKey(b)
	}
	var pub string
	if err == nil {
		pub, err = kp.PublicKey()
	}
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return nil, fmt.Errorf("%s holds no user nkey seed (SU…)", path)
	}
	return nats.Nkey(pub, kp.Sign), nil
}

// caPool reads a PEM bundle of CA certificates.
func caPool(path string) (*x509.CertPool, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// keyPair reads a PEM client certificate and its key. The error of
// tls.X509KeyPair never quotes the key.
func keyPair(certPath, keyPath string) (tls.Certificate, error) {
	cb, err := readFile(certPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	kb, err := readFile(keyPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(cb, kb)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s with key %s: %v", certPath, keyPath, err)
	}
	return cert, nil
}

// readFile reads path, which must be a regular file that is not empty.
func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("read %s: %v", path, err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return b, nil
}

// ConnectConfig is Connect with cfg's URL and credentials: it reads the
// files cfg.NATSAuth names (Options) and dials cfg.NatsURL as client name.
// Every service connects through it.
func ConnectConfig(cfg Config, name string, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	opts, err := cfg.NATSAuth.Options(NATSAuthVariables)
	if err != nil {
		return nil, nil, err
	}
	return Connect(cfg.NatsURL, name, log, opts...)
}
