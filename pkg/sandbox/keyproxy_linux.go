package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentmesh/agentmesh/pkg/sandbox/sandboxinit"
)

// withKeyed checks a policy's keyed APIs and credential files and adds
// what they need to s: each keyed endpoint to the egress (once: an
// endpoint that is keyed is served only through the key proxy).
func (s *Sandbox) withKeyed(p Policy) error {
	k, err := parseKeyed(p.Keyed)
	if err != nil {
		return err
	}
	for _, a := range k {
		if !slices.Contains(s.egress, a.endpoint) {
			s.egress = append(s.egress, a.endpoint)
		}
	}
	s.keyed = k
	for _, f := range p.CredentialFiles {
		if !filepath.IsAbs(f) {
			return fmt.Errorf("credential file %q: want an absolute path", f)
		}
		s.credFiles = append(s.credFiles, filepath.Clean(f))
	}
	for _, f := range p.LoginFiles {
		if !filepath.IsAbs(f) {
			return fmt.Errorf("login file %q: want an absolute path", f)
		}
		s.logins = append(s.logins, filepath.Clean(f))
	}
	return nil
}

// KeyedURL is the base URL a confined run reaches the API at api
// through (ProxyURL), and whether this sandbox holds that API's key: an
// adapter whose CLI reads its base URL from a config file writes this URL
// there for a confined run when ok.
func (s *Sandbox) KeyedURL(api string) (string, bool) {
	_, base, ep, err := apiURL(api)
	if err != nil {
		return "", false
	}
	for _, a := range s.keyed {
		if a.endpoint == ep && a.base == base {
			return "http://" + ep.String() + base, true
		}
	}
	return "", false
}

// addCredentialFiles binds the policy's credential files read-only.
func (s *Sandbox) addCredentialFiles(v *view) error {
	for _, f := range s.credFiles {
		if err := v.system(f); err != nil {
			return fmt.Errorf("credential file: %w", err)
		}
	}
	return nil
}

// maskLogins masks each login file that exists and that a bind of the
// view shows (a state directory): the run finds /dev/null at its path,
// empty, and what it writes there is lost; it can neither remove nor
// rename a mount point. The file is resolved first, so a symlink to a
// login elsewhere in the view masks that. A credential file, bound
// already at its path, keeps its bind (view.add takes the first mount
// of a path).
func (s *Sandbox) maskLogins(v *view) {
	for _, f := range s.logins {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			continue // absent: nothing to read
		}
		if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() || !v.covered(real) {
			continue
		}
		v.add(sandboxinit.Mount{Kind: "file", Src: os.DevNull, Dst: real})
	}
}

// startKeys starts the run's key proxy, when the sandbox holds keys.
func (r *run) startKeys() {
	if len(r.s.keyed) == 0 {
		return
	}
	r.keys = newKeyProxy(r.s.keyed)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.keys.serve()
	}()
}
