// Package claudecode provides the Claude Code CLI adapter ("claude-code"):
// its strict typed Request, the `claude -p … --output-format stream-json
// --verbose` command grammar, and the parser that maps the CLI's
// stream-json events onto the chunk stream of docs/contract.md §1, on the
// shared subprocess transport (pkg/adapter/cli, pkg/adapter/cli/proc).
//
// # Operators
//
// The binary is `claude` from the npm package @anthropic-ai/claude-code,
// pinned at the version the grammar was captured from:
//
//	npm install -g @anthropic-ai/claude-code@2.1.197
//
// The child process never sees the runner's environment. Besides PATH,
// HOME, LANG, LC_ALL, TZ, TMPDIR, TERM and USER (pkg/adapter/cli/proc's base set) it
// receives only these variables, when the runner has them:
//
//	ANTHROPIC_API_KEY   the provider key the CLI authenticates with
//	ANTHROPIC_BASE_URL  the Messages API base URL (a proxy or a test double)
//	CLAUDE_CONFIG_DIR   where the CLI keeps its settings and session transcripts
//
// DefaultConfig also sets, as fixed values, the switches that keep a headless
// CLI from phoning home or updating itself:
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, DISABLE_TELEMETRY,
// DISABLE_AUTOUPDATER, DISABLE_ERROR_REPORTING and DISABLE_BUG_COMMAND, all
// "1". Each attempt additionally sets CLAUDE_CODE_MAX_RETRIES (see Spec).
//
// Sessions are stored by the CLI under
// $CLAUDE_CONFIG_DIR/projects/<cwd>/<session_id>.jsonl, keyed by the
// working directory: a conversation resumes only in the same workspace and
// with the same CLAUDE_CONFIG_DIR.
//
// Run as root, the CLI refuses --dangerously-skip-permissions (captured:
// exit 1, "cannot be used with root/sudo privileges") and may refuse
// permission_mode "bypassPermissions" the same way; such a run ends as a
// ProviderProcessError carrying the CLI's stderr. IS_SANDBOX is deliberately
// not passed through.
package claudecode
