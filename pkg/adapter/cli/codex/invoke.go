package codex

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/argv"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// flags are the options of `codex exec` and `codex exec resume`, in the
// order the transcripts show them. Cd and Sandbox exist only on a new
// thread: exec resume accepts neither, so a resumed run gets the workspace
// as its process cwd and the sandbox as a -c override.
type flags struct {
	JSON             bool     `cli:"--json"`
	SkipGitRepoCheck bool     `cli:"--skip-git-repo-check"`
	Cd               string   `cli:"-C"`
	Sandbox          string   `cli:"-s"`
	Model            string   `cli:"-m"`
	Config           []string `cli:"-c"`
}

// invoke builds one attempt's command line. provider is the config.toml
// provider that takes the retry overrides, or "" for none; confined says
// the run is in the runner's sandbox (cli.Config.Confine), which is then
// the boundary of a workspace-write run (see sandboxMode).
//
// The prompt is the last element, after "--": without it a prompt that
// starts with "-" would be read as an option and one that is exactly
// "resume" or "review" as a subcommand.
func invoke(req Request, call adapter.Call, dir, provider string, confined bool) (cli.Invocation, error) {
	var inv cli.Invocation
	model := modelOf(req, call)
	if model != "" && !modelRE.MatchString(model) {
		return inv, wire.Errorf(wire.AgenticRequestValidationError, "%s: model %q is not a model name %s", Name, model, modelRE)
	}
	sandbox := sandboxMode(req.Sandbox, confined)
	f := flags{JSON: true, SkipGitRepoCheck: true, Model: model}
	args := []string{"exec"}
	if req.ResumeThreadID != "" {
		args = append(args, "resume")
		f.Config = append(f.Config, configArg("sandbox_mode", sandbox))
	} else {
		f.Cd, f.Sandbox = dir, sandbox
		if req.DeveloperInstructions != "" {
			f.Config = append(f.Config, configArg("developer_instructions", req.DeveloperInstructions))
		}
		if req.ModelInstructionsFile != "" {
			inv.Files = append(inv.Files, req.ModelInstructionsFile)
			f.Config = append(f.Config, configArg("model_instructions_file", filepath.Join(dir, req.ModelInstructionsFile)))
		}
	}
	if provider != "" {
		// One model call makes at most MaxAttempts requests: no HTTP-level
		// retries inside a stream attempt, MaxAttempts-1 reconnects.
		key := "model_providers." + provider + "."
		f.Config = append(f.Config,
			key+"request_max_retries=0",
			key+"stream_max_retries="+strconv.Itoa(retries(call.MaxAttempts)))
	}
	args = append(args, argv.Build(&f)...)
	if req.ResumeThreadID != "" {
		args = append(args, req.ResumeThreadID)
	}
	inv.Args = append(args, "--", req.Prompt)
	return inv, nil
}

// sandboxMode is the Codex sandbox mode a run's commands get for the
// request's sandbox. Confined, a workspace-write run gets
// danger-full-access: Codex's own Linux sandbox (bubblewrap) cannot be
// built inside the runner's when the runner is root, since the CLI is uid
// 0 there without CAP_SETFCAP and the kernel lets no such process map uid
// 0 into a user namespace ("bwrap: setting up uid map: Operation not
// permitted", every command failing), and the runner's sandbox already
// confines what workspace-write is for: writes to the workspace and the
// CLI's state, egress only to the model API. A read-only run keeps
// Codex's sandbox, the only one that can keep the workspace read-only:
// its commands fail rather than write where a runner that is root
// cannot build it.
func sandboxMode(requested string, confined bool) string {
	if requested == "" {
		requested = DefaultSandbox
	}
	if confined && requested == SandboxWorkspaceWrite {
		return sandboxFullAccess
	}
	return requested
}

// retries is the CLI's stream_max_retries for an attempt policy; a policy
// of 0 is the contract's default (docs/contract.md §4.5).
func retries(maxAttempts int) int {
	if maxAttempts <= 0 {
		maxAttempts = wire.DefaultMaxAttempts
	}
	return min(maxAttempts-1, 100) // Codex caps the setting at 100
}

// modelOf is the model the run asks Codex for: the request's, else the pin's.
func modelOf(req Request, call adapter.Call) string {
	if req.Model != "" {
		return req.Model
	}
	return call.Model
}

// configArg is a -c override key="value" whose value Codex parses as a
// TOML basic string, so any text survives quoting.
func configArg(key, value string) string {
	var b strings.Builder
	b.Grow(len(key) + len(value) + 3)
	b.WriteString(key)
	b.WriteString(`="`)
	for _, r := range value { // an invalid byte arrives as U+FFFD
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
