package sandbox

import "crypto/x509"

// TrustUpstream makes the key proxy trust roots on an https API (nil:
// the system's again), for tests against an httptest TLS server.
func TrustUpstream(roots *x509.CertPool) { upstreamRoots = roots }
