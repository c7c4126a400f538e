// Package codex provides the Codex CLI adapter: the typed request, the
// `codex exec --json` command grammar, resumption through
// `codex exec resume <thread_id>`, and the parser that maps the CLI's JSONL
// events onto the chunk stream of docs/contract.md §1. The grammar was
// captured from @openai/codex 0.171.0 (the recorded transcripts are in
// testdata/cli/codex).
//
// # Operator setup
//
// Codex reads its model provider from $CODEX_HOME/config.toml, which is the
// operator's file, never written by the adapter. It must select a provider
// and define it, with the API key's environment variable named by env_key:
//
//	model = "gpt-5.5"
//	model_provider = "myprovider"
//	[model_providers.myprovider]
//	name = "myprovider"
//	base_url = "https://api.example.com/v1"
//	env_key = "OPENAI_API_KEY"
//	wire_api = "responses"
//	[features]
//	plugins = false   # else Codex reaches out to github.com at startup
//
// The child sees only the base variables of pkg/adapter/cli/proc (PATH, HOME, LANG,
// LC_ALL, TZ, TMPDIR, TERM, USER) and the names in Config.EnvAllow.
// DefaultConfig allows exactly:
//
//	CODEX_HOME      the config and session directory (default $HOME/.codex)
//	OPENAI_API_KEY  the provider key: list instead whatever env_key names
//	                (the transcripts use FAKE_OPENAI_API_KEY)
//	CODEX_API_KEY   the built-in openai provider's key (no model_provider,
//	                or "openai"), which codex exec reads before auth.json
//
// Codex needs nothing else; a base URL lives in config.toml.
//
// # Keys under the sandbox
//
// A run the runner's sandbox confines never holds the provider key
// (docs/operating.md, "Provider keys"). The runner's proxy holds the key
// of the selected provider and adds it to each request (Authorization:
// Bearer); the run's key variable holds sandbox.Placeholder and Codex is
// pointed at the proxy by a -c override before the prompt (ProxyArgs):
//
//	a provider config.toml defines   its env_key's key;
//	                                 -c model_providers.<id>.base_url="<proxy>"
//	the built-in openai provider     CODEX_API_KEY's key, else OPENAI_API_KEY's
//	                                 (which codex exec 0.171 ignores; the proxy
//	                                 adds it all the same);
//	                                 -c openai_base_url="<proxy>"
//
// The built-in provider's API is openai_base_url, else
// DefaultOpenAIBaseURL; Codex 0.171 reads no OPENAI_BASE_URL. A child
// given CODEX_API_KEY and OPENAI_API_KEY with different keys is refused
// when the runner starts: the run would hold the one the proxy does not.
//
// $CODEX_HOME/auth.json holds Codex's login (codex login --with-api-key,
// or a ChatGPT login's tokens). $CODEX_HOME is a state directory, bound
// read-write into the run, so the file is masked there (LoginFiles,
// sandbox.Policy.LoginFiles: /dev/null at its path, empty, what the run
// writes there lost) unless the profile names it in credential_files,
// which binds it read-only (Codex reads an API-key login so; a ChatGPT
// login also needs egress to chatgpt.com and cannot refresh its tokens).
// A confined run whose built-in provider has no key variable but an
// auth.json the sandbox masks fails before Codex starts, a
// ProviderAuthError naming the file, CODEX_API_KEY and credential_files
// (HiddenLogin). The codex-acp profile (pkg/adapter/acp) reads the same
// CODEX_HOME and gets the same overrides and mask; it takes no key
// variable for the built-in provider without an ACP authenticate, which
// agentmesh does not send, so it needs its login in credential_files or
// a provider with env_key.
//
// # Request
//
// The request is a msgpack map decoded strictly (Decode):
//
//	prompt                   string  required: the last argv element, after "--"
//	model                    string  optional: -m; empty uses the pinned model (adapter.Call.Model)
//	sandbox                  string  optional: "workspace-write" (default) or "read-only";
//	                                 -s on a new thread, -c sandbox_mode="..." on resume
//	developer_instructions   string  optional: -c developer_instructions="..." (new thread only)
//	model_instructions_file  string  optional, relative to the workspace:
//	                                 -c model_instructions_file="<abs>" (new thread only)
//	resume_thread_id         string  optional UUID: codex exec resume <id> (the resume field)
//
// danger-full-access is refused: the model's tools would escape the
// workspace the runner contains. A run the runner's sandbox confines
// (cli.Config.Confine, pkg/sandbox) passes it for workspace-write
// nonetheless, as Codex documents for an externally sandboxed
// environment: Codex's own Linux sandbox (bubblewrap) cannot be built
// inside the runner's when the runner is root (the CLI is uid 0 there
// without CAP_SETFCAP, which a user namespace mapping uid 0 needs), and
// the runner's sandbox is the boundary: the workspace and the CLI's state
// directories ($CODEX_HOME included) writable, egress only to the model
// API. read-only keeps Codex's sandbox, so a runner that is root runs a
// read-only run's commands not at all rather than with the workspace
// writable. On resume Codex keeps the instructions the
// thread started with and ignores new ones, so the two instruction fields
// are not passed then.
//
// # Retries
//
// Codex retries a failed model request on its own (five stream reconnects
// by default, each with up to four HTTP retries). Those are settings of the
// selected provider, model_providers.<id>.stream_max_retries and
// request_max_retries, and Codex refuses them for a built-in provider such
// as "openai". The adapter reads config.toml (read only) and, when the
// selected provider is defined there under a bare-key id, passes
//
//	-c model_providers.<id>.request_max_retries=0
//	-c model_providers.<id>.stream_max_retries=<MaxAttempts-1>
//
// so one model call makes at most MaxAttempts requests and the mesh's
// attempt policy, not an inner loop, bounds them. With a built-in
// provider, or no readable config, the CLI's own defaults apply.
//
// # Sessions
//
// The adapter is resumable with resume field "resume_thread_id". The
// parser publishes thread.started's thread_id as metadata.session_id on a
// system chunk; a later run with resume_thread_id runs
// `codex exec resume --json ... <thread_id> -- <prompt>` in the workspace
// (exec resume accepts neither -C nor -s) and Codex confirms the same id.
//
// # Usage
//
// turn.completed's usage is cumulative over the whole thread. For a new
// thread that is exactly the run's usage. For a resumed thread the parser
// subtracts the thread's previous total, read before the run from the last
// token_count record of the thread's rollout file
// ($CODEX_HOME/sessions/YYYY/MM/DD/rollout-*-<thread_id>.jsonl, which
// resuming requires anyway). When that total cannot be read the result
// carries no usage rather than a wrong one; two runs resuming one thread at
// once can each see the other's tokens. Token classes are disjoint:
// input_tokens is uncached input, cache_read_tokens and cache_write_tokens
// the cached parts, output_tokens the visible output and reasoning_tokens
// the reasoning part of Codex's output count. Codex reports no cost, no
// model name and no turn count.
package codex
