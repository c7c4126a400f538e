package proc

import (
	"os"
	"sort"
	"strings"
)

// baseEnv is what every child may see of the runner's environment: enough
// to find programs and a home, nothing that can carry a secret.
var baseEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM", "USER"}

// AllowEnv builds a child environment: the runner's own values of the base
// variables (PATH, HOME, LANG, LC_ALL, TZ, TMPDIR, TERM, USER) and of the
// names in allow, then set, which wins. Nothing else of the runner's
// environment (its NATS credentials, other profiles' provider keys) reaches
// the child. The result is sorted, so it is deterministic.
func AllowEnv(allow []string, set map[string]string) []string {
	env := map[string]string{}
	for _, names := range [][]string{baseEnv, allow} {
		for _, k := range names {
			if v, ok := os.LookupEnv(k); ok {
				env[k] = v
			}
		}
	}
	for k, v := range set {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsRune(k, '=') {
			continue
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
