// Package pi provides the Pi coding agent adapter ("pi"): its strict typed
// Request, the `pi --mode json -p … PROMPT` command grammar, and the Parser
// that maps Pi's JSON event lines onto the chunk stream of
// docs/contract.md §1, on the shared subprocess transport (pkg/adapter/cli,
// pkg/adapter/cli/proc).
//
// # Operators
//
// The binary is `pi` from the npm package @mariozechner/pi-coding-agent,
// pinned at the version the grammar was captured from:
//
//	npm install -g @mariozechner/pi-coding-agent@0.73.1
//
// The child never sees the runner's environment. Besides pkg/adapter/cli/proc's base
// set (PATH, HOME, LANG, LC_ALL, TZ, TMPDIR, TERM, USER) DefaultConfig lets
// it receive only these variables, when the runner has them:
//
//	PI_CODING_AGENT_DIR  Pi's config directory: models.json (providers, their
//	                     baseUrl and the NAME of the variable holding each
//	                     provider's key), settings.json, auth.json, sessions/
//	FAKE_PI_API_KEY      the provider key variable models.json names in the
//	                     captured setup
//
// and sets PI_OFFLINE=1 and PI_TELEMETRY=0, which stop Pi's startup update
// checks and install telemetry. A profile that points Pi at another
// provider adds the key variable its models.json names (for example
// ANTHROPIC_API_KEY) to the profile's environment list; nothing else is
// passed. Pi's base URL is not an environment variable: it is the
// provider's baseUrl in $PI_CODING_AGENT_DIR/models.json.
//
// # The sandbox and the key
//
// A sandboxed run's egress is every baseUrl of models.json and that of each
// built-in provider whose key is held, below (ConfigBaseURLs, read at the
// runner's start). A provider there with a baseUrl, an apiKey
// and an api whose header the runner's key proxy knows (anthropic-messages:
// x-api-key; openai-completions, openai-responses, mistral-conversations:
// Authorization Bearer; google-generative-ai: x-goog-api-key; a provider
// without an api takes that of the models that use its baseUrl) has its
// key held by the proxy when the child would get it: the variable apiKey
// names, when the child's environment sets it, else apiKey itself (a
// literal), as Pi resolves it. An apiKey "!command" is run by Pi and never
// held. Pi's built-in anthropic, openai and google providers take their
// key from ANTHROPIC_API_KEY, OPENAI_API_KEY and GEMINI_API_KEY before any
// apiKey: when the child gets one, the proxy holds it for the provider's
// baseUrl in models.json, else Pi's own (https://api.anthropic.com,
// https://api.openai.com/v1,
// https://generativelanguage.googleapis.com/v1beta), with or without a
// models.json; ANTHROPIC_OAUTH_TOKEN, which Pi prefers, is not held.
//
// Such a confined run gets an agent directory of its own (overlay), made
// in the runner's temp dir and removed after the run: PI_CODING_AGENT_DIR
// names it, and it holds a models.json in which each keyed provider's
// baseUrl (and each of its models') is the proxy's loopback URL and its
// apiKey sandbox.Placeholder, its credential headers dropped, and a
// symlink to each other entry of the real directory (settings.json,
// extensions/, skills/, prompts/, bin/, …), which the sandbox binds
// read-only (PI_AGENTMESH_READ_ONLY lists them). The real models.json and
// auth.json are not in the run's view, and where a state directory of the
// run would show them (a HOME the profile sets) the sandbox masks them
// (LoginFiles: /dev/null in their place). auth.json (a /login, or keys
// stored there) is masked so in every confined run, overlay or not, and
// reaches a run only when the profile lists it in credential_files; an
// overlay then links it. The
// sessions stay in the real directory: PI_CODING_AGENT_SESSION_DIR is its
// sessions/--<workspace>-- (SessionDir), where Pi keeps them anyway,
// bound read-write, unless the profile sets that variable itself; so a
// run resumes the sessions of earlier runs, confined or not. The key
// variable holds the placeholder in the run's environment (the sandbox
// sets it). A run that is not confined, or whose proxy holds none of
// models.json's keys, reads the real directory as before.
//
// Pi reads its retry policy only from $PI_CODING_AGENT_DIR/settings.json
// (and a project's .pi/settings.json), so it cannot be set per run without
// writing a shared file. Operators should set
//
//	{"retry": {"provider": {"maxRetries": 0}}}
//
// there, so that each of Pi's agent-level attempts is one request; the
// adapter bounds those attempts by the run's attempt policy from the event
// stream (see Invoke and Parser).
//
// # Request
//
// A msgpack map, decoded strictly (Decode):
//
//	prompt                string    required; the last argv element, alone. Must not
//	                                begin with "-" or "@" (pi would read an option or
//	                                attach a file; it has no "--")
//	model                 string    --model; default: the run's pinned model
//	provider              string    --provider
//	thinking              string    --thinking: off, minimal, low, medium, high, xhigh
//	tools                 []string  --tools a,b (tool names)
//	no_tools              bool      --no-tools (not together with tools)
//	system_prompt         string    --system-prompt
//	append_system_prompt  string    --append-system-prompt
//	resume                string    --session: a full Pi session id (UUID)
//
// Pi has no permission, sandbox or max-turns switch; tools is what limits
// an agent (tools read,grep,find,ls is a read-only run). Pi reads
// system_prompt and append_system_prompt as files when they name an
// existing path; such a path must stay inside the workspace.
//
// # Sessions
//
// The adapter is resumable through the request field "resume" (ResumeField).
// The first line Pi prints, {"type":"session","id":…}, confirms the session
// id; the parser publishes it at once as metadata.session_id on a system
// chunk, and again on the result. A second run with resume set to that id
// runs `pi … --session <id> PROMPT`, and Pi prints the same id. Pi keeps
// sessions under $PI_CODING_AGENT_DIR/sessions/--<cwd>--/ (a confined run
// with an overlay too, see above), so a
// conversation continues only with the same config directory and the same
// workspace (Pi would ask on stdin to fork a session of another directory;
// stdin is /dev/null).
//
// # Stream
//
// See Parser for the event mapping. The result carries the run's usage,
// summed over its assistant messages (Pi reports usage per message), the
// cost Pi priced from models.json as total_cost_usd, num_turns (assistant
// messages that completed), the last stop_reason, the model and the session
// id. Pi reports no durations. An API failure, which Pi reports in-band
// with exit status 0, is the one error chunk, classed by its HTTP status:
// 401/403 ProviderAuthError, 429 and overload ProviderQuotaError, a context
// overflow ProviderContextError, other statuses ProviderError, network
// failures ProviderTransportError.
package pi
