// Package gemini provides the Gemini CLI adapter (@google/gemini-cli,
// binary "gemini", adapter name "gemini"): a strict typed request, the
// headless stream-json command grammar, and the parser that maps every
// stdout event to the chunk stream of docs/contract.md §1. It runs on the
// shared subprocess transport through pkg/adapter/cli.
//
// # Operators
//
// Install the pinned CLI with
//
//	npm install -g @google/gemini-cli@0.61.0
//
// The child never sees the runner's environment. Besides the transport's
// base variables (PATH, HOME, LANG, LC_ALL, TZ, TMPDIR, TERM, USER) it may
// receive only these, by name, from the runner (DefaultConfig's EnvAllow):
//
//	GEMINI_API_KEY          the Gemini API key (x-goog-api-key)
//	GOOGLE_GEMINI_BASE_URL  the API base URL: a proxy or a test double
//	GEMINI_CLI_HOME         the CLI's home, in place of HOME
//
// DefaultConfig also sets GEMINI_TELEMETRY_ENABLED=false. The CLI's own
// configuration lives under $GEMINI_CLI_HOME/.gemini, else $HOME/.gemini
// (settings.json, sessions); give it a settings.json that selects API-key
// auth, as the transcripts in testdata/cli/gemini show (with
// GOOGLE_GEMINI_BASE_URL set and no selection, the CLI picks its
// "gateway" auth and refuses it). A sandboxed run's HOME is private and
// empty unless the adapter sets it; GEMINI_CLI_HOME is bound read-write
// (StateVars), so a runner under the sandbox names it.
//
// The adapter itself sets, per run:
//
//	GEMINI_CLI_SYSTEM_SETTINGS_PATH  a read-only settings file holding only
//	                                 general.maxAttempts (see "Retries")
//	GEMINI_SYSTEM_MD                 the request's system_md file, if any
//
// # Request
//
// The request (msgpack map, snake_case keys) has these fields; anything else
// is an AgenticRequestValidationError naming the field:
//
//	prompt               string, required   -p PROMPT (or --prompt=PROMPT
//	                                        when it starts with "-", so the
//	                                        CLI cannot read it as a flag)
//	model                string             -m MODEL (see "Models")
//	approval_mode        enum               --approval-mode MODE: default,
//	                                        auto_edit, yolo or plan
//	resume               string (UUID)      --resume ID
//	include_directories  []string           --include-directories DIR, each
//	                                        relative to the run's workspace
//	system_md            string             GEMINI_SYSTEM_MD=<workspace>/FILE:
//	                                        replaces the system prompt
//
// Without approval_mode no flag is passed and the CLI's configured default
// applies ("default" unless settings say otherwise). In that mode a headless
// run does not even offer run_shell_command, write_file, replace or
// web_fetch to the model; tool use needs approval_mode "yolo" (or
// "auto_edit" for edits only).
//
// # Models
//
// The model is the request's model if set, else the run's pinned model
// (adapter.Call.Model). It is passed to -m after two spelling mappings: the
// Gemini API resource form "models/gemini-2.5-flash" and the forms with a
// provider prefix, "gemini/…" and "google/…", become "gemini-2.5-flash". The
// CLI's own aliases (auto, pro, flash, flash-lite, auto-gemini-2.5,
// auto-gemini-3) pass through unchanged and are resolved by the CLI; "auto"
// enables the CLI's model routing, which the transcripts did not exercise.
// With neither a request nor a pinned model, no -m is passed and the CLI's
// default model applies.
//
// # Retries
//
// The CLI retries 429 and 5xx answers itself, up to general.maxAttempts
// (default 10, about four minutes). The run's attempt policy is mapped onto
// that switch: retries = MaxAttempts-1, so general.maxAttempts =
// MaxAttempts (clamped to the CLI's 1…10; 0 means wire.DefaultMaxAttempts).
// The CLI has no flag or environment variable for it, so the adapter points
// GEMINI_CLI_SYSTEM_SETTINGS_PATH at a file that holds only that setting,
// named SettingsFileName(n) with SettingsContent(n). System settings are
// the CLI's highest-precedence layer and are deep-merged over the user's
// $HOME/.gemini/settings.json, so nothing else changes. This replaces the
// machine-wide /etc/gemini-cli/settings.json (and the system-defaults.json
// beside it) for the child: put operator settings in
// $HOME/.gemini/settings.json instead.
//
// The CLI loads that file only if the file and every directory from its
// parent up to "/" are owned by root and not writable by group or others
// (a sticky bit does not count: nothing below a mode-1777 /tmp passes); a
// symlink on the way must be owned by root, and a path that resolves
// elsewhere is checked there too. Otherwise it prints "Security Warning:
// Skipping system settings file …" on stderr and keeps its own 10 attempts.
// The adapter applies the same check before every run and uses the first
// of SettingsDirs that passes: agentmesh/gemini under the user cache
// directory ($XDG_CACHE_HOME or $HOME/.cache), then SharedSettingsDir
// (/var/cache/agentmesh/gemini), then a per-user directory in the system
// temp dir. It creates a missing directory (mode 0700) only when the
// directories above it pass and the runner is root. The files are
// content-addressed (one per value), written atomically, replaced when
// their content or mode is wrong and never modified in place, so
// concurrent runs and runners share them safely and nothing is left per
// run. A sandboxed run (pkg/sandbox) sees none of those directories, so
// DefaultConfig names EnvSystemSettingsPath in ReadOnlyVars: the file is
// bound read-only at its own path, owned by root inside as outside when
// the runner is root (a runner that is not root sees it owned by nobody,
// and the CLI refuses it as above).
//
// So a root runner works with any home, including one in the temp dir (the
// first candidate fails, SharedSettingsDir passes). A runner that is not
// root cannot create a file the CLI accepts; root provisions
// SharedSettingsDir for it once:
//
//	install -d -o root -g root -m 0755 /var/cache/agentmesh/gemini
//	for n in 1 2 3 4 5 6 7 8 9 10; do
//	  printf '{"general":{"maxAttempts":%d}}\n' $n |
//	    install -o root -g root -m 0644 /dev/stdin \
//	      /var/cache/agentmesh/gemini/system-settings-max-attempts-$n.json
//	done
//
// When no candidate passes, the run fails before the CLI starts with a
// non-retryable ProviderTransportError naming each candidate and why it was
// refused (the runner logs it with the run id as the run's end). When the
// CLI prints the skip warning anyway (a directory changed under a running
// runner, a newer CLI with another rule), the adapter stops the CLI at once
// and fails the run with a ProviderTransportError quoting the warning:
// running on would silently retry up to 10 times, for minutes, against the
// run's policy.
//
// # Sessions
//
// The adapter is resumable with resume field "resume". The parser publishes
// the init event's session_id as metadata.session_id on a system chunk as
// soon as it arrives (an init whose id is not a UUID is a protocol error and
// publishes nothing); a later run passes it back as --resume ID, and the CLI
// continues the same session under the same id.
//
// # Stream
//
// init → system (provider, model, session_id, capabilities); assistant
// message deltas → text (is_delta true); tool_use / tool_result → tool_use /
// tool_result with the CLI's tool id, the tool_result's is_error set when
// its status is "error"; result with status "success" → one result chunk
// (no content: the CLI's result carries no text) with usage, duration_ms
// and session_id. A result with status "error" (the CLI then exits with the
// HTTP status modulo 256) and an error event of severity "error" → the one
// error chunk, classed from the API status: 401/403 ProviderAuthError, 429
// ProviderQuotaError, an over-long prompt ProviderContextError, anything
// else ProviderError. The user's echoed prompt and error events of severity
// "warning" are dropped as telemetry; any other event is a
// ProviderProtocolError. The CLI never prints its thinking, so there are no
// thinking chunks; usage.reasoning_tokens is derived as total_tokens minus
// input_tokens minus output_tokens, which is where the CLI counts thoughts.
package gemini
